"""The `tasks` table: background tasks and one-off reminders, without Ray.

What is due lives here, never in a runner's memory, so two servers on one PostgreSQL (or a
scheduler restarted mid-run) neither run a row twice nor lose one:

- `claim_due` takes one due row atomically: on PostgreSQL `UPDATE ... WHERE id = (SELECT ... FOR
  UPDATE SKIP LOCKED) RETURNING`, on SQLite `BEGIN IMMEDIATE` then `UPDATE ... RETURNING`.
- `finish` is fenced (`WHERE status='running' AND claimed_by=:me`): a row rescued from a runner
  that was presumed dead, or cancelled meanwhile, is never finished by that runner.
- `recover` puts back rows left `running` by a dead runner: one whose heartbeat went stale, an
  earlier incarnation of the same runner, or any claim older than the run timeout.

Every function takes `now` (epoch seconds) from the caller, so tests run on an injected clock.
Times and repeats in words ("tomorrow at 9", "every weekday at 8") are read in `when`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlalchemy as sa
from croniter import croniter
from pydantic import BaseModel

from actors.common.errors import IriisError
from actors.common.when import UNITS, duration, natural_cron, normalise
from actors.common.when import local_time as local_time  # re-exported: callers use tasks.local_time
from actors.common.when import parse_when as parse_when  # re-exported: callers use tasks.parse_when
from actors.store import schema
from actors.store.models import OutboxItem, new_id
from actors.store.store import Store

Status = Literal["scheduled", "running", "done", "failed", "cancelled"]
Kind = Literal["task", "reminder"]
OPEN: tuple[str, ...] = ("scheduled", "running")
FINAL: tuple[str, ...] = ("done", "failed", "cancelled")
# A repeat shorter than this is refused: a task is a model session, not a busy loop.
MIN_INTERVAL_SECONDS = 60.0
# A runner's heartbeat key in kv; its value is {"seen": epoch seconds}.
HEARTBEAT_PREFIX = "scheduler.runner."
# Heartbeats of runners gone this long are deleted.
HEARTBEAT_FORGET_SECONDS = 86_400.0

T = schema.tasks


class InvalidRepeat(IriisError, ValueError):
    """`repeat` is neither a cron expression nor an interval of a minute or more."""

    code = "invalid_repeat"


class Task(BaseModel):
    id: int
    kind: Kind = "task"
    title: str
    goal: str
    repeat: str | None = None
    status: Status
    next_run: float | None = None
    runs: int = 0
    notes: str = ""
    result: str | None = None
    error: str | None = None
    conversation_id: str | None = None
    claimed_by: str | None = None
    claimed_at: float | None = None
    created: float
    updated: float


# -- repeat schedules ------------------------------------------------------------------------

_INTERVAL = re.compile(r"^(?:every\s+)?(\d+(?:\.\d+)?)\s*([a-z]+)?$")
_WORDS = {"hourly": 3600, "daily": 86_400, "weekly": 604_800}


def owner_timezone(env: dict[str, str] | None = None) -> ZoneInfo:
    """IRIIS_TIMEZONE (UTC when unset or unknown): cron expressions are read in the owner's time."""
    name = (env if env is not None else os.environ).get("IRIIS_TIMEZONE", "").strip() or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


@dataclass(frozen=True)
class Repeat:
    """A parsed `repeat`: every `seconds`, or a cron expression."""

    text: str
    seconds: float | None = None
    cron: str | None = None

    def next_after(self, after: float, tz: ZoneInfo | None = None) -> float:
        if self.seconds is not None:
            return after + self.seconds
        start = datetime.fromtimestamp(after, tz or ZoneInfo("UTC"))
        return float(croniter(self.cron, start).get_next(float))


_REPEAT_FORMS = ("give an interval ('every 30 minutes', 'hourly'), days and a time ('every day at 7:30', "
                 "'every weekday at 8', 'every Monday at 9', 'weekly on Friday at 17:00') "
                 "or a cron expression ('0 9 * * 1-5')")


def parse_repeat(text: str) -> Repeat:
    """`"every 30m"`, `"2 hours"`, `"daily"`, `"900"` (seconds), a cron expression (`"0 9 * * 1-5"`,
    `"@daily"`), or days and a time in words (`"every weekday at 8"`, `"weekly on Friday at 17:00"`),
    kept as the cron they mean so a stored row never depends on how words are read. Raises
    InvalidRepeat, saying which forms work."""
    raw = " ".join(text.strip().split())
    lowered = raw.lower()
    if not lowered:
        raise InvalidRepeat(f"repeat is empty; {_REPEAT_FORMS}")
    seconds: float | None = None
    if lowered in _WORDS or lowered.removeprefix("every ") in ("hour", "day", "week"):
        seconds = _WORDS.get(lowered) or UNITS[lowered.removeprefix("every ")]
    else:
        match = _INTERVAL.match(lowered)
        if match and match.group(1) is not None and (match.group(2) is None or match.group(2) in UNITS):
            seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
        else:  # in words: "every five minutes", "every half an hour", "every 1h30m"
            seconds = duration(normalise(lowered).removeprefix("every "))
    if seconds is not None:
        if seconds < MIN_INTERVAL_SECONDS:
            raise InvalidRepeat(f"repeat {raw!r} is shorter than a minute; give 'every 1m' or longer")
        return Repeat(text=raw, seconds=seconds)
    if croniter.is_valid(raw):
        return Repeat(text=raw, cron=raw)
    cron = natural_cron(raw)
    if cron is not None and croniter.is_valid(cron):
        return Repeat(text=cron, cron=cron)
    raise InvalidRepeat(f"repeat {raw!r} is not a schedule I can read; {_REPEAT_FORMS}")


