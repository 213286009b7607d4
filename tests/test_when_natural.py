"""Times and repeats as people and small models write them (issue 32), read on a fixed clock:
Monday 2026-12-07 14:05 in Europe/Paris. Each accepted form resolves to an exact local time;
past and unreadable times are refused with a message that says how to retry."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from actors.common import when
from actors.scheduler import tasks
from actors.store.store import Store

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 12, 7, 14, 5, tzinfo=PARIS).timestamp()  # a Monday


def local(text: str, now: float = NOW, tz: ZoneInfo = PARIS) -> datetime:
    return datetime.fromtimestamp(tasks.parse_when(text, now, tz), tz).replace(tzinfo=None)


def at(day: int, hour: int, minute: int = 0, month: int = 12, year: int = 2026) -> datetime:
    return datetime(year, month, day, hour, minute)


# -- one-off times -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # durations from now
    ("10 minutes from now", at(7, 14, 15)),
    ("in 10 min", at(7, 14, 15)),
    ("in two hours", at(7, 16, 5)),
    ("in half an hour", at(7, 14, 35)),
    ("in an hour and a half", at(7, 15, 35)),
    ("1h30m", at(7, 15, 35)),
    ("now", at(7, 14, 5)),
    # times of day: later today, or tomorrow once past
    ("7pm", at(7, 19)),
    ("at 5:30 pm", at(7, 17, 30)),
    ("5 p.m.", at(7, 17)),
    ("9am", at(8, 9)),
    ("13:00", at(8, 13)),
    ("noon", at(8, 12)),
    ("midnight", at(8, 0)),
    ("half past 5", at(7, 17, 30)),
    # a bare hour is the next time the clock shows it
    ("at 7", at(7, 19)),
    ("at 9", at(7, 21)),
    # parts of a day
    ("tonight at 8", at(7, 20)),
    ("8 tonight", at(7, 20)),
    ("this evening", at(7, 19)),
    ("tomorrow afternoon", at(8, 15)),
    ("tomorrow night", at(8, 20)),
    ("tomorrow evening at 7", at(8, 19)),
    # named days: a bare hour reads as daytime, no time means 09:00
    ("tomorrow at 9", at(8, 9)),
    ("tomorrow 9", at(8, 9)),
    ("tomorrow at 5", at(8, 17)),
    ("tomorrow 08:15", at(8, 8, 15)),
    ("9am tomorrow", at(8, 9)),
    ("tomorrow", at(8, 9)),
    ("next Monday morning", at(14, 9)),
    ("Friday 17:00", at(11, 17)),
    ("next Friday at 3pm", at(11, 15)),
    ("on Tuesday", at(8, 9)),
    ("24 December 2026", at(24, 9)),
    ("Dec 24 at 18:00", at(24, 18)),
    ("2026-12-08 9:00", at(8, 9)),
])
def test_natural_times_resolve_in_the_owner_time_zone(text: str, expected: datetime) -> None:
    assert local(text) == expected


def test_a_date_without_a_time_is_that_morning() -> None:
    first = datetime(2026, 12, 1, 10, 0, tzinfo=PARIS).timestamp()
    assert local("06 December 2026", first) == at(6, 9)


def test_next_monday_is_the_coming_monday() -> None:
    wednesday = datetime(2026, 12, 9, 14, 5, tzinfo=PARIS).timestamp()
    assert local("next Monday", wednesday) == at(14, 9)
    assert local("next Monday", NOW) == at(14, 9)  # said on a Monday: the one a week on


def test_a_time_of_day_already_past_is_tomorrow() -> None:
    evening = datetime(2026, 12, 7, 20, 0, tzinfo=PARIS).timestamp()
    assert local("7pm", evening) == at(8, 19)
    assert local("at 9", evening) == at(7, 21)
    assert local("at 9", datetime(2026, 12, 7, 22, 0, tzinfo=PARIS).timestamp()) == at(8, 9)


def test_the_owner_time_zone_is_used() -> None:
    york = ZoneInfo("America/New_York")  # NOW is 08:05 there
    assert local("9am", tz=york) == at(7, 9)
    assert local("tomorrow 08:15", tz=york) == at(8, 8, 15)


@pytest.mark.parametrize("text", ["yesterday at 9", "this morning", "06 December 2026", "2026-12-01T09:00",
                                  "1700000000"])
def test_a_past_time_is_refused_with_how_to_retry(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        tasks.parse_when(text, NOW, PARIS)
    message = str(refused.value)
    assert "in the past" in message and repr(text) in message
    assert "it is now 2026-12-07 14:05 Europe/Paris" in message
    assert "'in 20 minutes'" in message and "'tomorrow 09:00'" in message and "'2026-12-08T09:00'" in message


def test_a_time_within_the_last_minute_is_kept() -> None:
    assert tasks.parse_when(str(NOW - 30), NOW, PARIS) == NOW - 30


@pytest.mark.parametrize("text", ["at teatime", "someday", "", "   ", "9", "900", "nan", "25:00", "tomorrow at 25",
                                  "blah blah", "in a bit"])
def test_garbage_is_refused_with_the_time_now(text: str) -> None:
    with pytest.raises(ValueError) as refused:
        tasks.parse_when(text, NOW, PARIS)
    message = str(refused.value)
    assert "not a time I can read" in message and "it is now 2026-12-07 14:05 Europe/Paris" in message
    assert "'7pm'" in message and "ISO 8601 '2026-12-08T09:00'" in message


def test_a_repeat_given_as_a_time_is_pointed_at_repeat() -> None:
    with pytest.raises(ValueError, match="put it in repeat"):
        tasks.parse_when("every weekday at 8", NOW, PARIS)


def test_iso_epoch_and_in_minutes_read_as_before() -> None:
    assert tasks.parse_when("in 20 minutes", NOW) == NOW + 1200
    assert tasks.parse_when("in 1.5h", NOW) == NOW + 5400
    assert tasks.parse_when("in 0 minutes", NOW) == NOW
    assert tasks.parse_when("1800000123", NOW) == 1_800_000_123.0
    utc = ZoneInfo("UTC")
    assert tasks.parse_when("2027-01-15T17:00", NOW, PARIS) == datetime(2027, 1, 15, 17, tzinfo=PARIS).timestamp()
    assert tasks.parse_when("2027-01-15T17:00Z", NOW, PARIS) == datetime(2027, 1, 15, 17, tzinfo=utc).timestamp()
    assert tasks.parse_when("2027-01-15T17:00", NOW) == datetime(2027, 1, 15, 17, tzinfo=utc).timestamp()
    assert tasks.parse_when is when.parse_when


# -- repeats -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, cron, first", [
    ("every weekday at 8", "0 8 * * 1-5", at(8, 8)),
    ("weekdays at 8am", "0 8 * * 1-5", at(8, 8)),
    ("every working day at 8:30", "30 8 * * 1-5", at(8, 8, 30)),
    ("every day at 7:30", "30 7 * * *", at(8, 7, 30)),
    ("daily at 9", "0 9 * * *", at(8, 9)),
    ("9am every day", "0 9 * * *", at(8, 9)),
    ("every morning", "0 9 * * *", at(8, 9)),
    ("every night at 10", "0 22 * * *", at(7, 22)),
    ("every Monday at 9", "0 9 * * 1", at(14, 9)),
    ("Mondays at 6pm", "0 18 * * 1", at(7, 18)),
    ("every Monday and Thursday at 18:00", "0 18 * * 1,4", at(7, 18)),
    ("weekly on Friday at 17:00", "0 17 * * 5", at(11, 17)),
    ("every weekday", "0 9 * * 1-5", at(8, 9)),
    ("on weekends at 10", "0 10 * * 0,6", at(12, 10)),
    ("monthly on the 1st at 9", "0 9 1 * *", at(1, 9, month=1, year=2027)),
])
def test_repeats_in_words_become_cron(text: str, cron: str, first: datetime) -> None:
    repeat = tasks.parse_repeat(text)
    assert (repeat.cron, repeat.text, repeat.seconds) == (cron, cron, None)
    assert datetime.fromtimestamp(repeat.next_after(NOW, PARIS), PARIS).replace(tzinfo=None) == first


@pytest.mark.parametrize("text, seconds", [
    ("every 30 minutes", 1800), ("hourly", 3600), ("every five minutes", 300), ("every half an hour", 1800),
    ("every 1h30m", 5400), ("daily", 86_400), ("every 2h", 7200),
])
def test_intervals_in_words(text: str, seconds: float) -> None:
    assert tasks.parse_repeat(text).seconds == seconds


@pytest.mark.parametrize("text", ["weekly at 9", "each day", "every 2nd day", "every blue moon", "every day at 25",
                                  "monthly at 9", "every other day", "sometimes"])
def test_an_unclear_repeat_is_refused_with_the_forms_that_work(text: str) -> None:
    with pytest.raises(tasks.InvalidRepeat) as refused:
        tasks.parse_repeat(text)
    message = str(refused.value)
    assert "'every weekday at 8'" in message and "cron" in message and "'every 30 minutes'" in message


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_a_repeat_alone_first_runs_at_its_next_match(store: Store) -> None:
    row = await tasks.create_task(store, "Stand-up", "stand-up", NOW, repeat="every weekday at 8", kind="reminder",
                                  tz=PARIS)
    assert row.repeat == "0 8 * * 1-5"
    assert datetime.fromtimestamp(row.next_run, PARIS).replace(tzinfo=None) == at(8, 8)
    friday = await tasks.create_task(store, "Week", "review", NOW, repeat="weekly on Friday at 17:00", tz=PARIS)
    assert datetime.fromtimestamp(friday.next_run, PARIS).replace(tzinfo=None) == at(11, 17)
    # The runner reads the stored repeat again after each run: the next weekday, not a day later.
    due = tasks.next_run_after(row.repeat, datetime(2026, 12, 11, 8, 0, 1, tzinfo=PARIS).timestamp(), PARIS)
    assert datetime.fromtimestamp(due, PARIS).replace(tzinfo=None) == at(14, 8)


def test_the_tools_take_a_repeat_alone_or_a_repeat_written_as_the_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.scheduler import server

    monkeypatch.setenv("IRIIS_TIMEZONE", "Europe/Paris")
    first, repeat = server._schedule(None, "every weekday at 8", NOW)
    assert repeat is not None and repeat.cron == "0 8 * * 1-5"
    assert first is not None and datetime.fromtimestamp(first, PARIS).replace(tzinfo=None) == at(8, 8)
    first, repeat = server._schedule("every Monday at 9", None, NOW)
    assert repeat is not None and repeat.cron == "0 9 * * 1"
    assert first is not None and datetime.fromtimestamp(first, PARIS).replace(tzinfo=None) == at(14, 9)
    first, repeat = server._schedule("tomorrow at 9", "daily", NOW)
    assert repeat is not None and repeat.seconds == 86_400
    assert first is not None and datetime.fromtimestamp(first, PARIS).replace(tzinfo=None) == at(8, 9)
    with pytest.raises(server.ToolError, match="not a time I can read"):
        server._schedule("at teatime", None, NOW)
    # What small models write in `repeat` to say there is none is a one-off, not an error.
    for none in ("once", "None", "no", "never", "null"):
        first, repeat = server._schedule("tomorrow at 9", none, NOW)
        assert repeat is None and datetime.fromtimestamp(first, PARIS).replace(tzinfo=None) == at(8, 9)


def test_date_arithmetic_reads_dates_as_people_write_them() -> None:
    import datetime as dt

    from actors.common.when import natural_moment
    from actors.tools.servers.core import date_add_text, date_diff_text, parse_moment

    zone = ZoneInfo("Europe/Paris")
    now = dt.datetime(2026, 12, 7, 14, 5, tzinfo=zone)
    assert parse_moment("07 December 2026", zone, now) == dt.date(2026, 12, 7)
    assert parse_moment("December 25", zone, now) == dt.date(2026, 12, 25)
    assert parse_moment("30 days", zone, now) == dt.date(2027, 1, 6)
    assert natural_moment("in 30 days", now, zone) == dt.date(2027, 1, 6)
    assert natural_moment("2 weeks ago", now, zone) == dt.date(2026, 11, 23)
    assert natural_moment("3 March", now, zone) == dt.date(2026, 3, 3)   # the past is fine here
    assert natural_moment("teatime", now, zone) is None
    assert "18 days" in date_diff_text("today", "December 25", zone, now=now)
    assert "2027-01-06" in date_add_text("07 December 2026", zone, days=30, now=now)
