"""How long a new conversation may wait for its actor's process in a burst.

A burst of new conversations that finds no warm spare queues for cold starts (`cold_starts`
at a time, first come first served; actors/session/registry.py). Waiting is better than failing
while the wait is short; past `start_wait` seconds a client that hears nothing for a minute
is worse off than one told at once that the server is busy and when to come back. The
registry keeps a moving average of how long a start takes and refuses a newcomer whose
estimated wait is over the bound with `SessionsBusy`, which the gateway answers with 503 and
a Retry-After of the seconds the queue there is now takes to drain.

Callers with no person waiting on the line (the scheduler's background turns) wait without
a bound. Pure logic: no Ray import.
"""

from __future__ import annotations

import math

from actors.common.errors import IriisError

# Before any start has been measured: a worker process plus the session package's imports.
FIRST_GUESS_SECONDS = 2.0
# How much the newest start moves the average (the rest is the history's).
WEIGHT = 0.3
RETRY_AFTER_MAX = 60


class SessionsBusy(IriisError):
    """Too many new conversations are waiting for a process; try again in `retry_after` s."""

    code = "overloaded"

    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)   # the one argument, so it pickles across actors
        self.retry_after = retry_after

    def __str__(self) -> str:
        return (f"Too many new conversations are waiting for a process to start; "
                f"try again in {self.retry_after} s.")


class StartClock:
    """The moving average of one cold start's seconds, and what it predicts for a queue."""

    def __init__(self, first_guess: float = FIRST_GUESS_SECONDS) -> None:
        self.seconds = first_guess

    def record(self, seconds: float) -> None:
        self.seconds += WEIGHT * (max(0.0, seconds) - self.seconds)

    def wait(self, ahead: int, at_once: int) -> float:
        """Seconds until a newcomer with `ahead` conversations queued before it has its
        process: the rounds of `at_once` starts before its own, and its own."""
        return (ahead // max(1, at_once) + 1) * self.seconds

    def refusal(self, ahead: int, at_once: int, bound: float | None) -> SessionsBusy | None:
        """None when the newcomer may queue; else the error, whose retry_after is how long the
        queue there is now takes to drain (no bound: never refused). Not the shorter time until
        its wait is under the bound again: every client refused in a burst would come back
        then, together, and most be sent away again (benchmarks/MEASURED.md: a burst of 100)."""
        if bound is None or ahead < at_once:
            return None     # it starts now: nothing to come back for
        expected = self.wait(ahead, at_once)
        if expected <= bound:
            return None
        return SessionsBusy(min(RETRY_AFTER_MAX, max(1, math.ceil(expected))))
