"""The relay's caps and the per-session write rate.

The defaults are the numbers every client of the original relay expects; they are returned to
the creator in `limits`, so a test (or an owner) may lower them and clients still learn the truth.
"""

from __future__ import annotations

import math
from collections import deque

from pydantic import BaseModel, Field


class RelayLimits(BaseModel):
    messages_per_minute: int = Field(default=60, ge=1)
    max_body_bytes: int = Field(default=65536, ge=1)
    max_file_bytes: int = Field(default=104857600, ge=1)
    max_storage_bytes: int = Field(default=1073741824, ge=1)
    max_messages: int = Field(default=10000, ge=1)
    inactivity_ttl_seconds: int = Field(default=86400, ge=1)
    grace_seconds: int = Field(default=86400, ge=0)
    max_wait_seconds: int = Field(default=55, ge=0)
    sessions_per_ip_per_hour: int = Field(default=30, ge=0)

    def warn_at(self, cap: int) -> int:
        """The usage at which `limit_warning` fires: 90% of the cap, rounded up."""
        return math.ceil(cap * 0.9)


class MinuteWindow:
    """At most `per_minute` writes in any rolling 60 seconds; time comes in from the caller.

    A rolling window rather than a refilling bucket: a burst of `per_minute` writes is allowed,
    and the next one is refused until a minute after the burst began, which is what "60 a
    minute" means to a client counting. Taking `now` as an argument keeps it pure: the relay's
    one clock (which tests can move) is the only source of time.
    """

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._stamps: deque[float] = deque()

    def seed(self, stamps: list[float]) -> None:
        """Resume from writes made before this window existed (a restarted actor reads them
        back from the log), so a restart is not a way around the rate."""
        self._stamps = deque(sorted(stamps)[-self.per_minute:])

    def take(self, now: float) -> int | None:
        """Spend one write; None when granted, else whole seconds until one is free (>= 1)."""
        while self._stamps and now - self._stamps[0] >= 60.0:
            self._stamps.popleft()
        if len(self._stamps) < self.per_minute:
            self._stamps.append(now)
            return None
        return max(1, math.ceil(self._stamps[0] + 60.0 - now))


def hourly_retry(stamps: list[float], now: float, per_hour: int) -> int | None:
    """At most `per_hour` events in any rolling hour (sessions created by one client address).
    `stamps` are the earlier events' times, read from the store so that the count survives
    restarts; None when one more is allowed (or the cap is off), else seconds until it is."""
    if per_hour <= 0:
        return None
    recent = sorted(t for t in stamps if now - t < 3600)
    if len(recent) < per_hour:
        return None
    # The slot frees when enough of the oldest have left the hour to drop below the cap.
    frees = recent[len(recent) - per_hour]
    return max(1, math.ceil(3600 - (now - frees)))
