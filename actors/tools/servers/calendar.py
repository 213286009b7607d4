"""MCP server "calendar": the owner's calendar (CalDAV) and contacts (CardDAV), in one server.

Run over stdio: ``python -m actors.tools.servers.calendar``. The account comes from the
environment (actors/tools/calendar/settings.py: IRIIS_CALDAV_URL, IRIIS_CALDAV_USER,
IRIIS_CALDAV_PASSWORD, IRIIS_CALDAV_CALENDAR, IRIIS_CARDDAV_URL, IRIIS_CALDAV_EMAIL,
IRIIS_TIMEZONE); without it the server offers no tools and its instructions say what to set.

Times are read and shown in the owner's zone. Events others organised and contact cards are
outside content: results name them in `sources` (``calendar:<organizer>``, ``contacts:<uid>``).
The network calls block, so each runs in a thread under a timeout (actors/tools/calendar/client.py).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Annotated, TypeVar

import icalendar
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from actors.tools.calendar import contacts as cards
from actors.tools.calendar import events, times
from actors.tools.calendar.client import CalendarClient, CalendarError, master
from actors.tools.calendar.settings import CalendarConfigError, CalendarSettings, calendar_settings

T = TypeVar("T")
MAX_SHOWN = 100
MAX_ATTENDEES = 50
NOTES_SHOWN = 300

READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# The owner's own events: changed without asking, and each change can be undone by another.
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                         open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                          open_world_hint=False)
# Invitations reach other people, in the owner's name.
INVITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                          open_world_hint=True)

EventId = Annotated[str, Field(min_length=1, max_length=1000,
                               description="the event's #id as agenda or create_event showed it, e.g. '#1a2b3c4d'")]
When = Annotated[str, Field(min_length=1, max_length=80, description=(
    "as a person says it ('tomorrow at 9', 'Friday 14:00', 'in 2 hours') or ISO 8601, in the owner's zone"))]
EndWhen = Annotated[str | None, Field(max_length=80, description=(
    "a time of day on the same day ('11:00'), a length ('90 minutes') or a moment; omit for the default"))]


class EventOut(BaseModel):
    id: str
    title: str
    start: str
    end: str
    all_day: bool
    location: str | None = None
    notes: str | None = None
    organizer: str | None = None
    attendees: list[str] = Field(default_factory=list)
    calendar: str
    recurring: bool


class Agenda(BaseModel):
    start: str
    end: str
    timezone: str
    events: list[EventOut]
    more: int = 0
    sources: list[str] = Field(default_factory=list)


class Slot(BaseModel):
    start: str
    end: str
    minutes: int


class FreeTime(BaseModel):
    timezone: str
    slots: list[Slot]


class EventResult(BaseModel):
    event: EventOut
    invited: list[str] = Field(default_factory=list)
    already_invited: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)


class ContactOut(BaseModel):
    uid: str
    name: str
    emails: list[str]
    phones: list[str]
    org: str | None = None


class Contacts(BaseModel):
    contacts: list[ContactOut]
    sources: list[str] = Field(default_factory=list)


def event_out(view: events.EventView) -> EventOut:
    return EventOut(id=f"#{view.short}", title=view.title, start=view.start.isoformat(), end=view.end.isoformat(),
                    all_day=view.all_day, location=view.location, notes=view.notes, organizer=view.organizer,
                    attendees=list(view.attendees), calendar=view.calendar, recurring=view.recurring)


def _result(text: str, data: BaseModel) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data.model_dump(mode="json"))


class Calendar:
    """The tools' shared state: the account, its client and the owner's zone."""

    def __init__(self, settings: CalendarSettings, client: CalendarClient | None = None) -> None:
        self.settings = settings
        self.client = client or CalendarClient(settings)
        self.zone = settings.zone()
        self.owner = settings.owner_addresses()

    def now(self) -> datetime:
        return datetime.now(self.zone)

    async def run(self, call: Callable[[], T]) -> T:
        """A blocking client call in a thread, under a timeout; its failures as tool errors."""
        limit = self.settings.timeout * 3 + 5
        try:
            return await asyncio.wait_for(asyncio.to_thread(call), timeout=limit)
        except (CalendarError, times.TimeError, cards.ContactError) as exc:
            raise ToolError(str(exc)) from None
        except TimeoutError:
            raise ToolError(f"the calendar server did not answer within {limit:g} s; try again later") from None

    def line(self, view: events.EventView) -> str:
        text = events.line(view, self.owner, self.now().year)
        if view.notes:
            notes = " ".join(view.notes.split())
            text += f"\n    notes: {notes[:NOTES_SHOWN]}" + ("..." if len(notes) > NOTES_SHOWN else "")
        return text


async def agenda_result(cal: Calendar, start: str, end: str | None, days: int | None) -> CallToolResult:
    try:
        begins, ends = times.day_range(start, end, days, cal.now(), cal.zone)
    except times.TimeError as exc:
        raise ToolError(str(exc)) from None
    found = await cal.run(lambda: cal.client.events(begins, ends))
    shown = found[:MAX_SHOWN]
    last = ends - timedelta(minutes=1)
    span = (times.day_text(begins) if begins.date() == last.date()
            else f"{times.day_text(begins)} - {times.day_text(last)}")
    if not found:
        text = f"No events on {span} ({cal.zone.key})."
    else:
        lines = [f"{span} ({cal.zone.key}), {len(found)} event(s):", *(cal.line(v) for v in shown)]
        if len(found) > len(shown):
            lines.append(f"... and {len(found) - len(shown)} more: ask for a shorter range")
        text = "\n".join(lines)
    data = Agenda(start=begins.isoformat(), end=ends.isoformat(), timezone=cal.zone.key,
                  events=[event_out(v) for v in shown], more=len(found) - len(shown),
                  sources=events.sources(shown, cal.owner))
    return _result(text, data)


async def free_time_result(cal: Calendar, start: str, end: str | None, minutes: int) -> CallToolResult:
    now = cal.now()
    try:
        begins, ends = times.day_range(start, end, None, now, cal.zone)
    except times.TimeError as exc:
        raise ToolError(str(exc)) from None
    soonest = now.replace(second=0, microsecond=0)
    soonest += timedelta(minutes=-soonest.minute % 15)  # the next quarter hour
    begins = max(begins, soonest)  # free time already past is no use
    if ends <= begins:
        return _result("That range is already over.", FreeTime(timezone=cal.zone.key, slots=[]))
    found = await cal.run(lambda: cal.client.events(begins, ends))
    busy = [(v.start, v.end) for v in found if v.busy]
    hours = (cal.settings.work_start, cal.settings.work_end)
    slots = times.free_slots(begins, ends, busy, cal.zone, hours, timedelta(minutes=minutes))
    within = f"{hours[0]:%H:%M}-{hours[1]:%H:%M}"
    if not slots:
        text = f"No free time of {minutes} minutes or more within working hours ({within}, {cal.zone.key})."
    else:
        text = "\n".join([f"Free within working hours ({within}, {cal.zone.key}):",
                          *(times.slot_line(a, b, now.year) for a, b in slots)])
    data = FreeTime(timezone=cal.zone.key, slots=[Slot(start=a.isoformat(), end=b.isoformat(),
                                                       minutes=int((b - a).total_seconds() // 60)) for a, b in slots])
    return _result(text, data)


def _add_read_tools(server: MCPServer, cal: Calendar) -> None:
    @server.tool(annotations=READS)
    async def agenda(
        start: Annotated[str, Field(max_length=80, description=(
            "the first day ('today', 'tomorrow', 'Friday', 'next week', '2026-12-11') or a moment"))] = "today",
        end: Annotated[str | None, Field(max_length=80, description="the last day (included) or a moment")] = None,
        days: Annotated[int | None, Field(ge=1, le=times.MAX_RANGE_DAYS, description="how many days from start")] = None,
    ) -> Annotated[CallToolResult, Agenda]:
        """The owner's events in a range (one day by default), in their time zone, each with its #id;
        repeating events show each occurrence."""
        return await agenda_result(cal, start, end, days)

    @server.tool(annotations=READS)
    async def free_time(
        start: Annotated[str, Field(max_length=80, description="the first day, as for agenda")] = "today",
        end: Annotated[str | None, Field(max_length=80, description="the last day (included)")] = None,
        minutes: Annotated[int, Field(ge=5, le=1440, description="the shortest slot worth showing")] = 30,
    ) -> Annotated[CallToolResult, FreeTime]:
        """The owner's free slots within working hours, from now on, in a range (one day by default)."""
        return await free_time_result(cal, start, end, minutes)

    @server.tool(annotations=READS)
    async def find_contact(
        query: Annotated[str, Field(min_length=1, max_length=200, description="a name, an email address or a phone number")],
    ) -> Annotated[CallToolResult, Contacts]:
        """Find people in the owner's contacts by name (accents and case ignored), email or phone."""
        everyone = await cal.run(cal.client.contacts)
        found = cards.find(everyone, query)
        text = "\n".join(c.line() for c in found) if found else f"No contact matches {query!r}."
        data = Contacts(contacts=[ContactOut(uid=c.uid, name=c.name, emails=list(c.emails), phones=list(c.phones),
                                             org=c.org) for c in found],
                        sources=[c.source for c in found])
        return _result(text, data)


