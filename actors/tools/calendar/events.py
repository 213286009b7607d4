"""Events as the owner reads them, and as the calendar server stores them: pure, no network.

- `view_of` turns an iCalendar VEVENT into an `EventView` and `line` shows it in the owner's
  zone: ``#1a2b3c4d · Fri 11 Dec 09:00-10:00 · Dentist · Rue X``. The short id is a hash of the
  event's UID, stable across calls and servers (UIDs written by other programs share long
  prefixes, so a prefix would not do).
- `new_event`, `add_attendees` and `move` build and change VEVENTs with `icalendar`.

Reading times as people write them and free time are in `times`.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import icalendar
from icalendar import vCalAddress

from actors.tools.calendar.times import check_span, day_text, local

PRODID = "-//Iriis//calendar tool//EN"
_EMAIL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@(?=.{1,253}$)"
                    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$")


@dataclass(frozen=True)
class EventView:
    """One event (or one occurrence of a repeating one) as the tools show it."""

    uid: str
    title: str
    start: datetime  # aware; an all-day event's is midnight in the owner's zone
    end: datetime
    all_day: bool = False
    location: str | None = None
    notes: str | None = None
    organizer: str | None = None  # the organizer's address (mailto: dropped), or its name
    attendees: tuple[str, ...] = ()
    calendar: str = ""
    recurring: bool = False
    busy: bool = True
    cancelled: bool = False

    @property
    def short(self) -> str:
        return short_id(self.uid)


def short_id(uid: str) -> str:
    """The 8-character id the owner and the model use for an event: a hash of its UID."""
    return hashlib.sha1(uid.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def valid_email(text: str) -> str | None:
    """`text` as an address (``mailto:`` and <> dropped, domain lower case), or None if it is not one."""
    cleaned = text.strip().strip("<>").strip()
    if cleaned.lower().startswith("mailto:"):
        cleaned = cleaned[7:]
    if not _EMAIL.match(cleaned) or ".." in cleaned:
        return None
    local, _, domain = cleaned.rpartition("@")
    return f"{local}@{domain.lower()}"


# -- reading events ----------------------------------------------------------------------------

def address(value: Any) -> str | None:
    """The address in an ORGANIZER or ATTENDEE value (without mailto:), else its CN, else None."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lower().startswith("mailto:"):
        return text[7:].strip() or None
    name = getattr(value, "params", {}).get("CN")
    return str(name) if name else (text or None)


def _listed(component: icalendar.Component, name: str) -> list[Any]:
    value = component.get(name)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def bounds(component: icalendar.Component) -> tuple[date | datetime, date | datetime]:
    """DTSTART and the end (DTEND, DTSTART + DURATION, or the RFC 5545 default) as stored."""
    start = component.decoded("dtstart")
    if "dtend" in component:
        return start, component.decoded("dtend")
    if "duration" in component:
        return start, start + component.decoded("duration")
    all_day = not isinstance(start, datetime)
    return start, start + timedelta(days=1) if all_day else start


def view_of(component: icalendar.Component, zone: ZoneInfo, calendar: str = "") -> EventView:
    """The `EventView` of a VEVENT (an expanded occurrence carries RECURRENCE-ID)."""
    start, end = bounds(component)
    status = str(component.get("status", "")).upper()
    text = {k: str(component.get(k, "")).strip() or None for k in ("summary", "location", "description")}
    return EventView(
        uid=str(component.get("uid", "")), title=text["summary"] or "(no title)",
        start=local(start, zone), end=local(end, zone), all_day=not isinstance(start, datetime),
        location=text["location"], notes=text["description"], organizer=address(component.get("organizer")),
        attendees=tuple(a for a in (address(v) for v in _listed(component, "attendee")) if a),
        calendar=calendar,
        recurring=any(k in component for k in ("rrule", "rdate", "recurrence-id")),
        busy=str(component.get("transp", "OPAQUE")).upper() != "TRANSPARENT" and status != "CANCELLED",
        cancelled=status == "CANCELLED",
    )


def is_foreign(view: EventView, owner: frozenset[str]) -> bool:
    """Whether someone other than the owner organised the event (their words are outside content)."""
    return view.organizer is not None and view.organizer.lower() not in owner


def sources(views: Iterable[EventView], owner: frozenset[str]) -> list[str]:
    """``calendar:<organizer>`` for each event someone else organised (``calendar:<calendar>``
    when the organizer has no address), each once, in order."""
    found: list[str] = []
    for view in views:
        if is_foreign(view, owner):
            who = view.organizer if view.organizer and "@" in view.organizer else view.calendar or "unknown"
            if f"calendar:{who}" not in found:
                found.append(f"calendar:{who}")
    return found


# -- showing them ------------------------------------------------------------------------------

def span_text(view: EventView, year: int | None = None) -> str:
    """``Fri 11 Dec 09:00-10:00``, ``Fri 11 Dec 22:00 - Sat 12 Dec 01:00``, ``Fri 11 Dec (all day)``."""
    if view.all_day:
        last = (view.end - timedelta(days=1)).date()
        if last <= view.start.date():
            return f"{day_text(view.start, year)} (all day)"
        return f"{day_text(view.start, year)} - {day_text(last, year)} (all day)"
    if view.start.date() == view.end.date() or view.end == view.start:
        return f"{day_text(view.start, year)} {view.start:%H:%M}-{view.end:%H:%M}"
    return f"{day_text(view.start, year)} {view.start:%H:%M} - {day_text(view.end, year)} {view.end:%H:%M}"


