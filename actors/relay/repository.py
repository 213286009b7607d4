"""Relay sessions, logs and files in the store (SQLite or PostgreSQL, same code)."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from actors.relay.core import Plan
from actors.relay.messages import FileRecord
from actors.relay.envelope import drew_from_rate, epoch_of, is_urgent
from actors.relay.lifecycle import SessionState
from actors.relay.limits import RelayLimits
from actors.store import schema
from actors.store.store import Store, tune_sqlite

S, M, F = schema.relay_sessions, schema.relay_messages, schema.relay_files
Envelope = dict[str, Any]


def _row_values(state: SessionState) -> dict[str, Any]:
    values = state.model_dump()
    values["limits"] = state.limits.model_dump()
    return values


def _state(row: Any) -> SessionState:
    values = dict(row)
    values.pop("created_by", None)
    values["warned"] = values.get("warned") or []
    values["limits"] = RelayLimits.model_validate(values["limits"])
    return SessionState(**values)


async def create_session(store: Store, state: SessionState, created_by: str | None = None) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(S).values(**_row_values(state), created_by=created_by))


async def creations_since(store: Store, client: str, since: float) -> list[float]:
    """When `client` created sessions from `since` on (purged ones included: the cap counts
    creations, not sessions that still exist)."""
    query = sa.select(S.c.created).where(S.c.created_by == client, S.c.created >= since)
    async with store.engine.connect() as conn:
        return list((await conn.execute(query)).scalars().all())


async def recent_writes(store: Store, uid: str, since: float, most: int) -> list[float]:
    """Times of the session's last `most` rate-counted writes at or after `since`, read back
    from the log so a restarted actor keeps the write rate."""
    # Newest first, with room for the relay's own notices (warnings, expiry) mixed in: those are
    # a handful per session, so twice the rate plus a few always reaches back a whole minute.
    query = sa.select(M.c.envelope).where(M.c.uid == uid).order_by(M.c.seq.desc()).limit(most * 2 + 10)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).scalars().all()
    stamps: list[float] = []
    for raw in rows:
        envelope = json.loads(raw)
        when = epoch_of(envelope["ts"])
        if when < since:
            break
        if drew_from_rate(envelope):
            stamps.append(when)
            if len(stamps) >= most:
                break
    return stamps


async def load_session(store: Store, uid: str) -> SessionState | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(S).where(S.c.uid == uid))).mappings().first()
    return _state(row) if row else None


async def live_sessions(store: Store) -> list[SessionState]:
    """Every session not yet purged, for the sweeper."""
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(S).where(S.c.purged == sa.false()))).mappings().all()
    return [_state(r) for r in rows]


# Built once: building and keying a statement per write cost more than the write itself.
_INSERT_MESSAGES = sa.insert(M)
_UPDATE_SESSION = sa.update(S).where(S.c.uid == sa.bindparam("session_uid")).values(
    {name: sa.bindparam(name, type_=S.c[name].type) for name in SessionState.model_fields if name != "uid"})


def write_plan(conn: sa.Connection, plan: Plan, file_path: str | None = None) -> None:
    """A plan's envelopes, file record and session row, inside the caller's transaction (a
    plain connection: `save_plan` runs it on the async engine, `PlanWriter` on SQLite's own)."""
    values = _row_values(plan.state)
    uid = values["session_uid"] = values.pop("uid")
    if plan.envelopes:
        conn.execute(_INSERT_MESSAGES, [
            {"uid": uid, "seq": e["seq"], "urgent": is_urgent(e), "post_token": plan.posted.get(e["seq"]),
             "envelope": json.dumps(e, separators=(",", ":"), ensure_ascii=False)}
            for e in plan.envelopes])
    if plan.file is not None:
        conn.execute(sa.delete(F).where(F.c.uid == uid, F.c.name == plan.file.name))
        conn.execute(sa.insert(F).values(uid=uid, path=file_path or "", **plan.file.model_dump()))
    conn.execute(_UPDATE_SESSION, values)


async def save_plan(store: Store, plan: Plan, file_path: str | None = None) -> None:
    """Store a plan's envelopes, file record and session row in one transaction."""
    async with store.engine.begin() as conn:
        await conn.run_sync(write_plan, plan, file_path)


class PlanWriter:
    """A session actor's writes, each plan in one transaction, acknowledged once committed.

    On SQLite the aiosqlite driver hands every statement, cursor and commit to its thread in
    turn: most of an append's time. Here a plain sqlite3 connection in one worker thread of the
    writer's own runs the whole transaction in one hop, with the store's own settings (WAL,
    busy timeout, the same `synchronous`), so a write is exactly as durable as before. Other
    databases (and an in-memory SQLite, which a second connection would not see) use the store.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine: sa.Engine | None = None
        self._thread: ThreadPoolExecutor | None = None
        url = store.engine.url
        if store.is_sqlite and url.database not in (None, "", ":memory:"):
            self._engine = sa.create_engine(url.set(drivername="sqlite"), connect_args={"timeout": 10})
            event.listen(self._engine, "connect", tune_sqlite)
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="relay-writer")

    def _write(self, plan: Plan, file_path: str | None) -> None:
        assert self._engine is not None
        with self._engine.begin() as conn:
            write_plan(conn, plan, file_path)

    async def write(self, plan: Plan, file_path: str | None = None) -> None:
        if self._engine is None:
            await save_plan(self.store, plan, file_path)
        else:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._write, plan, file_path)


async def read_messages(store: Store, uid: str, since: int, limit: int,
                        urgent_only: bool = False) -> list[Envelope]:
    query = sa.select(M.c.envelope).where(M.c.uid == uid, M.c.seq > since)
    if urgent_only:
        query = query.where(M.c.urgent == sa.true())
    query = query.order_by(M.c.seq).limit(limit)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).scalars().all()
    return [json.loads(r) for r in rows]


async def posted_envelopes(store: Store, uid: str, tokens: list[str]) -> dict[str, Envelope]:
    """The stored envelopes of those of `tokens` (posts) that are in the log already."""
    query = sa.select(M.c.post_token, M.c.envelope).where(M.c.uid == uid, M.c.post_token.in_(tokens))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {token: json.loads(envelope) for token, envelope in rows}


async def list_files(store: Store, uid: str) -> list[FileRecord]:
    query = sa.select(F).where(F.c.uid == uid).order_by(F.c.seq)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [FileRecord(**{k: r[k] for k in FileRecord.model_fields}) for r in rows]


async def get_file(store: Store, uid: str, name: str) -> tuple[FileRecord, str] | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(F).where(F.c.uid == uid, F.c.name == name))).mappings().first()
    if row is None:
        return None
    return FileRecord(**{k: row[k] for k in FileRecord.model_fields}), row["path"]


async def purge(store: Store, uid: str) -> list[str]:
    """Delete the log and the file records, keep a tombstone; returns the file paths to delete."""
    async with store.engine.begin() as conn:
        paths = (await conn.execute(sa.select(F.c.path).where(F.c.uid == uid))).scalars().all()
        await conn.execute(sa.delete(F).where(F.c.uid == uid))
        await conn.execute(sa.delete(M).where(M.c.uid == uid))
        await conn.execute(sa.update(S).where(S.c.uid == uid).values(
            purged=True, storage_bytes=0, message_count=0))
    return list(paths)
