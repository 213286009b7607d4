"""The calendar MCP server as a real stdio subprocess, against a real Radicale (CalDAV + CardDAV).

One Radicale per module (tests/calendar_servers.py), seeded through the protocols with the
owner's week in Europe/Paris. What the tools wrote is checked with a plain `caldav` session of
the test's own, as another calendar app would see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta

import icalendar
import pytest
from mcp import Client

from tests.calendar_servers import INJECTION, OWNER, OWNER_EMAIL, PASSWORD, ZONE, Radicale, at, seed
from tests.test_servers_core_web import served, text_of

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def radicale() -> Iterator[Radicale]:
    server = Radicale()
    try:
        server.start()
        server.make_collections()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def today(radicale: Radicale) -> date:
    day = datetime.now(ZONE).date()
    seed(radicale, day)
    return day


def _env(radicale: Radicale, **extra: str) -> dict[str, str]:
    return {"IRIIS_CALDAV_URL": radicale.url, "IRIIS_CALDAV_USER": OWNER, "IRIIS_CALDAV_PASSWORD": PASSWORD,
            "IRIIS_CALDAV_EMAIL": OWNER_EMAIL, "IRIIS_TIMEZONE": "Europe/Paris", **extra}


def _day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b}"


def _stored(radicale: Radicale, title: str, day: date) -> list[icalendar.Event]:
    """The VEVENTs titled `title` on `day`, as a separate calendar app reads them."""
    found = radicale.calendar().search(start=at(day, 0), end=at(day + timedelta(days=1), 0), event=True, expand=False)
    components = [c for obj in found for c in obj.get_icalendar_instance().walk("VEVENT")]
    return [c for c in components if str(c.get("summary")) == title]


async def _tools(client: Client) -> dict[str, object]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_agenda_free_time_and_contacts(radicale: Radicale, today: date) -> None:
    tomorrow = today + timedelta(days=1)
    async with served("calendar", _env(radicale)) as client:
        tools = await _tools(client)
        assert set(tools) == {"agenda", "free_time", "find_contact", "create_event", "move_event", "cancel_event",
                              "invite"}
        for name in ("agenda", "free_time", "find_contact"):
            assert tools[name].annotations.read_only_hint is True  # type: ignore[attr-defined]
        assert tools["cancel_event"].annotations.destructive_hint is True  # type: ignore[attr-defined]
        assert "Europe/Paris" in (client.instructions or "")

        day = await client.call_tool("agenda", {})
        body = text_of(day)
        assert not day.is_error, body
        assert f"{_day(today)} 09:30-09:45 · Standup · repeats" in body
        assert f"{_day(today)} 12:00-13:00 · Team lunch · from bob@example.test" in body
        assert INJECTION in body and "Dentist" not in body
        assert day.structured_content is not None
        assert day.structured_content["sources"] == ["calendar:bob@example.test"]

        next_day = await client.call_tool("agenda", {"start": "tomorrow"})
        assert f"{_day(tomorrow)} 10:00-11:00 · Dentist · Rue X" in text_of(next_day)
        assert "Team lunch" not in text_of(next_day)
        assert next_day.structured_content["sources"] == []  # type: ignore[index]

        week = await client.call_tool("agenda", {"start": "today", "days": 8})
        lines = text_of(week).splitlines()
        standups = [line for line in lines if "Standup" in line]
        assert len(standups) == 2, lines
        assert f"{_day(today + timedelta(days=7))} 09:30-09:45" in standups[1]
        # Stored in UTC, shown in Paris.
        paris = datetime.combine(today + timedelta(days=2), time(14), tzinfo=UTC).astimezone(ZONE)
        shown = f" · {_day(paris)} {paris:%H:%M}-{paris + timedelta(hours=1):%H:%M} · Call with New York"
        assert any(line.endswith(shown) for line in lines), lines
        ids = {event["id"] for event in week.structured_content["events"]}  # type: ignore[index]
        assert all(len(i) == 9 and i.startswith("#") for i in ids)

        free = await client.call_tool("free_time", {"start": "tomorrow"})
        body = text_of(free)
        assert not free.is_error, body
        # The dentist (10-11) is busy; the rent reminder is marked free, so 14-15 stays open.
        assert f"{_day(tomorrow)} 09:00-10:00 (1 h)" in body
        assert f"{_day(tomorrow)} 11:00-18:00 (7 h)" in body
        long_only = await client.call_tool("free_time", {"start": "tomorrow", "minutes": 90})
        assert [s["start"][11:16] for s in long_only.structured_content["slots"]] == ["11:00"]  # type: ignore[index]

        for query in ("zoe", "ZOÉ MARTIN", "zoe@example.test", "06 12 34 56 78", "+33612345678"):
            found = await client.call_tool("find_contact", {"query": query})
            assert not found.is_error, text_of(found)
            assert text_of(found) == "Zoé Martin · zoe@example.test · +33 6 12 34 56 78 · Acme", query
            assert found.structured_content["sources"] == ["contacts:card-zoe"]  # type: ignore[index]
        lea = await client.call_tool("find_contact", {"query": "Lea"})
        assert text_of(lea) == "Léa Dubois · +33 1 44 55 66 77"
        none = await client.call_tool("find_contact", {"query": "nobody"})
        assert not none.is_error and "No contact matches" in text_of(none)


async def test_create_move_cancel_and_unknown_ids(radicale: Radicale, today: date) -> None:
    tomorrow = today + timedelta(days=1)
    async with served("calendar", _env(radicale)) as client:
        made = await client.call_tool("create_event", {"title": "Call the bank", "start": "tomorrow at 9",
                                                       "duration_minutes": 30, "location": "Phone"})
        assert not made.is_error, text_of(made)
        assert f"· {_day(tomorrow)} 09:00-09:30 · Call the bank · Phone" in text_of(made)
        event_id = made.structured_content["event"]["id"]  # type: ignore[index]

        [stored] = _stored(radicale, "Call the bank", tomorrow)
        assert stored.decoded("dtstart") == at(tomorrow, 9)
        assert stored["dtstart"].params["TZID"] == "Europe/Paris"
        assert stored.decoded("dtend") == at(tomorrow, 9, 30)

        moved = await client.call_tool("move_event", {"event_id": event_id, "start": "tomorrow at 15:00"})
        assert not moved.is_error, text_of(moved)
        assert f"{_day(tomorrow)} 15:00-15:30 · Call the bank" in text_of(moved)
        [stored] = _stored(radicale, "Call the bank", tomorrow)
        assert (stored.decoded("dtstart"), stored.decoded("dtend")) == (at(tomorrow, 15), at(tomorrow, 15, 30))
        assert int(stored["sequence"]) == 1

        longer = await client.call_tool("move_event", {"event_id": event_id, "start": "tomorrow at 16", "end": "17:15"})
        assert "16:00-17:15 · Call the bank" in text_of(longer), text_of(longer)

        gone = await client.call_tool("cancel_event", {"event_id": event_id})
        assert not gone.is_error and "cancelled" in text_of(gone)
        assert _stored(radicale, "Call the bank", tomorrow) == []
        again = await client.call_tool("cancel_event", {"event_id": event_id})
        assert again.is_error and f"no event {event_id}" in text_of(again)

        unknown = await client.call_tool("move_event", {"event_id": "#deadbeef", "start": "tomorrow at 10"})
        assert unknown.is_error and "no event #deadbeef" in text_of(unknown) and "agenda" in text_of(unknown)
        huge = await client.call_tool("cancel_event", {"event_id": "x" * 900})
        assert huge.is_error and "is not an event id" in text_of(huge)
        past = await client.call_tool("create_event", {"title": "Too late", "start": "2001-01-01T10:00"})
        assert past.is_error and "in the past" in text_of(past)


async def test_invite_adds_attendees_and_refuses_bad_ones(radicale: Radicale, today: date) -> None:
    day = today + timedelta(days=3)
    async with served("calendar", _env(radicale)) as client:
        made = await client.call_tool("create_event", {"title": "Planning", "start": f"{day.isoformat()}T11:00"})
        event_id = made.structured_content["event"]["id"]  # type: ignore[index]

        invited = await client.call_tool("invite", {"event_id": event_id,
                                                    "attendees": ["zoe martin", "carl@example.test"]})
        body = text_of(invited)
        assert not invited.is_error, body
        assert "Zoé Martin <zoe@example.test>, carl@example.test" in body and "Planning" in body
        assert invited.structured_content["sources"] == ["contacts:card-zoe"]  # type: ignore[index]
        [stored] = _stored(radicale, "Planning", day)
        attendees = {str(a).removeprefix("mailto:"): a.params for a in stored.get("attendee")}
        assert set(attendees) == {"zoe@example.test", "carl@example.test"}
        assert attendees["zoe@example.test"]["CN"] == "Zoé Martin"
        for params in attendees.values():
            assert (params["ROLE"], params["PARTSTAT"], params["RSVP"]) == ("REQ-PARTICIPANT", "NEEDS-ACTION", "TRUE")
        assert str(stored["organizer"]) == f"mailto:{OWNER_EMAIL}"

        twice = await client.call_tool("invite", {"event_id": event_id, "attendees": ["carl@example.test"]})
        assert not twice.is_error and "already invited" in text_of(twice)

        for attendees_given, expected in [(["carl@@example.test"], "not a valid email address"),
                                          (["nobody known"], "no contact with an email address matches"),
                                          (["lea dubois"], "Léa Dubois has no email address"),
                                          ([f"p{n}@example.test" for n in range(51)], "at most 50")]:
            refused = await client.call_tool("invite", {"event_id": event_id, "attendees": attendees_given})
            assert refused.is_error and expected in text_of(refused), text_of(refused)
        [stored] = _stored(radicale, "Planning", day)
        assert len(stored.get("attendee")) == 2

        lunch = await client.call_tool("agenda", {})
        lunch_id = next(e["id"] for e in lunch.structured_content["events"]  # type: ignore[index]
                        if e["title"] == "Team lunch")
        foreign = await client.call_tool("invite", {"event_id": lunch_id, "attendees": ["carl@example.test"]})
        assert foreign.is_error and "only its organizer can invite" in text_of(foreign)
        not_ours = await client.call_tool("move_event", {"event_id": lunch_id, "start": "tomorrow at 13"})
        assert not_ours.is_error and "organised by bob@example.test; ask them to move it" in text_of(not_ours)
        [lunch_stored] = _stored(radicale, "Team lunch", today)
        assert lunch_stored.decoded("dtstart") == at(today, 12) and "attendee" not in lunch_stored


async def test_wrong_password_and_server_gone(radicale: Radicale, today: date) -> None:
    async with served("calendar", _env(radicale, IRIIS_CALDAV_PASSWORD="wrong-password-7")) as client:
        refused = await client.call_tool("agenda", {})
        message = text_of(refused)
        assert refused.is_error
        assert f"refused the login for {OWNER}: check IRIIS_CALDAV_USER and IRIIS_CALDAV_PASSWORD" in message
        assert "wrong-password-7" not in message and "Traceback" not in message
        cards = await client.call_tool("find_contact", {"query": "zoe"})
        assert cards.is_error and "refused the login" in text_of(cards)

    async with served("calendar", _env(radicale)) as client:
        assert not (await client.call_tool("agenda", {})).is_error
        radicale.stop()
        try:
            gone = await client.call_tool("agenda", {})
            assert gone.is_error
            assert f"could not reach the calendar server at {radicale.url}" in text_of(gone)
            assert PASSWORD not in text_of(gone)
        finally:
            radicale.start()
        back = await client.call_tool("agenda", {"start": "tomorrow"})
        assert not back.is_error and "Dentist" in text_of(back)