def line(view: EventView, owner: frozenset[str] = frozenset(), year: int | None = None) -> str:
    """``#1a2b3c4d · Fri 11 Dec 09:00-10:00 · Dentist · Rue X`` and what else the owner should know."""
    parts = [f"#{view.short}", span_text(view, year), view.title]
    if view.location:
        parts.append(view.location)
    if view.recurring:
        parts.append("repeats")
    if view.cancelled:
        parts.append("cancelled")
    if is_foreign(view, owner):
        parts.append(f"from {view.organizer}")
    elif view.attendees:
        parts.append(f"with {', '.join(view.attendees[:5])}" + (" and others" if len(view.attendees) > 5 else ""))
    return " · ".join(parts)


def invitation_preview(view: EventView, people: Sequence[tuple[str, str | None]], zone: ZoneInfo,
                       done: bool = False) -> str:
    """What the owner is asked before invitations go out (and told after): who, to what, when, where."""
    who = ", ".join(f"{name} <{email}>" if name else email for email, name in people)
    where = f" at {view.location}" if view.location else ""
    repeats = " (a repeating event: every occurrence)" if view.recurring else ""
    sends = "sends" if done else "will send"
    return (f"{'Invited' if done else 'Invite'} {who} to \"{view.title}\" (#{view.short}) on {span_text(view, 0)} "
            f"({zone.key}){where}{repeats}. The calendar server {sends} each of them an invitation from you.")


# -- building and changing events --------------------------------------------------------------

def new_uid() -> str:
    return f"{uuid.uuid4()}@iriis"


def stored_time(moment: datetime, zone: ZoneInfo) -> datetime:
    """A time as written to the server: with the owner's TZID, or in UTC when their zone is UTC."""
    return moment.astimezone(UTC) if zone.key in ("UTC", "Etc/UTC") else moment.astimezone(zone)


def wrap(component: icalendar.Event) -> icalendar.Calendar:
    """A VCALENDAR holding `component`, with the VTIMEZONE its TZIDs need."""
    cal = icalendar.Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add_component(component)
    cal.add_missing_timezones()
    return cal


def new_event(title: str, start: datetime, end: datetime, zone: ZoneInfo, now: datetime,
              location: str | None = None, notes: str | None = None, uid: str | None = None) -> icalendar.Event:
    """A VEVENT of the owner's own."""
    event = icalendar.Event()
    event.add("uid", uid or new_uid())
    event.add("dtstamp", now.astimezone(UTC))
    event.add("created", now.astimezone(UTC))
    event.add("sequence", 0)
    event.add("summary", title.strip())
    event.add("dtstart", stored_time(start, zone))
    event.add("dtend", stored_time(end, zone))
    if location and location.strip():
        event.add("location", location.strip())
    if notes and notes.strip():
        event.add("description", notes.strip())
    return event


def touch(component: icalendar.Component, now: datetime) -> None:
    """Mark a change: SEQUENCE up by one, DTSTAMP and LAST-MODIFIED now."""
    sequence = int(component.get("sequence", 0))
    for name in ("sequence", "dtstamp", "last-modified"):
        component.pop(name, None)
    component.add("sequence", sequence + 1)
    component.add("dtstamp", now.astimezone(UTC))
    component.add("last-modified", now.astimezone(UTC))


def attendee(email: str, name: str | None = None) -> vCalAddress:
    """An ATTENDEE who is asked to answer: ROLE=REQ-PARTICIPANT, PARTSTAT=NEEDS-ACTION, RSVP=TRUE."""
    value = vCalAddress(f"mailto:{email}")
    if name:
        value.params["CN"] = name
    value.params["CUTYPE"] = "INDIVIDUAL"
    value.params["ROLE"] = "REQ-PARTICIPANT"
    value.params["PARTSTAT"] = "NEEDS-ACTION"
    value.params["RSVP"] = "TRUE"
    return value


def add_attendees(component: icalendar.Component, people: Sequence[tuple[str, str | None]], organizer: str,
                  now: datetime) -> list[str]:
    """Add `people` (address, name) who are not attendees yet, with the owner as ORGANIZER when
    none is set; the addresses added."""
    present = {(address(a) or "").lower() for a in _listed(component, "attendee")}
    added: list[str] = []
    if "organizer" not in component:
        component.add("organizer", vCalAddress(f"mailto:{organizer}"))
    for email, name in people:
        if email.lower() not in present:
            component.add("attendee", attendee(email, name))
            present.add(email.lower())
            added.append(email)
    if added:
        touch(component, now)
    return added


def move(component: icalendar.Component, start: datetime, end: datetime | None, zone: ZoneInfo,
         now: datetime) -> None:
    """Move an event to `start`, keeping its length unless `end` is given (an all-day event stays
    all-day, on the day `start` names)."""
    old_start, old_end = bounds(component)
    for name in ("dtstart", "dtend", "duration"):
        component.pop(name, None)
    if not isinstance(old_start, datetime):
        days = max((old_end - old_start).days, 1)
        first = start.astimezone(zone).date()
        last = end.astimezone(zone).date() + timedelta(days=1) if end else first + timedelta(days=days)
        component.add("dtstart", first)
        component.add("dtend", max(last, first + timedelta(days=1)))
    else:
        new_end = end or start + (local(old_end, zone) - local(old_start, zone))
        check_span(start, new_end)
        component.add("dtstart", stored_time(start, zone))
        component.add("dtend", stored_time(new_end, zone))
    touch(component, now)