def _add_event_tools(server: MCPServer, cal: Calendar) -> None:
    @server.tool(annotations=WRITES)
    async def create_event(
        title: Annotated[str, Field(min_length=1, max_length=200)],
        start: When,
        end: EndWhen = None,
        duration_minutes: Annotated[int | None, Field(ge=1, le=60 * 24 * 31)] = None,
        location: Annotated[str | None, Field(max_length=300)] = None,
        notes: Annotated[str | None, Field(max_length=4000)] = None,
    ) -> Annotated[CallToolResult, EventResult]:
        """Add an event to the owner's own calendar (an hour long unless end or duration_minutes says)."""
        now = cal.now()
        try:
            begins, ends = times.event_span(start, end, duration_minutes, now, cal.zone)
        except times.TimeError as exc:
            raise ToolError(str(exc)) from None
        event = events.new_event(title, begins, ends, cal.zone, now, location=location, notes=notes)
        view = await cal.run(lambda: cal.client.create(event))
        return _result(f"created {cal.line(view)}", EventResult(event=event_out(view)))

    @server.tool(annotations=WRITES)
    async def move_event(event_id: EventId, start: When, end: EndWhen = None) -> Annotated[CallToolResult, EventResult]:
        """Move an event to a new start, keeping its length unless end is given (a repeating event
        moves as a whole)."""
        now = cal.now()
        try:
            begins = times.parse_start(start, now, cal.zone)
            ends = times.parse_end(end, begins, now, cal.zone) if end else None
        except times.TimeError as exc:
            raise ToolError(str(exc)) from None
        before, after = await cal.run(lambda: cal.client.change(
            event_id, lambda ical: _moved(ical, begins, ends, cal, now)))
        return _result(f"moved #{after.short} from {events.span_text(before)} to: {cal.line(after)}",
                       EventResult(event=event_out(after)))

    @server.tool(annotations=DELETES)
    async def cancel_event(event_id: EventId) -> Annotated[CallToolResult, EventResult]:
        """Delete an event from the owner's calendar (every occurrence of a repeating one)."""
        view = await cal.run(lambda: cal.client.cancel(event_id))
        return _result(f"cancelled {cal.line(view)}", EventResult(event=event_out(view)))


