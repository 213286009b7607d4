"""Times and repeats as people and small models write them, read in the owner's time zone, without Ray.

A reminder tool that takes only ISO 8601 fails the first thing a person asks ("remind me at 7pm")
whenever the model passes the words on, so the tools read words too:

- `parse_when`: ISO 8601 and epoch seconds as before; durations ("in 20 minutes", "10 min from
  now", "an hour and a half"); times of day ("7pm", "at 5:30 pm", "noon", "tonight at 8"); days
  ("tomorrow 08:15", "next Monday morning", "06 December 2026"). dateparser reads the day; a small
  pre-pass reads the time of day and the parts of a day, which dateparser drops or misreads
  ("tomorrow at 9" comes back at the current time of day, "at 9" as September).
- `natural_cron`: "every weekday at 8", "daily at 9", "weekly on Friday at 17:00" as cron.

Every refusal is a ValueError whose message tells the model how to ask again, with the local time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
         "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
         "d": 86_400, "day": 86_400, "days": 86_400, "w": 604_800, "week": 604_800, "weeks": 604_800}
# A time given more than this before now is a mistake, not a clock skew.
PAST_GRACE_SECONDS = 60.0
# Epoch seconds as text start here (2001); a smaller bare number ("9") is no time and is refused.
MIN_EPOCH = 1e9
# A day named without a time of day ("tomorrow", "Monday", "24 December") means its morning.
DEFAULT_HOUR = 9
# Parts of a day, as hours.
PARTS = {"morning": 9, "noon": 12, "midday": 12, "afternoon": 15, "evening": 19, "tonight": 20, "night": 20,
         "midnight": 0}
WEEKDAYS = {"sunday": 0, "sun": 0, "monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "tues": 2, "wednesday": 3,
            "wed": 3, "thursday": 4, "thu": 4, "thur": 4, "thurs": 4, "friday": 5, "fri": 5, "saturday": 6,
            "sat": 6}
_NOW_WORDS = ("now", "right now", "immediately", "asap")

_SMALL = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen").split()
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_NUMBER_WORDS = {word: i + 1 for i, word in enumerate(_SMALL)} | _TENS
_WORD_NUMBER = re.compile(r"\b(?:(twenty|thirty|forty|fifty)[- ](one|two|three|four|five|six|seven|eight|nine)"
                          rf"|({'|'.join(_NUMBER_WORDS)}))\b")
_DURATION_PART = re.compile(r"(?:(?P<num>\d+(?:\.\d+)?)\s*|(?P<half>half\s+an?)\s+|(?P<article>an?)\s+)"
                            r"(?P<unit>[a-z]+)(?P<and_half>\s+and\s+a\s+half)?(?:\s*,\s*|\s+and\s+|\s+|(?=\d)|$)")
_CLOCK = re.compile(
    r"(?:\bat\s+)?\b(?P<h>\d{1,2})(?::(?P<m>\d{2})(?::\d{2})?|\.(?P<m_dot>\d{2}))?\s*(?P<ampm>am|pm)\b"
    r"|(?:\bat\s+)?\b(?P<h24>\d{1,2}):(?P<m24>\d{2})(?::\d{2})?\b"
    r"|(?:\bat\s+)?\b(?P<fraction>half|quarter)\s+(?P<way>past|to)\s+(?P<h_of>\d{1,2})\b"
    r"|(?:\bat\s+)?\b(?P<h_oclock>\d{1,2})\s*o'?clock\b"
    r"|\bat\s+(?P<h_at>\d{1,2})\b(?!\s*(?:st|nd|rd|th)\b|[/.-]\d)")
_PART = re.compile(rf"\b(?P<this>this\s+|in\s+the\s+|at\s+)?(?P<part>{'|'.join(PARTS)})\b")
# "tomorrow 9", "Monday 8": a bare hour after a day word (after a date, "December 24", it is the day).
_DAY_THEN_HOUR = re.compile(rf"^(?P<day>.*\b(?:today|tomorrow|{'|'.join(WEEKDAYS)}))\s+(?P<h>\d{{1,2}})$")
_REPEAT_HINT = re.compile(r"^(?:every|each|daily|weekly|hourly|monthly|weekdays|weekends"
                          r"|(?:mon|tues|wednes|thurs|fri|satur|sun)days)\b")


@dataclass(frozen=True)
class Clock:
    """A time of day read from text. `ambiguous`: an hour from 1 to 12 without minutes, am/pm or a
    part of day ("at 7"), which may be morning or evening; `next_day`: midnight ends the day it names."""

    hour: int
    minute: int = 0
    ambiguous: bool = False
    next_day: bool = False

    def daytime(self) -> int:
        """The hour an ambiguous one means on a named day: 7 to 12 as written, 1 to 6 in the afternoon."""
        return self.hour + 12 if self.ambiguous and self.hour < 7 else self.hour

    def readings(self) -> list[int]:
        """Every hour the clock could show: both halves of the day when ambiguous."""
        return [self.hour % 12, self.hour % 12 + 12] if self.ambiguous else [self.hour]


def local_time(at: float | None, tz: ZoneInfo | None = None) -> str:
    """`2026-12-01 17:00 Europe/Paris`, as a tool's answer shows a time."""
    if at is None:
        return "unscheduled"
    zone = tz or ZoneInfo("UTC")
    return f"{datetime.fromtimestamp(at, zone):%Y-%m-%d %H:%M} {zone.key}"


