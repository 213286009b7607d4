"""The pairing lock-out, without Ray: under five wrong codes an address may try again; the
fifth locks it out for the whole window from that miss; once the window passes it may try."""

from __future__ import annotations

from actors.devices.lockout import PairLockout


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_under_the_limit_an_address_may_try_again(store) -> None:
    clock = Clock()
    lockout = PairLockout(store, failures=5, window_seconds=900, clock=clock)
    for _ in range(4):
        assert await lockout.missed("10.0.0.1") is False
        clock.now += 1
    assert await lockout.retry_after("10.0.0.1") is None


async def test_the_fifth_miss_locks_the_address_out_for_the_window(store) -> None:
    clock = Clock()
    lockout = PairLockout(store, failures=5, window_seconds=900, clock=clock)
    results = [await lockout.missed("10.0.0.1") for _ in range(5)]
    assert results == [False, False, False, False, True]
    assert await lockout.retry_after("10.0.0.1") == 900
    clock.now += 100
    assert await lockout.retry_after("10.0.0.1") == 800
    # Another address is not affected.
    assert await lockout.retry_after("10.0.0.2") is None


async def test_over_the_limit_each_miss_extends_the_lock(store) -> None:
    clock = Clock()
    lockout = PairLockout(store, failures=5, window_seconds=900, clock=clock)
    for _ in range(5):
        await lockout.missed("10.0.0.1")
    clock.now += 300
    assert await lockout.missed("10.0.0.1") is True
    assert await lockout.retry_after("10.0.0.1") == 900


async def test_the_lock_ends_when_the_window_passes(store) -> None:
    clock = Clock()
    lockout = PairLockout(store, failures=5, window_seconds=900, clock=clock)
    for _ in range(5):
        await lockout.missed("10.0.0.1")
    clock.now += 899
    assert await lockout.retry_after("10.0.0.1") == 1
    clock.now += 1
    assert await lockout.retry_after("10.0.0.1") is None


async def test_misses_older_than_the_window_do_not_count(store) -> None:
    clock = Clock()
    lockout = PairLockout(store, failures=5, window_seconds=900, clock=clock)
    for _ in range(4):
        await lockout.missed("10.0.0.1")
    clock.now += 901
    assert await lockout.missed("10.0.0.1") is False
    assert await lockout.retry_after("10.0.0.1") is None
