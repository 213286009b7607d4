"""The person's own words for a time (and their own numbers for a chart), given to a tool in
place of what a small model worked out or dropped.

Asked "remind me on Friday at 5pm", Qwen2.5-Coder-1.5B writes `at: "2026-12-07T17:00"` (today,
not Friday), and for "at 7pm" writes "20:00" (agent evaluation, 2026-12-07): the arithmetic on
dates is where it goes wrong, while the tools read "on Friday at 5pm" right. So when a call has
an `at` argument and the person's message holds exactly one time, their phrase is what the tool
gets, when the model gave a time at all. Several times, a repeat ("every Sunday at 6pm"), or
none: the model's own value stays.
Pure, no Ray.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from actors.common.when import looks_like_repeat, natural_cron, natural_moment, normalise, parse_when, relative_seconds

TIME_ARGUMENT = "at"
REPEAT_ARGUMENT = "repeat"
SERIES_ARGUMENT = "series"
# "rent 1200", "Jan: 40", "Q1 10k": a label, then its number.
_PAIR = re.compile(r"[A-Za-z][\w'&-]*(?:\s+[A-Za-z][\w'&-]*){0,3}\s*[:=-]?\s*-?\$?\d[\d,]*(?:\.\d+)?")
# A repeat as people say it, up to what the reminder is for ("... to plan the week") or a stop.
_REPEAT_SPAN = re.compile(r"\b(?:every|each|daily|weekly|weekdays|weekends)\b.*?(?=\s+to\s|\s+remind|[,;!?]|\.\s|\.?$)")
_LEAD = re.compile(r"\b(?:in|after)\s+")
_REPEAT_WORDS = re.compile(r"\b(every|each|daily|weekly|hourly|monthly|weekdays|weekends|mondays|tuesdays|"
                           r"wednesdays|thursdays|fridays|saturdays|sundays)\b", re.I)
_NOW = 1_800_000_000.0   # any fixed time: a phrase is kept only if it reads at all


def _relative_phrases(text: str) -> list[str]:
    """Each "in <span>" whose span is a duration ("in 45 minutes", "in half an hour"), longest."""
    found = []
    for lead in _LEAD.finditer(text):
        words = text[lead.end():].split()
        best = None
        for k in range(1, min(6, len(words)) + 1):
            span = " ".join(words[:k]).rstrip(",.;:!?")
            if relative_seconds(f"in {span}") is not None:
                best = f"in {span}"
        if best:
            found.append(best)
    return found


def person_time(message: str) -> str | None:
    """The one time the message names, in its own words; None when it names none, several, or a
    repeat."""
    if _REPEAT_WORDS.search(message) or looks_like_repeat(message):
        return None
    text = normalise(message)
    relative = _relative_phrases(text)
    if relative:
        return relative[0] if len(relative) == 1 else None
    from dateparser.search import search_dates  # lazy: dateparser costs ~0.1 s; only natural-language times need it

    found = search_dates(text, languages=["en"], settings={"PREFER_DATES_FROM": "future"}) or []
    phrases = [re.sub(r"^(?:and|but|then)\s+", "", p.strip(" ,.")) for p, _ in found]
    phrases = [p for p in phrases if re.search(r"[a-z]", p) or ":" in p]   # not a bare number
    if len(phrases) != 1:
        return None
    try:
        parse_when(phrases[0], _NOW)
    except ValueError:
        # A time in the past still goes to the tool, which says so ("yesterday at 9am").
        when = datetime.fromtimestamp(_NOW, timezone.utc)
        if natural_moment(phrases[0], when, ZoneInfo("UTC")) is None:
            return None
    return phrases[0]


def person_repeat(message: str) -> str | None:
    """The one repeat the message names ("every Sunday at 6pm"), in its words, if it reads as one."""
    found = [m.group(0).strip() for m in _REPEAT_SPAN.finditer(normalise(message))]
    if len(found) != 1 or natural_cron(found[0]) is None:
        return None
    return found[0]


def person_pairs(message: str) -> str | None:
    """The label/number pairs the message gives ("rent 1200, food 400", one per line), as text
    from its last colon (or whole), when there are at least two of them."""
    data = message.rsplit(":", 1)[-1] if ":" in message else message
    return data.strip() if len(_PAIR.findall(data)) >= 2 else None


def _no_digits(value: Any) -> bool:
    return not re.search(r"\d", str(value if value is not None else ""))


def ground_chart(arguments: dict[str, Any], message: str) -> dict[str, Any]:
    """A chart call whose data holds no number at all (the model kept the labels and dropped the
    values: "rent, food, transport, fun") gets the person's own pairs as its series."""
    if not _no_digits(arguments.get(SERIES_ARGUMENT)) or not _no_digits(arguments.get("y")):
        return arguments
    pairs = person_pairs(message)
    if pairs is None:
        return arguments
    kept = {k: v for k, v in arguments.items() if k not in ("x", "y", "x_labels") or not _no_digits(v)}
    return {**kept, SERIES_ARGUMENT: pairs}


def ground(arguments: dict[str, Any], parameters: dict[str, Any], message: str) -> dict[str, Any]:
    """`arguments` with the time argument replaced by the person's own phrase where there is one;
    for a repeat the model gave, the person's repeat, whose next time is the first run."""
    properties = parameters.get("properties") or {}
    if SERIES_ARGUMENT in properties and message:
        return ground_chart(arguments, message)
    if TIME_ARGUMENT not in properties or not message:
        return arguments
    if REPEAT_ARGUMENT in properties and str(arguments.get(REPEAT_ARGUMENT) or "").strip():
        repeat = person_repeat(message)
        if repeat is not None:
            return {**{k: v for k, v in arguments.items() if k != TIME_ARGUMENT}, REPEAT_ARGUMENT: repeat}
    if not str(arguments.get(TIME_ARGUMENT) or "").strip():
        return arguments   # the model gave no time ("now", or a task about a time): none is added
    phrase = person_time(message)
    if phrase is None:
        return arguments
    return {**arguments, TIME_ARGUMENT: phrase}