def normalise(text: str) -> str:
    """Lower case, single spaces, no trailing punctuation, "a.m." as "am", number words as digits."""
    lowered = text.lower().replace("a.m.", "am").replace("p.m.", "pm")
    lowered = " ".join(lowered.split()).strip(" .!?,;")

    def digits(match: re.Match[str]) -> str:
        if match.group(3):
            return str(_NUMBER_WORDS[match.group(3)])
        return str(_TENS[match.group(1)] + _NUMBER_WORDS[match.group(2)])

    return _WORD_NUMBER.sub(digits, lowered)


def duration(text: str) -> float | None:
    """Seconds in "20 minutes", "1h30m", "half an hour", "an hour and a half"; None for anything else."""
    pos, total = 0, 0.0
    while pos < len(text):
        part = _DURATION_PART.match(text, pos)
        if part is None or part.group("unit") not in UNITS:
            return None
        count = 0.5 if part.group("half") else 1.0 if part.group("article") else float(part.group("num"))
        total += (count + (0.5 if part.group("and_half") else 0.0)) * UNITS[part.group("unit")]
        pos = part.end()
    return total if pos else None


def relative_seconds(text: str) -> float | None:
    """Seconds from now in "in 20 minutes", "10 min from now", "20 minutes later" or a bare "20 minutes"."""
    span = re.sub(r"^(?:in|after)\s+", "", text)
    span = re.sub(r"\s+(?:from\s+now|later|time)$", "", span)
    return duration(span)


def extract_clock(text: str) -> tuple[Clock | None, str, bool]:
    """The time of day in normalised `text`, the text without it (the day), and whether a part of
    day ("this evening", "tonight") fixed the day as today. Clock is None when there is no time
    of day, and also when there is one that no clock shows ("25:00"): the caller refuses both."""
    clock_match = _CLOCK.search(text)
    part_match = _PART.search(text)
    part = part_match.group("part") if part_match else None
    today = bool(part_match and ((part_match.group("this") or "").startswith("this") or part == "tonight"))
    rest = text
    for match in sorted((m for m in (clock_match, part_match) if m), key=lambda m: m.start(), reverse=True):
        rest = rest[:match.start()] + " " + rest[match.end():]
    rest = " ".join(rest.split())
    hour: int | None = None
    minute, meridiem, bare = 0, None, True
    if clock_match:
        g = clock_match.groupdict()
        meridiem = g["ampm"]
        if g["fraction"]:
            hour, minute = int(g["h_of"]), 30 if g["fraction"] == "half" else 15
            if g["way"] == "to":
                hour, minute = (hour - 1) % 24, 60 - minute
        elif g["h24"]:  # "08:15", "17:00": written with minutes, so on the 24-hour clock
            hour, minute, bare = int(g["h24"]), int(g["m24"]), False
        else:
            hour, minute = int(g["h"] or g["h_oclock"] or g["h_at"]), int(g["m"] or g["m_dot"] or 0)
    elif (day_hour := _DAY_THEN_HOUR.match(rest)) is not None:
        hour, rest = int(day_hour.group("h")), day_hour.group("day")
    elif part is not None and re.fullmatch(r"\d{1,2}", rest):  # "8 tonight", "7 in the morning"
        hour, rest = int(rest), ""
    rest = re.sub(r"^(?:on|at)\s+|\s+(?:on|at)$", "", rest).strip(" ,")
    if hour is None:
        if part is None:
            return None, rest, today
        return Clock(PARTS[part], next_day=part == "midnight"), rest, today
    return _clock(hour, minute, meridiem, part, bare), rest, today


def _clock(hour: int, minute: int, meridiem: str | None, part: str | None, bare: bool) -> Clock | None:
    """An hour as written, turned by am/pm or a part of day; None when no clock shows it. A `bare`
    hour from 1 to 12 ("at 7", "half past 5") with neither is ambiguous; "07:30" is not."""
    if minute > 59 or hour > 23:
        return None
    if meridiem is not None:
        if hour > 12 or hour == 0:
            return Clock(hour, minute) if meridiem == "pm" and hour > 12 else None
        return Clock(hour % 12 + (12 if meridiem == "pm" else 0), minute)
    if part in ("afternoon", "evening", "tonight", "night") and 1 <= hour <= 11:
        return Clock(hour + 12, minute)
    if part == "midnight" or (part == "morning" and hour == 12):
        return Clock(0, minute, next_day=part == "midnight")
    if part is None and bare and 1 <= hour <= 12:
        return Clock(hour, minute, ambiguous=True)
    return Clock(hour, minute)