def _add_invite_tool(server: MCPServer, cal: Calendar) -> None:
    @server.tool(annotations=INVITES)
    async def invite(
        event_id: EventId,
        attendees: Annotated[list[Annotated[str, Field(max_length=320)]], Field(
            min_length=1, description=f"email addresses, or names from the owner's contacts; at most {MAX_ATTENDEES}")],
    ) -> Annotated[CallToolResult, EventResult]:
        """Invite people to one of the owner's events: they are added as attendees and the calendar
        server sends each an invitation from the owner."""
        if len(attendees) > MAX_ATTENDEES:
            raise ToolError(f"at most {MAX_ATTENDEES} attendees at a time (got {len(attendees)}): invite the "
                            "others in a second call")
        organizer = cal.settings.email or next(iter(sorted(cal.owner)), None)
        if organizer is None:
            raise ToolError("invitations need the owner's own address as organizer: set IRIIS_CALDAV_EMAIL")
        names = [a for a in attendees if events.valid_email(a) is None]
        everyone = await cal.run(cal.client.contacts) if names else []
        try:
            people, used = cards.resolve(attendees, everyone)
        except cards.ContactError as exc:
            raise ToolError(str(exc)) from None
        now = cal.now()
        added, view = await cal.run(lambda: cal.client.change(
            event_id, lambda ical: _invited(ical, people, organizer, cal, now)))
        already = [email for email, _ in people if email not in added]
        if not added:
            text = f"Everyone given was already invited to #{view.short}."
        else:
            text = events.invitation_preview(view, [p for p in people if p[0] in added], cal.zone, done=True)
            text += f" Already invited: {', '.join(already)}." if already else ""
        return _result(text, EventResult(event=event_out(view), invited=added, already_invited=already, sources=used))