def next_run_after(repeat: str, after: float, tz: ZoneInfo | None = None) -> float:
    """When a task repeating on `repeat` is next due after `after`. Raises InvalidRepeat."""
    return parse_repeat(repeat).next_after(after, tz)


# -- rows --------------------------------------------------------------------------------------

def _task(row: Any) -> Task:
    return Task.model_validate(dict(row))


async def create_task(store: Store, title: str, goal: str, now: float, run_at: float | None = None,
                      repeat: str | None = None, kind: Kind = "task", tz: ZoneInfo | None = None) -> Task:
    """A new scheduled row, due at `run_at` (or at the first repeat after now, or now).
    Its conversation id is chosen here, so the owner can find the conversation from the start.
    Raises InvalidRepeat."""
    schedule = parse_repeat(repeat) if repeat else None
    due = run_at if run_at is not None else (schedule.next_after(now, tz) if schedule and schedule.cron else now)
    values = {"kind": kind, "title": title.strip(), "goal": goal.strip(), "repeat": schedule.text if schedule else None,
              "status": "scheduled", "next_run": due, "runs": 0, "notes": "",
              "conversation_id": new_id() if kind == "task" else None, "created": now, "updated": now}
    async with store.engine.begin() as conn:
        row = (await conn.execute(sa.insert(T).values(**values).returning(*T.c))).mappings().one()
    return _task(row)


async def get_task(store: Store, task_id: int) -> Task | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(T).where(T.c.id == task_id))).mappings().first()
    return _task(row) if row else None


async def list_tasks(store: Store, status: str | None = None, kind: str | None = None,
                     limit: int = 100) -> list[Task]:
    """Newest first."""
    query = sa.select(T).order_by(T.c.id.desc()).limit(limit)
    if status:
        query = query.where(T.c.status == status)
    if kind:
        query = query.where(T.c.kind == kind)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [_task(r) for r in rows]


async def upcoming(store: Store, limit: int = 10) -> list[Task]:
    """Open rows by when they are due: what the scheduler shows as its next wakes."""
    query = (sa.select(T).where(T.c.status.in_(OPEN)).order_by(T.c.next_run.asc(), T.c.id.asc()).limit(limit))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [_task(r) for r in rows]


async def cancel_task(store: Store, task_id: int, now: float) -> Task | None:
    """Cancel a scheduled or running row (a running one's runner stops at its next step and
    its fenced finish then writes nothing). A finished row is returned unchanged; None if
    there is no such row."""
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(T).where(T.c.id == task_id, T.c.status.in_(OPEN))
                           .values(status="cancelled", claimed_by=None, updated=now))
        row = (await conn.execute(sa.select(T).where(T.c.id == task_id))).mappings().first()
    return _task(row) if row else None


async def is_open(store: Store, task_id: int, runner: str) -> bool:
    """Whether `runner` still holds this row (not cancelled, not rescued by another)."""
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(T.c.status, T.c.claimed_by).where(T.c.id == task_id))).first()
    return row is not None and row.status == "running" and row.claimed_by == runner


# -- claiming and finishing --------------------------------------------------------------------

def _claim_statement(store: Store, runner: str, now: float) -> Any:
    due = (sa.select(T.c.id).where(T.c.status == "scheduled", T.c.next_run <= now)
           .order_by(T.c.next_run.asc(), T.c.id.asc()).limit(1))
    if not store.is_sqlite:
        # Two runners asking at once each get a different row; neither waits for the other.
        due = due.with_for_update(skip_locked=True)
    return (sa.update(T).where(T.c.id == due.scalar_subquery(), T.c.status == "scheduled")
            .values(status="running", claimed_by=runner, claimed_at=now, runs=T.c.runs + 1, updated=now)
            .returning(*T.c))


async def claim_due(store: Store, runner: str, now: float) -> Task | None:
    """Take the row due first (its `runs` counts this session), or None if nothing is due."""
    statement = _claim_statement(store, runner, now)
    async with store.engine.connect() as conn:
        if store.is_sqlite:
            # The write lock first, so a second process waits (busy timeout) instead of reading
            # a row it would then fail to take.
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            await conn.begin()
        row = (await conn.execute(statement)).mappings().first()
        await conn.commit()
    return _task(row) if row else None