def _day(text: str, local_now: datetime, zone: ZoneInfo) -> tuple[date, datetime | None] | None:
    """The date `text` names, read by dateparser relative to the owner's now, preferring the
    future ("next Monday" is the coming Monday), and dateparser's full time when it read a time
    of day the pre-pass did not. None when it names no day."""
    if not text or re.fullmatch(r"[\d.]+", text):
        return None  # a bare number is an hour, a day or a year; dateparser guesses
    read = _dateparser(text, local_now, zone, "future")
    if read is None:
        return None
    when, timed = read
    return when.date(), (when if timed else None)


def _dateparser(text: str, now: datetime, zone: ZoneInfo, prefer: str) -> tuple[datetime, bool] | None:
    """dateparser's reading of `text` relative to `now` in the owner's zone (`prefer`: "future" or
    "current_period"), and whether it read a time of day; None when it reads nothing."""
    from dateparser.date import DateDataParser  # lazy: dateparser costs ~0.1 s; only natural-language times need it

    settings = {"RELATIVE_BASE": now.astimezone(zone).replace(tzinfo=None), "TIMEZONE": zone.key,
                "RETURN_AS_TIMEZONE_AWARE": True, "PREFER_DATES_FROM": prefer, "RETURN_TIME_AS_PERIOD": True}
    found = DateDataParser(languages=["en"], settings=settings).get_date_data(text)
    if found.date_obj is None:
        return None
    return found.date_obj.astimezone(zone), found.period == "time"


def _at(day: date, hour: int, minute: int, zone: ZoneInfo, next_day: bool = False) -> datetime:
    return datetime.combine(day + timedelta(days=1 if next_day else 0), time(hour, minute), zone)


def _natural(text: str, local_now: datetime, zone: ZoneInfo) -> datetime | None:
    clock, rest, today = extract_clock(text)
    if clock is None and _CLOCK.search(text):
        return None  # a time of day no clock shows
    if rest == "today" or (today and not rest):
        rest, today = "", True
    if rest:
        named = _day(rest, local_now, zone)
        if named is None:
            return None
        day, read = named
        if clock is None:
            return read or _at(day, DEFAULT_HOUR, 0, zone)
        return _at(day, clock.daytime(), clock.minute, zone, clock.next_day)
    if clock is None:
        return None
    # No day named: the next time the clock shows it, today or (unless "tonight") tomorrow.
    days = [local_now.date()] if today else [local_now.date(), local_now.date() + timedelta(days=1)]
    choices = sorted(_at(d, h, clock.minute, zone, clock.next_day) for d in days for h in clock.readings())
    return next((c for c in choices if c >= local_now), choices[-1])


def natural_moment(text: str, now: datetime, zone: ZoneInfo) -> date | datetime | None:
    """A date (or date-time) for date arithmetic, past or future, as people and small models
    write it: "07 December 2026", "3 March", "December 25", "in 30 days", "30 days"
    (from now), "2 weeks ago". A date-only answer when no time of day was given; None when
    nothing reads. Unlike `parse_when` it never refuses the past."""
    cleaned = normalise(text)
    ago = re.fullmatch(r"(.+?)\s+ago", cleaned)
    span = duration(ago.group(1)) if ago else relative_seconds(cleaned)
    if span is not None:
        moment = now + timedelta(seconds=-span if ago else span)
        return moment.date() if span % 86400 == 0 else moment.replace(microsecond=0)
    if not cleaned or re.fullmatch(r"[\d.]+", cleaned):
        return None
    read = _dateparser(cleaned, now, zone, "current_period")
    if read is None:
        return None
    when, timed = read
    return when.replace(microsecond=0) if timed else when.date()


def looks_like_repeat(text: str) -> bool:
    """Whether `text` reads as a repeat ("every weekday at 8", "daily", "Mondays at 9"), not a time."""
    return _REPEAT_HINT.match(normalise(text)) is not None


def _guidance(zone: ZoneInfo, local_now: datetime) -> str:
    """What a refusal says, so the model's retry succeeds: the owner's time now and forms that work."""
    tomorrow = (local_now + timedelta(days=1)).date()
    return (f"it is now {local_now:%Y-%m-%d %H:%M} {zone.key}; give a future time such as 'in 20 minutes', "
            f"'7pm', 'tomorrow 09:00' or ISO 8601 '{tomorrow.isoformat()}T09:00'")


