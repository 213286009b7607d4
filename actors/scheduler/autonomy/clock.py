"""The autonomy loop's calendar: the owner's day, rest hours, and how long to sleep.

Pure functions of an epoch time and a time zone, so the loop can be driven by an injected clock.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

MIN_CHECK_MINUTES = 10
MAX_CHECK_MINUTES = 240
DEFAULT_CHECK_MINUTES = 60


def clamp_minutes(value: object, default: int = DEFAULT_CHECK_MINUTES) -> int:
    """The agent's chosen `next_check_minutes`, clamped to 10-240 (a non-number: `default`)."""
    try:
        minutes = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        minutes = float(default)
    if minutes != minutes:  # NaN
        minutes = float(default)
    return int(max(MIN_CHECK_MINUTES, min(MAX_CHECK_MINUTES, round(minutes))))


def local(now: float, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(now, zone)


def local_day(now: float, zone: ZoneInfo) -> str:
    """The owner's calendar day at `now`, e.g. "2026-12-01"; budgets and plans are per day."""
    return local(now, zone).date().isoformat()


def next_midnight(now: float, zone: ZoneInfo) -> float:
    """The start of the owner's next calendar day (DST-aware)."""
    tomorrow = local(now, zone).date() + dt.timedelta(days=1)
    return dt.datetime.combine(tomorrow, dt.time(0), zone).timestamp()


@dataclass(frozen=True)
class RestHours:
    """Quiet hours from `start` to `end` (local hours; 23-7 wraps past midnight). `start ==
    end` or `None` means no rest hours."""

    start: int | None = None
    end: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> "RestHours":
        """ "23-7" -> RestHours(23, 7); "" -> none. Raises ValueError on anything else."""
        text = (text or "").strip()
        if not text:
            return cls()
        start, sep, end = text.partition("-")
        if not sep:
            raise ValueError(f"rest hours must look like 23-7, got {text!r}")
        a, b = int(start), int(end)
        if not (0 <= a <= 23 and 0 <= b <= 23):
            raise ValueError(f"rest hours must be 0-23, got {text!r}")
        return cls(a, b) if a != b else cls()

    @property
    def enabled(self) -> bool:
        return self.start is not None and self.end is not None

    def contains(self, now: float, zone: ZoneInfo) -> bool:
        if not self.enabled:
            return False
        hour = local(now, zone).hour
        assert self.start is not None and self.end is not None
        if self.start < self.end:
            return self.start <= hour < self.end
        return hour >= self.start or hour < self.end

    def _at(self, day: dt.date, hour: int, zone: ZoneInfo) -> float:
        return dt.datetime.combine(day, dt.time(hour), zone).timestamp()

    def night_of(self, now: float, zone: ZoneInfo) -> str:
        """Which night `now` belongs to: the local date on which this rest period began, so the
        consolidation of "the night of the 1st" runs once whether it is 23:10 or 02:00."""
        moment = local(now, zone)
        assert self.start is not None
        day = moment.date()
        if self.start > (self.end or 0) and moment.hour < self.start:
            day -= dt.timedelta(days=1)
        return day.isoformat()

    def next_start(self, now: float, zone: ZoneInfo) -> float | None:
        """The next moment rest begins, strictly after `now`; None without rest hours."""
        if not self.enabled:
            return None
        assert self.start is not None
        day = local(now, zone).date()
        for offset in range(3):
            at = self._at(day + dt.timedelta(days=offset), self.start, zone)
            if at > now:
                return at
        return None  # pragma: no cover - a start hour exists every day

    def next_end(self, now: float, zone: ZoneInfo) -> float | None:
        """The next moment rest ends, strictly after `now`; None without rest hours."""
        if not self.enabled:
            return None
        assert self.end is not None
        day = local(now, zone).date()
        for offset in range(3):
            at = self._at(day + dt.timedelta(days=offset), self.end, zone)
            if at > now:
                return at
        return None  # pragma: no cover
