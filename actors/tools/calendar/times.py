"""Times as the owner says them and free time, in the owner's zone: pure, no network.

- `event_span` and `day_range` read times as people write them ("tomorrow at 9", "Friday 14:00",
  "in 2 hours", ISO 8601) with actors/common/when.py, as the scheduler's `_schedule` does:
  an event's start must be in the future, a range may begin in the past.
- `free_slots` is the free time within working hours over a range, given the busy intervals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from actors.common.errors import IriisError
from actors.common.when import duration, extract_clock, natural_moment, normalise, parse_when

DEFAULT_LENGTH = timedelta(hours=1)
MAX_EVENT = timedelta(days=31)
MAX_RANGE_DAYS = 92
_WEEKDAYS = {name: i for i, names in enumerate([("monday", "mon"), ("tuesday", "tue", "tues"),
                                                ("wednesday", "wed"), ("thursday", "thu", "thur", "thurs"),
                                                ("friday", "fri"), ("saturday", "sat"), ("sunday", "sun")])
             for name in names}
_DAY_WORD = re.compile(rf"^(?:(next|this|coming|last)\s+)?({'|'.join(_WEEKDAYS)})$")


class TimeError(IriisError, ValueError):
    """A time or range that cannot be read or makes no sense; the message says how to ask again."""

    code = "bad_time"


def local(value: date | datetime, zone: ZoneInfo) -> datetime:
    """An iCalendar time in the owner's zone: a date is its midnight, a floating time is theirs."""
    if not isinstance(value, datetime):
        return datetime.combine(value, time(0), tzinfo=zone)
    return value.replace(tzinfo=zone) if value.tzinfo is None else value.astimezone(zone)


def day_text(moment: date | datetime, year: int | None = None) -> str:
    """``Fri 11 Dec`` (with the year when it is not `year`)."""
    text = f"{moment:%a} {moment.day} {moment:%b}"
    return text if year is None or moment.year == year else f"{text} {moment.year}"


# -- free time ---------------------------------------------------------------------------------

