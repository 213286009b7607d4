"""When an actor has been idle long enough to exit: the rule both per-thing actors share.

The actor calls `touch()` on every request and asks `due(busy)` from its timer; `period()` is
how often that timer should look. Pure logic with an injectable clock, so it is tested without Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class IdleWatch:
    def __init__(self, idle_seconds: float, clock: Callable[[], float] = time.monotonic,
                 max_period: float = 30.0) -> None:
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.max_period = max_period
        self.last = clock()

    def touch(self) -> None:
        self.last = self.clock()

    def idle_for(self) -> float:
        return self.clock() - self.last

    def due(self, busy: bool = False) -> bool:
        """True once nothing has happened for `idle_seconds` and nothing is in progress."""
        return not busy and self.idle_for() >= self.idle_seconds

    def period(self) -> float:
        return max(0.01, min(self.max_period, self.idle_seconds / 4))