def parse_when(text: str, now: float, tz: ZoneInfo | None = None) -> float:
    """Epoch seconds for a time: ISO 8601 (`"2026-12-01T17:00"`; without an offset it is the
    owner's local time), epoch seconds as text, a duration ("in 20 minutes", "10 min from now"),
    or words ("7pm", "tomorrow at 9", "next Monday morning", "06 December 2026", "tonight at 8").

    Words are read in the owner's time zone `tz` relative to `now`: a time of day already past
    today is tomorrow's; a bare hour ("at 7") is the next time the clock shows it, and on a named
    day ("Monday at 7") the daytime reading (7 to 12 as written, 1 to 6 pm); a named day without
    a time is its 09:00. Raises ValueError, saying how to retry, for what it cannot read and for
    a time more than a minute in the past."""
    zone = tz or ZoneInfo("UTC")
    raw = text.strip()
    lowered = normalise(raw)
    local_now = datetime.fromtimestamp(now, zone)
    at: float | None = None
    if lowered in _NOW_WORDS:
        return now
    try:
        number: float | None = float(raw)
    except ValueError:
        number = None
    if number is not None and math.isfinite(number) and number >= MIN_EPOCH:
        at = number
    if at is None:
        try:
            iso = datetime.fromisoformat(raw)
            at = (iso if iso.tzinfo else iso.replace(tzinfo=zone)).timestamp()
        except ValueError:
            pass
    if at is None and (span := relative_seconds(lowered)) is not None:
        at = now + span
    if at is None and (natural := _natural(lowered, local_now, zone)) is not None:
        at = natural.timestamp()
    if at is None:
        repeat = "; for something that repeats, put it in repeat ('every weekday at 8')" if looks_like_repeat(raw) else ""
        raise ValueError(f"{raw!r} is not a time I can read; {_guidance(zone, local_now)}{repeat}")
    if at < now - PAST_GRACE_SECONDS:
        raise ValueError(f"{raw!r} is in the past ({local_time(at, zone)}); {_guidance(zone, local_now)}")
    return at


# -- repeats -----------------------------------------------------------------------------------

_REPEAT_FILLERS = {"every", "each", "on", "at", "the", "and", "in", "of", "a", "all", "per"}
_DAILY = {"day", "days", "daily", "everyday"}


def natural_cron(text: str) -> str | None:
    """A cron expression for a schedule in words: "every weekday at 8" / "weekdays at 8am"
    (`0 8 * * 1-5`), "every day at 7:30", "daily at 9", "every Monday at 9", "every Monday and
    Thursday at 18:00", "weekly on Friday at 17:00", "every morning" (09:00), "monthly on the 1st
    at 9". A bare hour is read as on a named day (7 to 12 as written, 1 to 6 pm); days without a
    time are at 09:00. None when `text` is not such a schedule (an interval, a cron, nonsense)."""
    words = normalise(text)
    words = re.sub(r"\b(?:working|business|work)\s+days?\b", "weekdays", words)
    clock, rest, _ = extract_clock(words)
    if clock is None and _CLOCK.search(words):
        return None
    days: set[int] = set()
    month_day: int | None = None
    period: str | None = None
    for token in (t for t in re.split(r"[\s,&+/]+", rest) if t and t not in _REPEAT_FILLERS):
        ordinal = re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)", token)
        if token in _DAILY:
            period = period or "day"
        elif token in WEEKDAYS or (token.endswith("s") and token[:-1] in WEEKDAYS):
            days.add(WEEKDAYS.get(token, WEEKDAYS.get(token[:-1], 0)))
        elif token in ("weekday", "weekdays", "workday", "workdays"):
            days |= {1, 2, 3, 4, 5}
        elif token in ("weekend", "weekends"):
            days |= {0, 6}
        elif token in ("week", "weeks", "weekly"):
            period = "week"
        elif token in ("month", "months", "monthly"):
            period = "month"
        elif ordinal and 1 <= int(ordinal.group(1)) <= 31:
            month_day = int(ordinal.group(1))
        else:
            return None
    if (month_day is not None and (days or period in ("day", "week"))) or (period == "month" and month_day is None):
        return None  # "the 1st on Mondays", "every 2nd day", "monthly at 9": which day is unclear
    if period == "week" and not days:
        return None  # "weekly at 9": which weekday is unclear
    if clock is None and not days and month_day is None:
        return None  # "each day" alone is an interval, not a time of day
    if clock is None:
        clock = Clock(DEFAULT_HOUR)
    weekdays = "*" if not days else "1-5" if days == {1, 2, 3, 4, 5} else ",".join(str(d) for d in sorted(days))
    return f"{clock.minute} {clock.daytime()} {month_day or '*'} * {weekdays}"
