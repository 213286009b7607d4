"""The tasks table on both backends: create, list, cancel, the atomic claim, the fenced finish,
recovery from a dead runner, and two runner processes sharing one table."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from actors.scheduler import tasks
from actors.store.models import OutboxItem
from actors.store.store import Store

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_800_000_000.0


def _url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


# -- schedules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("every 30m", 1800), ("30 minutes", 1800), ("every 2 hours", 7200), ("900", 900), ("daily", 86_400),
    ("every day", 86_400), ("Every  1.5h", 5400), ("2w", 1_209_600),
])
def test_intervals_parse_to_seconds(text: str, seconds: float) -> None:
    assert tasks.parse_repeat(text).seconds == seconds
    assert tasks.next_run_after(text, NOW) == NOW + seconds


def test_cron_is_read_in_the_owner_time_zone() -> None:
    paris = ZoneInfo("Europe/Paris")
    # 2027-01-15 10:00 UTC is 11:00 in Paris: the next "0 9 * * *" there is the 16th, 08:00 UTC.
    after = datetime(2027, 1, 15, 10, 0, tzinfo=UTC).timestamp()
    due = tasks.next_run_after("0 9 * * *", after, paris)
    assert datetime.fromtimestamp(due, UTC) == datetime(2027, 1, 16, 8, 0, tzinfo=UTC)
    assert tasks.parse_repeat("@daily").cron == "@daily"


@pytest.mark.parametrize("text", ["", "every 10s", "30", "61 * * * *", "sometimes", "every blue moon", "* * *"])
def test_a_bad_repeat_is_refused(text: str) -> None:
    with pytest.raises(tasks.InvalidRepeat):
        tasks.parse_repeat(text)


def test_when_reads_iso_relative_and_epoch() -> None:
    paris = ZoneInfo("Europe/Paris")
    assert tasks.parse_when("in 20 minutes", NOW) == NOW + 1200
    assert tasks.parse_when("1800000123", NOW) == 1_800_000_123.0
    local = tasks.parse_when("2027-01-15T17:00", NOW, paris)
    assert datetime.fromtimestamp(local, UTC).hour == 16
    assert tasks.parse_when("2027-01-15T17:00Z", NOW, paris) == datetime(2027, 1, 15, 17, tzinfo=UTC).timestamp()
    with pytest.raises(ValueError):
        tasks.parse_when("at teatime", NOW)


# -- rows --------------------------------------------------------------------------------------

async def test_create_list_get_cancel(store: Store) -> None:
    first = await tasks.create_task(store, " Report ", "Write the report", NOW)
    later = await tasks.create_task(store, "Later", "Later", NOW, run_at=NOW + 3600, repeat="every 2h")
    cron = await tasks.create_task(store, "Cron", "Each morning", NOW, repeat="0 9 * * *")
    reminder = await tasks.create_task(store, "Dentist", "call the dentist", NOW, run_at=NOW + 60, kind="reminder")
    assert (first.title, first.status, first.next_run, first.runs) == ("Report", "scheduled", NOW, 0)
    assert first.conversation_id and reminder.conversation_id is None
    assert later.next_run == NOW + 3600 and later.repeat == "every 2h"
    assert cron.next_run > NOW and cron.next_run == tasks.next_run_after("0 9 * * *", NOW)
    assert [t.id for t in await tasks.list_tasks(store)] == [reminder.id, cron.id, later.id, first.id]
    assert [t.id for t in await tasks.list_tasks(store, kind="reminder")] == [reminder.id]
    assert [t.id for t in await tasks.upcoming(store)] == [first.id, reminder.id, later.id, cron.id]

    cancelled = await tasks.cancel_task(store, first.id, NOW + 1)
    assert cancelled is not None and cancelled.status == "cancelled" and cancelled.updated == NOW + 1
    assert (await tasks.get_task(store, first.id)).status == "cancelled"
    assert await tasks.cancel_task(store, 9999, NOW) is None
    assert await tasks.get_task(store, 9999) is None
    with pytest.raises(tasks.InvalidRepeat):
        await tasks.create_task(store, "Bad", "Bad", NOW, repeat="61 * * * *")


async def test_claim_takes_the_row_due_first_and_counts_the_session(store: Store) -> None:
    late = await tasks.create_task(store, "late", "g", NOW, run_at=NOW + 10)
    early = await tasks.create_task(store, "early", "g", NOW, run_at=NOW + 5)
    assert await tasks.claim_due(store, "a#1", NOW) is None
    got = await tasks.claim_due(store, "a#1", NOW + 20)
    assert got is not None and got.id == early.id
    assert (got.status, got.claimed_by, got.claimed_at, got.runs) == ("running", "a#1", NOW + 20, 1)
    assert (await tasks.claim_due(store, "b#1", NOW + 20)).id == late.id
    assert await tasks.claim_due(store, "b#1", NOW + 20) is None


async def test_finish_is_fenced_on_the_claim(store: Store) -> None:
    row = await tasks.create_task(store, "t", "g", NOW)
    claimed = await tasks.claim_due(store, "a#1", NOW)
    assert not await tasks.finish(store, row.id, "b#1", NOW + 1, status="done", result="not mine")
    assert await tasks.is_open(store, row.id, "a#1") and not await tasks.is_open(store, row.id, "b#1")
    assert await tasks.finish(store, claimed.id, "a#1", NOW + 2, status="done", result="mine")
    assert not await tasks.finish(store, claimed.id, "a#1", NOW + 3, status="done", result="twice")
    done = await tasks.get_task(store, row.id)
    assert (done.status, done.result, done.claimed_by, done.updated) == ("done", "mine", None, NOW + 2)


async def test_a_finished_rows_notice_is_written_with_it_and_only_by_its_runner(store: Store) -> None:
    # A reader who sees the task done sees its notice (one transaction): the fault test of a
    # scheduler killed mid-task once read the outbox between the two writes and found nothing.
    row = await tasks.create_task(store, "t", "g", NOW)
    await tasks.claim_due(store, "a#1", NOW)

    def notice(body: str) -> OutboxItem:
        return OutboxItem(kind="task_done", title="Task done: t", body=body, data={"task_id": row.id}, ts=NOW)

    assert not await tasks.finish(store, row.id, "b#1", NOW + 1, status="done", result="x", notice=notice("not mine"))
    assert await tasks.finish(store, row.id, "a#1", NOW + 2, status="done", result="mine", notice=notice("mine"))
    assert not await tasks.finish(store, row.id, "a#1", NOW + 3, status="done", result="y", notice=notice("twice"))
    assert [(o.kind, o.body) for o in await store.list_outbox()] == [("task_done", "mine")]


async def test_a_cancelled_running_row_is_never_finished(store: Store) -> None:
    row = await tasks.create_task(store, "t", "g", NOW)
    await tasks.claim_due(store, "a#1", NOW)
    assert (await tasks.cancel_task(store, row.id, NOW + 1)).status == "cancelled"
    assert not await tasks.is_open(store, row.id, "a#1")
    assert not await tasks.finish(store, row.id, "a#1", NOW + 2, status="done", result="late")
    assert (await tasks.get_task(store, row.id)).result is None


async def test_recovery_takes_back_only_what_dead_runners_held(store: Store) -> None:
    ids = [(await tasks.create_task(store, f"t{i}", "g", NOW)).id for i in range(5)]
    await tasks.beat(store, "alive#1", NOW)
    await tasks.beat(store, "stale#1", NOW - 300)
    holders = ["alive#1", "stale#1", "gone#1", "me#old", "me#new"]
    for holder in holders:
        await tasks.claim_due(store, holder, NOW)
    await tasks.beat(store, "me#new", NOW)
    rescued = await tasks.recover(store, "me#new", NOW + 30, timeout=900, stale_after=60)
    # No heartbeat (gone), an old heartbeat (stale) and an earlier incarnation of my home.
    assert rescued == [ids[1], ids[2], ids[3]]
    rows = {t.id: t for t in await tasks.list_tasks(store)}
    assert [rows[i].status for i in ids] == ["running", "scheduled", "scheduled", "scheduled", "running"]
    assert rows[ids[2]].next_run == NOW + 30 and rows[ids[2]].claimed_by is None
    # A claim past the timeout is taken back even from a live runner.
    await tasks.beat(store, "alive#1", NOW + 1000)
    assert await tasks.recover(store, "me#new", NOW + 1000, timeout=900, stale_after=60) == [ids[0], ids[4]]


async def test_a_dead_runners_claim_is_recovered_and_finished_once(store: Store) -> None:
    row = await tasks.create_task(store, "t", "g", NOW)
    await tasks.claim_due(store, "dead#1", NOW)
    await tasks.beat(store, "dead#1", NOW)
    assert await tasks.recover(store, "b#1", NOW + 10, timeout=900, stale_after=60) == []
    assert await tasks.recover(store, "b#1", NOW + 61, timeout=900, stale_after=60) == [row.id]
    again = await tasks.claim_due(store, "b#1", NOW + 62)
    assert again.id == row.id and again.runs == 2
    # The presumed-dead runner comes back and tries to finish: fenced out.
    assert not await tasks.finish(store, row.id, "dead#1", NOW + 63, status="done", result="dead")
    assert await tasks.finish(store, row.id, "b#1", NOW + 64, status="done", result="b")
    assert (await tasks.get_task(store, row.id)).result == "b"


async def test_release_hands_back_a_stopped_runners_rows(store: Store) -> None:
    row = await tasks.create_task(store, "t", "g", NOW)
    await tasks.claim_due(store, "a#1", NOW)
    assert await tasks.release(store, "a#1", NOW + 5) == [row.id]
    back = await tasks.get_task(store, row.id)
    assert (back.status, back.next_run, back.claimed_by) == ("scheduled", NOW + 5, None)


# -- real processes ------------------------------------------------------------------------------

def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.task_worker", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def test_two_runner_processes_run_each_of_50_rows_exactly_once(store: Store, tmp_path: Path) -> None:
    import time

    now = time.time()
    ids = {(await tasks.create_task(store, f"t{i}", "g", now)).id for i in range(50)}
    go = tmp_path / "go"
    procs = {name: _worker("drain", _url(store), name, str(go)) for name in ("one#1", "two#1")}
    go.touch()
    ran: dict[str, list[int]] = {}
    for name, proc in procs.items():
        out, err = await asyncio.to_thread(proc.communicate, timeout=120)
        assert proc.returncode == 0, err
        ran[name] = [int(line) for line in out.split()]
    one, two = ran["one#1"], ran["two#1"]
    assert sorted(one + two) == sorted(ids) and not set(one) & set(two)
    assert one and two, "both runners should have taken a share"
    rows = await tasks.list_tasks(store, limit=100)
    assert all(r.status == "done" and r.runs == 1 for r in rows)
    assert {r.id for r in rows if r.result == "one#1"} == set(one)


async def test_a_runner_killed_mid_task_is_recovered_and_its_row_finished_once(store: Store) -> None:
    import time

    row = await tasks.create_task(store, "t", "g", time.time())
    proc = _worker("hold", _url(store), "victim#1")
    assert proc.stdout is not None
    line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
    assert int(line) == row.id
    os.kill(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 10)
    assert (await tasks.get_task(store, row.id)).claimed_by == "victim#1"
    # The next poll past the heartbeat window finds it.
    later = time.time() + 61
    assert await tasks.recover(store, "rescuer#1", later, timeout=900, stale_after=60) == [row.id]
    again = await tasks.claim_due(store, "rescuer#1", later)
    assert again is not None and again.id == row.id
    assert await tasks.finish(store, row.id, "rescuer#1", later, status="done", result="rescued")
    assert not await tasks.finish(store, row.id, "victim#1", later, status="done", result="victim")
    done = await tasks.get_task(store, row.id)
    assert (done.status, done.result, done.runs) == ("done", "rescued", 2)
