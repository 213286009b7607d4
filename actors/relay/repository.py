"""Relay sessions, logs and files in the store (SQLite or PostgreSQL, same code)."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from actors.relay.core import Plan
from actors.relay.messages import FileRecord
from actors.relay.envelope import drew_from_rate, epoch_of, is_urgent
from actors.relay.lifecycle import SessionState
from actors.relay.limits import RelayLimits
from actors.store import schema
from actors.store.store import Store

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


async def save_plan(store: Store, plan: Plan, file_path: str | None = None) -> None:
    """Store a plan's envelopes, file record and session row in one transaction."""
    values = _row_values(plan.state)
    uid = values.pop("uid")
    async with store.engine.begin() as conn:
        if plan.envelopes:
            await conn.execute(sa.insert(M), [
                {"uid": uid, "seq": e["seq"], "urgent": is_urgent(e),
                 "envelope": json.dumps(e, separators=(",", ":"), ensure_ascii=False)}
                for e in plan.envelopes])
        if plan.file is not None:
            await conn.execute(sa.delete(F).where(F.c.uid == uid, F.c.name == plan.file.name))
            await conn.execute(sa.insert(F).values(uid=uid, path=file_path or "", **plan.file.model_dump()))
        await conn.execute(sa.update(S).where(S.c.uid == uid).values(**values))


async def read_messages(store: Store, uid: str, since: int, limit: int,
                        urgent_only: bool = False) -> list[Envelope]:
    query = sa.select(M.c.envelope).where(M.c.uid == uid, M.c.seq > since)
    if urgent_only:
        query = query.where(M.c.urgent == sa.true())
    query = query.order_by(M.c.seq).limit(limit)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).scalars().all()
    return [json.loads(r) for r in rows]


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