def merged(intervals: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Overlapping or touching intervals joined, in UTC, in order."""
    out: list[tuple[datetime, datetime]] = []
    for start, end in sorted((a.astimezone(UTC), b.astimezone(UTC)) for a, b in intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def free_slots(start: datetime, end: datetime, busy: Iterable[tuple[datetime, datetime]], zone: ZoneInfo,
               hours: tuple[time, time] = (time(9), time(18)),
               minimum: timedelta = timedelta(minutes=30)) -> list[tuple[datetime, datetime]]:
    """The free stretches of at least `minimum` within working `hours` of each day between
    `start` and `end`, outside the `busy` intervals; in the owner's zone."""
    taken = merged(busy)
    slots: list[tuple[datetime, datetime]] = []
    day, last = start.astimezone(zone).date(), end.astimezone(zone).date()
    while day <= last:
        window_start = max(datetime.combine(day, hours[0], tzinfo=zone).astimezone(UTC), start.astimezone(UTC))
        window_end = min(datetime.combine(day, hours[1], tzinfo=zone).astimezone(UTC), end.astimezone(UTC))
        cursor = window_start
        for b_start, b_end in taken:
            if b_end <= cursor or b_start >= window_end:
                continue
            if b_start - cursor >= minimum:
                slots.append((cursor, b_start))
            cursor = max(cursor, b_end)
        if window_end - cursor >= minimum:
            slots.append((cursor, window_end))
        day += timedelta(days=1)
    return [(a.astimezone(zone), b.astimezone(zone)) for a, b in slots]


def length_text(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest:02d}" if hours and rest else f"{hours} h" if hours else f"{rest} min"


def slot_line(start: datetime, end: datetime, year: int | None = None) -> str:
    """``Fri 11 Dec 10:00-12:30 (2 h 30)``."""
    return f"{day_text(start, year)} {start:%H:%M}-{end:%H:%M} ({length_text(end - start)})"


# -- reading times -----------------------------------------------------------------------------

def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def parse_start(text: str, now: datetime, zone: ZoneInfo) -> datetime:
    """When an event starts: "tomorrow at 9", "Friday 14:00", "in 2 hours", ISO 8601; in the future."""
    try:
        return _minute(datetime.fromtimestamp(parse_when(text, now.timestamp(), zone), zone))
    except ValueError as exc:
        raise TimeError(str(exc)) from None


def parse_end(text: str, start: datetime, now: datetime, zone: ZoneInfo) -> datetime:
    """When an event ends: a time of day on the start's day ("11:00", "5pm"), a length ("90 minutes",
    "for 2 hours") or a moment as `parse_start` reads it."""
    cleaned = re.sub(r"^(?:for|until|till|to)\s+", "", normalise(text))
    span = duration(cleaned)
    if span is not None:
        return _minute(start + timedelta(seconds=span))
    clock, rest, _ = extract_clock(cleaned)
    if clock is not None and not rest:
        for hour in clock.readings():
            candidate = datetime.combine(start.date(), time(hour, clock.minute), tzinfo=zone)
            if candidate > start:
                return candidate
        return datetime.combine(start.date() + timedelta(days=1), time(clock.readings()[0], clock.minute),
                                tzinfo=zone)
    return parse_start(text, now, zone)


def event_span(start: str, end: str | None, minutes: int | None, now: datetime,
               zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The start and end of a new event; an hour long when neither an end nor a length is given."""
    if end and minutes:
        raise TimeError("give either end or duration_minutes, not both")
    begins = parse_start(start, now, zone)
    ends = parse_end(end, begins, now, zone) if end else begins + (timedelta(minutes=minutes) if minutes
                                                                     else DEFAULT_LENGTH)
    check_span(begins, ends)
    return begins, ends


def check_span(start: datetime, end: datetime) -> None:
    if end <= start:
        raise TimeError(f"the end ({end:%Y-%m-%d %H:%M}) is not after the start ({start:%Y-%m-%d %H:%M})")
    if end - start > MAX_EVENT:
        raise TimeError(f"an event longer than {MAX_EVENT.days} days is not what was meant; give a nearer end")


def _day_word(text: str, today: date) -> date | None:
    """today, tomorrow, yesterday, (next/this/last) <weekday>: the next one on or after today."""
    named = {"today": 0, "tomorrow": 1, "yesterday": -1, "day after tomorrow": 2, "this week": 0}
    if text in named:
        return today + timedelta(days=named[text])
    if text == "next week":
        return today + timedelta(days=7 - today.weekday())
    match = _DAY_WORD.match(text)
    if match is None:
        return None
    qualifier, target = match.group(1), _WEEKDAYS[match.group(2)]
    if qualifier == "last":
        return today - timedelta(days=(today.weekday() - target) % 7 or 7)
    ahead = (target - today.weekday()) % 7
    return today + timedelta(days=ahead or (7 if qualifier in ("next", "coming") else 0))


def parse_day(text: str, now: datetime, zone: ZoneInfo) -> date | datetime:
    """The start or end of a range: a day ("today", "Friday", "next week", "2026-12-11",
    "11 December") or a moment ("Friday 14:00", "now", ISO 8601). Past days are allowed."""
    cleaned = normalise(text)
    local_now = now.astimezone(zone)
    if cleaned in ("now", ""):
        return _minute(local_now)
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
            return date.fromisoformat(text.strip())
        iso = datetime.fromisoformat(text.strip())
        return iso.replace(tzinfo=zone) if iso.tzinfo is None else iso.astimezone(zone)
    except ValueError:
        pass
    day = _day_word(cleaned, local_now.date())
    if day is not None:
        return day
    clock, rest, _ = extract_clock(cleaned)
    if clock is not None and (day := _day_word(rest or "today", local_now.date())) is not None:
        return datetime.combine(day, time(clock.daytime() if rest else clock.hour, clock.minute), tzinfo=zone)
    found = natural_moment(cleaned, local_now, zone)
    if found is None:
        raise TimeError(f"could not read the day {text!r}: use today, tomorrow, a weekday, 'next week', "
                        f"YYYY-MM-DD or ISO 8601 (it is now {local_now:%Y-%m-%d %H:%M} {zone.key})")
    return found


def day_range(start: str, end: str | None, days: int | None, now: datetime,
              zone: ZoneInfo) -> tuple[datetime, datetime]:
    """The range an agenda covers: `start` to `end` (a day named as the end is included), or
    `days` days, or the day `start` names (a week for "this week" / "next week")."""
    first = parse_day(start, now, zone)
    begins = local(first, zone)
    if end is not None and end.strip():
        last = parse_day(end, now, zone)
        ends = local(last, zone) + (timedelta(days=1) if not isinstance(last, datetime) else timedelta(0))
    else:
        if days is None:
            words = normalise(start)
            days = 7 - begins.weekday() if words == "this week" else 7 if words == "next week" else 1
        ends = datetime.combine(begins.date() + timedelta(days=days), time(0), tzinfo=zone)
    if ends <= begins:
        raise TimeError(f"the range ends ({ends:%Y-%m-%d %H:%M}) before it starts ({begins:%Y-%m-%d %H:%M})")
    if ends - begins > timedelta(days=MAX_RANGE_DAYS):
        raise TimeError(f"that range is longer than {MAX_RANGE_DAYS} days; ask for a shorter one")
    return begins, ends


