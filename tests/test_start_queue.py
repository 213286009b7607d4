"""The bound on how long a new conversation may queue for its actor's process (pure logic)."""

from __future__ import annotations

import pickle

from actors.session.start_queue import RETRY_AFTER_MAX, SessionsBusy, StartClock


def test_the_estimate_counts_the_rounds_ahead_and_its_own_start() -> None:
    clock = StartClock(first_guess=2.0)
    assert clock.wait(0, 2) == 2.0           # starts now
    assert clock.wait(1, 2) == 2.0           # the second slot is free
    assert clock.wait(2, 2) == 4.0           # one round ahead, then its own
    assert clock.wait(5, 1) == 12.0
    assert clock.wait(3, 0) == 8.0           # a zero is read as one at a time


def test_the_average_follows_measured_starts() -> None:
    clock = StartClock(first_guess=2.0)
    clock.record(4.0)
    assert 2.0 < clock.seconds < 4.0
    for _ in range(30):
        clock.record(1.0)
    assert abs(clock.seconds - 1.0) < 0.01
    clock.record(-5.0)                        # a clock step backwards counts as nothing
    assert 0.0 <= clock.seconds < 1.0


def test_refused_only_past_the_bound_and_never_when_it_would_start_now() -> None:
    clock = StartClock(first_guess=2.0)
    assert clock.refusal(9, 1, None) is None               # no bound: waits its turn
    assert clock.refusal(0, 1, 0.5) is None                # starts now, however slow a start is
    assert clock.refusal(1, 2, 0.5) is None
    assert clock.refusal(4, 1, 10.0) is None               # at the bound: 5 starts x 2 s = 10 s
    over = clock.refusal(5, 1, 10.0)                       # just over: 12 s
    assert isinstance(over, SessionsBusy) and over.retry_after == 12   # when today's queue has drained
    far = clock.refusal(500, 1, 10.0)
    assert far is not None and far.retry_after == RETRY_AFTER_MAX
    barely = StartClock(first_guess=1.01).refusal(9, 1, 10.0)   # 10.1 s: whole seconds, rounded up
    assert barely is not None and barely.retry_after == 11
    quick = StartClock(first_guess=0.1).refusal(1, 1, 0.1)
    assert quick is not None and quick.retry_after == 1          # at least a second


def test_the_refusal_says_when_to_come_back_and_crosses_processes() -> None:
    busy = SessionsBusy(7)
    assert "try again in 7 s" in str(busy)
    copy = pickle.loads(pickle.dumps(busy))
    assert copy.retry_after == 7 and str(copy) == str(busy)