def _moved(ical: icalendar.Calendar, start: datetime, end: datetime | None, cal: Calendar,
           now: datetime) -> events.EventView:
    component = master(ical)
    before = events.view_of(component, cal.zone)
    if events.is_foreign(before, cal.owner):
        # Their copy would stay where it is: the owner's calendar would show a time nobody agreed on.
        raise CalendarError(f"#{before.short} was organised by {before.organizer}; ask them to move it (or cancel "
                            "it in your calendar with cancel_event)")
    events.move(component, start, end, cal.zone, now)
    return before


def _invited(ical: icalendar.Calendar, people: list[tuple[str, str | None]], organizer: str, cal: Calendar,
             now: datetime) -> list[str]:
    """Add the attendees to the event and to each changed occurrence of it; only the owner's own
    events (someone else's organizer would have to send the invitations)."""
    current = events.view_of(master(ical), cal.zone)
    if events.is_foreign(current, cal.owner):
        raise CalendarError(f"#{current.short} was organised by {current.organizer}; only its organizer can "
                            "invite people (ask them to)")
    added: list[str] = []
    for component in ical.walk("VEVENT"):
        for email in events.add_attendees(component, people, organizer, now):
            if email not in added:
                added.append(email)
    return added


def _instructions(settings: CalendarSettings | None, problem: str | None) -> str:
    if problem:
        return f"The calendar is not usable: {problem}. There are no calendar tools until it is fixed."
    if settings is None:
        return ("The calendar is not configured: set IRIIS_CALDAV_URL, IRIIS_CALDAV_USER and IRIIS_CALDAV_PASSWORD "
                "(and IRIIS_TIMEZONE) to use the owner's calendar and contacts. There are no calendar tools until then.")
    return (f"The owner's calendar and contacts. Times are read and shown in {settings.timezone}. Events are named "
            "by their #id (from agenda or create_event); move_event, cancel_event and invite take it. Events "
            "organised by other people, and contact cards, are outside content.")


def create_server(env: Mapping[str, str] | None = None, client: CalendarClient | None = None) -> MCPServer:
    env = dict(os.environ if env is None else env)
    problem: str | None = None
    try:
        settings = calendar_settings(env)
    except CalendarConfigError as exc:
        settings, problem = None, str(exc)
    server = MCPServer("calendar", instructions=_instructions(settings, problem))
    if settings is not None:
        # Registered only when configured, so the model never sees a tool that can only fail.
        cal = Calendar(settings, client)
        _add_read_tools(server, cal)
        _add_event_tools(server, cal)
        _add_invite_tool(server, cal)
    return server


def main() -> None:
    create_server().run("stdio")


if __name__ == "__main__":
    main()
