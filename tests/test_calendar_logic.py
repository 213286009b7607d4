"""The calendar's pure parts, in-process: settings, times and free time, events, contacts, ids,
and the server's tool listing (no network anywhere: milliseconds)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import icalendar
import pytest
import vobject

from actors.tools.calendar import contacts as cards
from actors.tools.calendar import events, times
from actors.tools.calendar.client import CalendarError, _reason, event_key, master
from actors.tools.calendar.settings import CalendarConfigError, calendar_settings, shown_url, working_hours
from actors.tools.servers.calendar import create_server

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 12, 8, 8, 0, tzinfo=PARIS)  # a Tuesday morning
ENV = {"IRIIS_CALDAV_URL": "https://dav.example.test/", "IRIIS_CALDAV_USER": "ana@example.test",
       "IRIIS_CALDAV_PASSWORD": "pw", "IRIIS_TIMEZONE": "Europe/Paris"}


def paris(day: int, hour: int, minute: int = 0, month: int = 12) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=PARIS)


# -- settings ----------------------------------------------------------------------------------

def test_settings_from_the_environment() -> None:
    assert calendar_settings({}) is None
    assert calendar_settings({k: v for k, v in ENV.items() if k != "IRIIS_CALDAV_PASSWORD"}) is None
    settings = calendar_settings(ENV)
    assert settings is not None
    assert settings.carddav_url == ENV["IRIIS_CALDAV_URL"] and settings.calendar is None
    assert settings.zone() == PARIS and (settings.work_start, settings.work_end) == (time(9), time(18))
    assert settings.owner_addresses() == frozenset({"ana@example.test"})
    other = calendar_settings({**ENV, "IRIIS_CALDAV_USER": "ana", "IRIIS_CALDAV_EMAIL": "Ana@Example.test",
                               "IRIIS_CARDDAV_URL": "https://cards.example.test/", "IRIIS_WORKING_HOURS": "8:30-17"})
    assert other is not None and other.owner_addresses() == frozenset({"ana@example.test"})
    assert other.carddav_url == "https://cards.example.test/" and other.work_start == time(8, 30)
    assert "pw" not in repr(settings)


@pytest.mark.parametrize(("key", "value"), [("IRIIS_TIMEZONE", "Mars/Olympus"), ("IRIIS_CALDAV_URL", "ftp://x"),
                                            ("IRIIS_WORKING_HOURS", "18-9"), ("IRIIS_CALDAV_EMAIL", "ana"),
                                            ("IRIIS_CALDAV_TIMEOUT", "soon")])
def test_wrong_settings_name_the_variable(key: str, value: str) -> None:
    with pytest.raises(CalendarConfigError, match=key):
        calendar_settings({**ENV, key: value})


def test_urls_in_messages_carry_no_credentials() -> None:
    assert shown_url("https://ana:secret@dav.example.test:8443/cal/?x=1") == "https://dav.example.test:8443/cal/"
    assert working_hours("9-18") == (time(9), time(18))


# -- reading times -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("tomorrow at 9", paris(9, 9)), ("Friday 14:00", paris(11, 14)), ("in 2 hours", paris(8, 10)),
    ("2026-12-20T10:00", paris(20, 10)), ("2026-12-20T10:00Z", paris(20, 11)), ("7pm", paris(8, 19)),
])
def test_event_starts_as_people_write_them(text: str, expected: datetime) -> None:
    assert times.parse_start(text, NOW, PARIS) == expected


def test_event_spans_and_their_refusals() -> None:
    assert times.event_span("tomorrow at 9", None, None, NOW, PARIS) == (paris(9, 9), paris(9, 10))
    assert times.event_span("tomorrow at 9", None, 30, NOW, PARIS) == (paris(9, 9), paris(9, 9, 30))
    assert times.event_span("tomorrow at 9", "11:00", None, NOW, PARIS) == (paris(9, 9), paris(9, 11))
    assert times.event_span("tomorrow at 9", "90 minutes", None, NOW, PARIS)[1] == paris(9, 10, 30)
    assert times.event_span("tomorrow at 16", "until 5pm", None, NOW, PARIS)[1] == paris(9, 17)
    assert times.event_span("tomorrow at 22", "01:00", None, NOW, PARIS)[1] == paris(10, 1)
    with pytest.raises(times.TimeError, match="not both"):
        times.event_span("tomorrow at 9", "10:00", 30, NOW, PARIS)
    with pytest.raises(times.TimeError, match="in the past"):
        times.event_span("2026-12-01T10:00", None, None, NOW, PARIS)
    with pytest.raises(times.TimeError, match="not a time I can read"):
        times.event_span("whenever suits", None, None, NOW, PARIS)
    with pytest.raises(times.TimeError, match="not after the start"):
        times.event_span("tomorrow at 9", "2026-12-09T08:00", None, NOW, PARIS)
    with pytest.raises(times.TimeError, match="longer than 31 days"):
        times.event_span("tomorrow at 9", None, 60 * 24 * 40, NOW, PARIS)


@pytest.mark.parametrize(("start", "end", "days", "first", "last"), [
    ("today", None, None, paris(8, 0), paris(9, 0)),
    ("tomorrow", None, None, paris(9, 0), paris(10, 0)),
    ("friday", None, None, paris(11, 0), paris(12, 0)),
    ("tuesday", None, None, paris(8, 0), paris(9, 0)),
    ("next tuesday", None, None, paris(15, 0), paris(16, 0)),
    ("yesterday", None, None, paris(7, 0), paris(8, 0)),
    ("this week", None, None, paris(8, 0), paris(14, 0)),
    ("next week", None, None, paris(14, 0), paris(21, 0)),
    ("today", None, 3, paris(8, 0), paris(11, 0)),
    ("today", "friday", None, paris(8, 0), paris(12, 0)),
    ("2026-12-24", None, None, paris(24, 0), paris(25, 0)),
    ("Friday 14:00", None, None, paris(11, 14), paris(12, 0)),
    ("now", "2026-12-08T12:00", None, paris(8, 8), paris(8, 12)),
])
def test_agenda_ranges(start: str, end: str | None, days: int | None, first: datetime, last: datetime) -> None:
    assert times.day_range(start, end, days, NOW, PARIS) == (first, last)


def test_ranges_refused_and_across_a_clock_change() -> None:
    with pytest.raises(times.TimeError, match="before it starts"):
        times.day_range("friday", "tuesday", None, NOW, PARIS)
    with pytest.raises(times.TimeError, match="longer than 92 days"):
        times.day_range("today", "2027-12-01", None, NOW, PARIS)
    with pytest.raises(times.TimeError, match="could not read the day"):
        times.day_range("the blue moon", None, None, NOW, PARIS)
    start, end = times.day_range("2027-03-28", None, None, NOW, PARIS)  # 23 hours long in Paris
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(hours=23) and end.hour == 0


# -- free time ---------------------------------------------------------------------------------

def test_free_slots_within_working_hours() -> None:
    busy = [(paris(9, 10), paris(9, 11)), (paris(9, 10, 30), paris(9, 11, 45)),   # overlapping: merged
            (paris(9, 12), paris(9, 12, 20)),                       # leaves 15 minutes before it: too short
            (paris(9, 15).astimezone(UTC), paris(9, 16).astimezone(UTC))]          # given in UTC
    slots = times.free_slots(paris(9, 0), paris(10, 0), busy, PARIS)
    assert slots == [(paris(9, 9), paris(9, 10)), (paris(9, 12, 20), paris(9, 15)), (paris(9, 16), paris(9, 18))]
    assert all(a.tzinfo == PARIS for a, _ in slots)
    assert times.slot_line(*slots[1]) == "Wed 9 Dec 12:20-15:00 (2 h 40)"
    longer = times.free_slots(paris(9, 0), paris(10, 0), busy, PARIS, minimum=timedelta(hours=2, minutes=30))
    assert longer == [(paris(9, 12, 20), paris(9, 15))]
    # A range starting mid-morning, over two days, with an event across midnight.
    overnight = [(paris(9, 17), paris(10, 9, 30))]
    two_days = times.free_slots(paris(9, 11), paris(11, 0), overnight, PARIS, (time(8), time(18)))
    assert two_days == [(paris(9, 11), paris(9, 17)), (paris(10, 9, 30), paris(10, 18))]
    assert times.free_slots(paris(9, 0), paris(10, 0), [(paris(8, 0), paris(11, 0))], PARIS) == []
    assert times.length_text(timedelta(minutes=45)) == "45 min" and times.length_text(timedelta(hours=2)) == "2 h"


# -- events ------------------------------------------------------------------------------------

def _vevent(**props: object) -> icalendar.Event:
    component = icalendar.Event()
    component.add("uid", props.pop("uid", "u-1"))
    for name, value in props.items():
        component.add(name, value)
    return component


def test_event_views_and_lines() -> None:
    own = events.view_of(_vevent(summary="Dentist", dtstart=paris(11, 9), dtend=paris(11, 10), location="Rue X"),
                         PARIS, "Personal")
    assert events.line(own) == f"#{events.short_id('u-1')} · Fri 11 Dec 09:00-10:00 · Dentist · Rue X"
    assert own.busy and not own.all_day and not own.recurring

    utc = events.view_of(_vevent(summary="NY", dtstart=datetime(2026, 12, 11, 14, tzinfo=UTC),
                                 duration=timedelta(minutes=90)), PARIS)
    assert events.span_text(utc) == "Fri 11 Dec 15:00-16:30"
    floating = events.view_of(_vevent(dtstart=datetime(2026, 12, 11, 14), dtend=datetime(2026, 12, 11, 15)), PARIS)
    assert floating.start == paris(11, 14) and floating.title == "(no title)"
    holiday = events.view_of(_vevent(summary="Holiday", dtstart=date(2026, 12, 24), dtend=date(2026, 12, 27),
                                     transp="TRANSPARENT"), PARIS)
    assert holiday.all_day and not holiday.busy
    assert events.span_text(holiday) == "Thu 24 Dec - Sat 26 Dec (all day)"
    assert events.span_text(events.view_of(_vevent(dtstart=date(2026, 12, 24)), PARIS)) == "Thu 24 Dec (all day)"
    night = events.view_of(_vevent(dtstart=paris(11, 22), dtend=paris(12, 1), rrule={"freq": "weekly"},
                                   status="CANCELLED"), PARIS)
    assert events.span_text(night, 2027) == "Fri 11 Dec 2026 22:00 - Sat 12 Dec 2026 01:00"
    assert night.recurring and night.cancelled and not night.busy
    assert events.line(night).endswith("· repeats · cancelled")


def test_outside_content_is_named_by_its_organizer() -> None:
    owner = frozenset({"ana@example.test"})
    bob = icalendar.vCalAddress("mailto:bob@example.test")
    named = icalendar.vCalAddress("urn:x-team:7")
    named.params["CN"] = "Team robot"
    views = [events.view_of(_vevent(uid=f"u{n}", dtstart=paris(9, 9), organizer=who), PARIS, "Work")
             for n, who in enumerate([bob, named, icalendar.vCalAddress("MAILTO:ana@example.test"), bob])]
    views.append(events.view_of(_vevent(uid="mine", dtstart=paris(9, 9)), PARIS, "Personal"))
    assert events.sources(views, owner) == ["calendar:bob@example.test", "calendar:Work"]
    assert events.line(views[0], owner).endswith("· from bob@example.test")
    assert not events.is_foreign(views[2], owner) and not events.is_foreign(views[4], frozenset())


def test_short_ids_and_addresses() -> None:
    assert events.short_id("abc@example.test") == events.short_id("abc@example.test")
    assert len(events.short_id("x")) == 8 and events.short_id("x") != events.short_id("y")
    assert events.valid_email(" mailto:Zoe.M+cal@Example.TEST ") == "Zoe.M+cal@example.test"
    assert events.valid_email("<bob@example.test>") == "bob@example.test"
    for bad in ("bob", "bob@", "@example.test", "bob@@example.test", "bob@example", "bo b@example.test",
                "bob@exa_mple.test", "a..b@example.test", "x" * 70 + "@example.test"):
        assert events.valid_email(bad) is None, bad


def test_new_events_are_built_with_icalendar() -> None:
    made = events.new_event("Dentist", paris(11, 9), paris(11, 10), PARIS, NOW, location="Rue X", notes="bring card")
    text = events.wrap(made).to_ical().decode()
    assert "DTSTART;TZID=Europe/Paris:20261211T090000" in text and "DTEND;TZID=Europe/Paris:20261211T100000" in text
    assert "BEGIN:VTIMEZONE" in text and "TZID:Europe/Paris" in text
    assert "SUMMARY:Dentist" in text and "LOCATION:Rue X" in text and "DESCRIPTION:bring card" in text
    assert str(made["uid"]).endswith("@iriis") and int(made["sequence"]) == 0
    in_utc = events.wrap(events.new_event("Call", paris(11, 9), paris(11, 10), ZoneInfo("UTC"), NOW)).to_ical().decode()
    assert "DTSTART:20261211T080000Z" in in_utc and "VTIMEZONE" not in in_utc
    parsed = icalendar.Calendar.from_ical(text)
    assert master(parsed).decoded("dtstart") == paris(11, 9)


def test_attendees_are_added_once_with_the_owner_as_organizer() -> None:
    component = events.new_event("Planning", paris(11, 9), paris(11, 10), PARIS, NOW)
    added = events.add_attendees(component, [("zoe@example.test", "Zoé Martin"), ("carl@example.test", None),
                                             ("ZOE@example.test", None)], "ana@example.test", NOW)
    assert added == ["zoe@example.test", "carl@example.test"]
    text = component.to_ical().decode().replace("\r\n ", "")
    assert "ORGANIZER:mailto:ana@example.test" in text
    zoe = next(line for line in text.splitlines() if "zoe@example.test" in line)
    for param in ('CN="Zoé Martin"', "ROLE=REQ-PARTICIPANT", "PARTSTAT=NEEDS-ACTION", "RSVP=TRUE"):
        assert param in zoe, zoe
    assert int(component["sequence"]) == 1
    assert events.add_attendees(component, [("carl@example.test", None)], "ana@example.test", NOW) == []
    assert int(component["sequence"]) == 1
    view = events.view_of(component, PARIS)
    assert view.attendees == ("zoe@example.test", "carl@example.test")
    preview = events.invitation_preview(view, [("zoe@example.test", "Zoé Martin"), ("carl@example.test", None)], PARIS)
    assert preview.startswith('Invite Zoé Martin <zoe@example.test>, carl@example.test to "Planning"')
    assert "Fri 11 Dec 2026 09:00-10:00 (Europe/Paris)" in preview and "invitation from you" in preview


def test_moving_keeps_the_length() -> None:
    component = events.new_event("Call", paris(11, 9), paris(11, 9, 45), PARIS, NOW)
    events.move(component, paris(14, 16), None, PARIS, NOW)
    assert events.bounds(component) == (paris(14, 16), paris(14, 16, 45)) and int(component["sequence"]) == 1
    events.move(component, paris(15, 10), paris(15, 12), PARIS, NOW)
    assert events.bounds(component) == (paris(15, 10), paris(15, 12))
    with pytest.raises(times.TimeError, match="not after the start"):
        events.move(component, paris(15, 10), paris(15, 9), PARIS, NOW)
    timed = _vevent(dtstart=paris(11, 9), duration=timedelta(hours=2))
    events.move(timed, paris(12, 14), None, PARIS, NOW)
    assert "duration" not in timed and events.bounds(timed) == (paris(12, 14), paris(12, 16))
    all_day = _vevent(dtstart=date(2026, 12, 24), dtend=date(2026, 12, 26))
    events.move(all_day, paris(28, 9), None, PARIS, NOW)
    assert events.bounds(all_day) == (date(2026, 12, 28), date(2026, 12, 30))


# -- contacts ----------------------------------------------------------------------------------

def _card(uid: str, fn: str, email: str | None = None, tel: str | None = None, org: str | None = None) -> str:
    card = vobject.vCard()
    card.add("uid").value = uid
    card.add("fn").value = fn
    if email:
        card.add("email").value = email
    if tel:
        card.add("tel").value = tel
    if org:
        card.add("org").value = [org]
    return card.serialize()


PEOPLE = [c for c in (cards.parse_vcard(_card("z", "Zoé Martin", "zoe@example.test", "+33 6 12 34 56 78", "Acme")),
                      cards.parse_vcard(_card("z2", "Zoé Dupont", "zdupont@example.test")),
                      cards.parse_vcard(_card("b", "Bob Stone", "bob@example.test", "+44 20 7946 0018")),
                      cards.parse_vcard(_card("l", "Léa Dubois", None, "01 44 55 66 77"))) if c is not None]


def test_vcards_become_contacts() -> None:
    assert len(PEOPLE) == 4
    zoe = PEOPLE[0]
    assert (zoe.uid, zoe.name, zoe.emails, zoe.phones, zoe.org) == ("z", "Zoé Martin", ("zoe@example.test",),
                                                                    ("+33 6 12 34 56 78",), "Acme")
    assert zoe.line() == "Zoé Martin · zoe@example.test · +33 6 12 34 56 78 · Acme" and zoe.source == "contacts:z"
    only_n = "BEGIN:VCARD\r\nVERSION:4.0\r\nN:Nguyen;Anh;;;\r\nEMAIL:anh@example.test\r\nEND:VCARD\r\n"
    parsed = cards.parse_vcard(only_n, "/ana/contacts/anh.vcf")
    assert parsed is not None and parsed.name == "Anh Nguyen" and parsed.uid == "/ana/contacts/anh.vcf"
    # Written by a program that leaves out FN (required in vCard 3.0): the organisation names it.
    org_only = cards.parse_vcard("BEGIN:VCARD\r\nVERSION:3.0\r\nUID:o\r\nORG:Acme Corp\r\n"
                                 "EMAIL:info@acme.test\r\nEND:VCARD\r\n")
    assert org_only is not None and org_only.name == "Acme Corp"
    assert cards.parse_vcard("not a card at all") is None
    assert cards.parse_vcard("BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n") is None


@pytest.mark.parametrize(("query", "names"), [
    ("zoe", ["Zoé Dupont", "Zoé Martin"]), ("ZOÉ MARTIN", ["Zoé Martin"]), ("martin zoe", ["Zoé Martin"]),
    ("acme", ["Zoé Martin"]), ("zoe@example.test", ["Zoé Martin"]), ("@example.test", ["Bob Stone", "Zoé Dupont",
                                                                                         "Zoé Martin"]),
    ("06 12 34 56 78", ["Zoé Martin"]), ("+33612345678", ["Zoé Martin"]), ("7946 0018", ["Bob Stone"]),
    ("+33 1 44 55 66 77", ["Léa Dubois"]), ("lea", ["Léa Dubois"]), ("nobody", []), ("123", []),
])
def test_finding_contacts(query: str, names: list[str]) -> None:
    assert sorted(c.name for c in cards.find(PEOPLE, query)) == names


def test_exact_names_come_first() -> None:
    people = [*PEOPLE, cards.Contact(uid="x", name="Bob", emails=("b2@example.test",))]
    assert [c.name for c in cards.find(people, "bob")] == ["Bob", "Bob Stone"]


def test_attendees_resolved_through_the_contacts() -> None:
    people, used = cards.resolve(["Zoé Martin", "carl@Example.test", "bob", "zoe@example.test"], PEOPLE)
    assert people == [("zoe@example.test", "Zoé Martin"), ("carl@example.test", None),
                      ("bob@example.test", "Bob Stone")]
    assert used == ["contacts:z", "contacts:b"]
    with pytest.raises(cards.ContactError, match="matches several contacts.*Zoé Dupont <zdupont@example.test>"):
        cards.resolve(["zoe"], PEOPLE)
    with pytest.raises(cards.ContactError, match="Léa Dubois has no email address"):
        cards.resolve(["lea"], PEOPLE)
    with pytest.raises(cards.ContactError, match="not a valid email address"):
        cards.resolve(["carl@@example.test"], PEOPLE)
    with pytest.raises(cards.ContactError, match="no contact with an email address matches 'nobody'"):
        cards.resolve(["nobody"], PEOPLE)


# -- ids, errors and the server's listing ------------------------------------------------------

def test_event_ids() -> None:
    assert event_key("#1A2B3C4D") == "1a2b3c4d" and event_key(" 1a2b3c4d ") == "1a2b3c4d"
    assert event_key("040000008200E00074C5B7101A82E008@outlook") == "040000008200E00074C5B7101A82E008@outlook"
    for bad in ("", "#", "x" * 300, "abc\ndef"):
        with pytest.raises(CalendarError, match="is not an event id"):
            event_key(bad)


def test_unreachable_reasons_say_why_in_words() -> None:
    assert "refused" in _reason(ConnectionRefusedError("[Errno 111] Connection refused"), 20)
    assert _reason(TimeoutError("timed out"), 20) == "no answer within 20 s"
    assert "host name is unknown" in _reason(OSError("Name or service not known"), 20)


def test_master_is_the_event_not_an_override() -> None:
    cal = icalendar.Calendar()
    override = _vevent(uid="r", dtstart=paris(15, 9), **{"recurrence-id": paris(15, 9)})
    cal.add_component(override)
    cal.add_component(_vevent(uid="r", dtstart=paris(8, 9), rrule={"freq": "weekly"}))
    assert "rrule" in master(cal)
    with pytest.raises(CalendarError, match="holds no event"):
        master(icalendar.Calendar())


async def test_the_server_lists_tools_only_when_configured() -> None:
    unconfigured = create_server({})
    assert await unconfigured.list_tools() == []
    assert "not configured" in (unconfigured.instructions or "") and "IRIIS_CALDAV_URL" in unconfigured.instructions
    wrong = create_server({**ENV, "IRIIS_TIMEZONE": "Mars/Olympus"})
    assert await wrong.list_tools() == [] and "IRIIS_TIMEZONE" in (wrong.instructions or "")
    tools = {t.name: t for t in await create_server(ENV).list_tools()}
    assert set(tools) == {"agenda", "free_time", "find_contact", "create_event", "move_event", "cancel_event", "invite"}
    for name in ("agenda", "free_time", "find_contact"):
        assert tools[name].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["cancel_event"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["invite"].annotations.open_world_hint is True  # type: ignore[union-attr]
