"""Matching what a scenario wrote against what a run saw: phrases in a text (case-insensitive,
`re:` for a regular expression) and a moment against a local time and day. Pure."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def has(text: str, phrase: str) -> bool:
    if phrase.startswith("re:"):
        return re.search(phrase[3:], text, re.I | re.S) is not None
    return phrase.lower() in text.lower()


def any_of(text: str, wanted: str | list[str]) -> bool:
    options = [wanted] if isinstance(wanted, str) else wanted
    return any(has(text, w) for w in options) if options and any(options) else True


def _day_wanted(on: str, sent: datetime) -> date | str:
    on = on.strip().lower()
    if on == "today":
        return sent.date()
    if on == "tomorrow":
        return sent.date() + timedelta(days=1)
    if re.fullmatch(r"\+\d+d", on):
        return sent.date() + timedelta(days=int(on[1:-1]))
    if on in WEEKDAYS or on == "next":
        return on
    if re.fullmatch(r"\d{2}-\d{2}", on):
        day = date(sent.year, int(on[:2]), int(on[3:]))
        return day if day >= sent.date() else date(sent.year + 1, day.month, day.day)
    return date.fromisoformat(on)


def when_matches(at: str | None, on: str | None, moment: float, sent_at: float, tz: str,
                 verb: str) -> tuple[bool, str]:
    """Whether `moment` (epoch seconds) is at the local time `at` on the day `on` (as a
    scenario writes them), for a message sent at `sent_at`; and if not, why ("due ...",
    "starts ...": `verb`)."""
    zone = ZoneInfo(tz)
    local, sent = datetime.fromtimestamp(moment, zone), datetime.fromtimestamp(sent_at, zone)
    if at is not None:
        hour, minute = (int(x) for x in at.split(":"))
        if (local.hour, local.minute) != (hour, minute):
            return False, f"{verb} at {local:%H:%M}, not {at}"
    if on is not None:
        day = _day_wanted(on, sent)
        if day == "next":
            if not 0 < moment - sent_at <= 86400:
                return False, f"{verb} {local:%Y-%m-%d %H:%M}, not the next such time"
        elif isinstance(day, str):
            if WEEKDAYS[local.weekday()] != day or not 0 <= (local.date() - sent.date()).days <= 7:
                return False, f"{verb} {local:%A %Y-%m-%d}, not the coming {day}"
        elif local.date() != day:
            return False, f"{verb} on {local.date()}, not {day}"
    return True, "as expected"