async def finish(store: Store, task_id: int, runner: str, now: float, *, status: Status,
                 result: str | None = None, notes: str | None = None, error: str | None = None,
                 next_run: float | None = None, runs: int | None = None, notice: OutboxItem | None = None) -> bool:
    """Write a session's outcome, only while `runner` still holds the row. `status` is the
    row's next state: "scheduled" (with `next_run`) for another session or the next repeat.
    `notice` (the owner's notification of it) goes into the outbox in the same transaction: a
    reader who sees the outcome sees its notice, and a crash between the two cannot lose it.
    False when the claim is no longer this runner's (rescued, cancelled): nothing was written."""
    values: dict[str, Any] = {"status": status, "updated": now, "claimed_by": None, "claimed_at": None}
    for key, value in (("result", result), ("notes", notes), ("error", error), ("next_run", next_run),
                       ("runs", runs)):
        if value is not None:
            values[key] = value
    async with store.engine.begin() as conn:
        done = await conn.execute(sa.update(T).where(T.c.id == task_id, T.c.status == "running",
                                                     T.c.claimed_by == runner).values(**values))
        if done.rowcount == 1 and notice is not None:
            await conn.execute(sa.insert(schema.outbox).values(**notice.model_dump(exclude={"id"})))
    return done.rowcount == 1


# -- runners' heartbeats and recovery ------------------------------------------------------------

async def beat(store: Store, runner: str, now: float) -> None:
    """Say `runner` is alive (every poll)."""
    stmt = store.upsert(schema.kv).values(key=HEARTBEAT_PREFIX + runner, value={"seen": now}, updated=now)
    stmt = stmt.on_conflict_do_update(index_elements=["key"],
                                      set_={"value": stmt.excluded.value, "updated": stmt.excluded.updated})
    async with store.engine.begin() as conn:
        await conn.execute(stmt)


async def heartbeats(store: Store) -> dict[str, float]:
    """Every runner's last heartbeat, by runner id."""
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(schema.kv.c.key, schema.kv.c.updated)
                                   .where(schema.kv.c.key.startswith(HEARTBEAT_PREFIX)))).all()
    return {r.key[len(HEARTBEAT_PREFIX):]: float(r.updated) for r in rows}


def runner_home(runner: str) -> str:
    """A runner id is `<home>#<incarnation>`: one home (a scheduler actor) restarted gets a
    new incarnation, and its earlier ones are dead by construction."""
    return runner.rpartition("#")[0] or runner


def new_runner_id(home: str) -> str:
    return f"{home}#{os.urandom(4).hex()}"


async def recover(store: Store, me: str, now: float, timeout: float, stale_after: float) -> list[int]:
    """Put rows left `running` by a dead runner back to `scheduled`, due now; returns their ids.
    Dead: an earlier incarnation of `me`'s home, a runner whose heartbeat is older than
    `stale_after` (or missing), or any claim older than `timeout` (a run past its limit)."""
    seen = await heartbeats(store)
    async with store.engine.begin() as conn:
        rows = (await conn.execute(sa.select(T.c.id, T.c.claimed_by, T.c.claimed_at)
                                   .where(T.c.status == "running"))).all()
        dead = [r.id for r in rows if r.claimed_by != me and (
            runner_home(r.claimed_by or "") == runner_home(me)
            or now - seen.get(r.claimed_by or "", float("-inf")) > stale_after
            or now - (r.claimed_at or 0.0) > timeout)]
        # Our own claims past the timeout too: the run that holds them has been stopped.
        dead += [r.id for r in rows if r.claimed_by == me and now - (r.claimed_at or 0.0) > timeout]
        if dead:
            # Fenced on the claim we judged dead, so a row finished meanwhile stays finished.
            for r in rows:
                if r.id in dead:
                    await conn.execute(sa.update(T).where(T.c.id == r.id, T.c.status == "running",
                                                          T.c.claimed_by == r.claimed_by)
                                       .values(status="scheduled", claimed_by=None, claimed_at=None,
                                               next_run=now, updated=now))
        forgotten = [HEARTBEAT_PREFIX + r for r, at in seen.items() if now - at > HEARTBEAT_FORGET_SECONDS]
        if forgotten:
            await conn.execute(sa.delete(schema.kv).where(schema.kv.c.key.in_(forgotten)))
    return sorted(dead)


async def release(store: Store, runner: str, now: float) -> list[int]:
    """Hand back the rows `runner` holds (a clean stop): due again now, for the next runner."""
    async with store.engine.begin() as conn:
        rows = (await conn.execute(
            sa.update(T).where(T.c.status == "running", T.c.claimed_by == runner)
            .values(status="scheduled", claimed_by=None, claimed_at=None, next_run=now, updated=now)
            .returning(T.c.id))).scalars().all()
    return sorted(rows)
