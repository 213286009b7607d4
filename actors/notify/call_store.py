"""The `calls` table. Every status change is fenced on the status it expects (`UPDATE ... WHERE
status IN (...)`), so the watcher and an answer arriving at the same moment cannot both win."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from actors.notify.calls import Call
from actors.store import schema
from actors.store.store import Store

C = schema.calls


def call_conversation(call_id: int) -> str:
    """The conversation a call is voiced in, and where its "Missed call" line goes."""
    return f"call-{call_id}"


async def create_call(store: Store, at: float, reason: str, now: float, *, opening: str | None = None,
                      repeat: str | None = None, source: str = "user") -> Call:
    async with store.engine.begin() as conn:
        call_id = (await conn.execute(sa.insert(C).values(
            at=at, reason=reason, opening=opening or None, status="scheduled", repeat=repeat or None, source=source,
            created=now, rings=0, updated=now).returning(C.c.id))).scalar_one()
        await conn.execute(sa.update(C).where(C.c.id == call_id).values(conversation_id=call_conversation(call_id)))
        row = (await conn.execute(sa.select(C).where(C.c.id == call_id))).mappings().one()
    return Call(**row)


async def get_call(store: Store, call_id: int) -> Call | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(C).where(C.c.id == call_id))).mappings().first()
    return Call(**row) if row else None


async def list_calls(store: Store, status: str | None = None, limit: int = 100) -> list[Call]:
    query = sa.select(C).order_by(C.c.at.desc(), C.c.id.desc()).limit(limit)
    if status:
        query = query.where(C.c.status == status)
    async with store.engine.connect() as conn:
        return [Call(**r) for r in (await conn.execute(query)).mappings().all()]


async def live_calls(store: Store, now: float) -> list[Call]:
    """Calls the watcher may have something to do for: due, ringing, or a missed user alarm
    that may ring again."""
    query = sa.select(C).where(sa.or_(
        sa.and_(C.c.status == "scheduled", C.c.at <= now),
        C.c.status == "ringing",
        sa.and_(C.c.status == "missed", C.c.source == "user", C.c.answered.is_(None)),
    )).order_by(C.c.at, C.c.id)
    async with store.engine.connect() as conn:
        return [Call(**r) for r in (await conn.execute(query)).mappings().all()]


async def next_wake(store: Store) -> float | None:
    """The earliest `at` of a scheduled call (the watcher may sleep until then)."""
    async with store.engine.connect() as conn:
        return (await conn.execute(sa.select(sa.func.min(C.c.at)).where(C.c.status == "scheduled"))).scalar_one_or_none()


async def move(store: Store, call_id: int, expect: tuple[str, ...], now: float, *, fence_rings: int | None = None,
               **values: Any) -> Call | None:
    """Set `values` if the call is still in one of the `expect` statuses (and has rung
    `fence_rings` times, when given); the updated call, or None when someone moved it first."""
    cond = [C.c.id == call_id, C.c.status.in_(expect)]
    if fence_rings is not None:
        cond.append(C.c.rings == fence_rings)
    async with store.engine.begin() as conn:
        changed = (await conn.execute(sa.update(C).where(*cond).values(updated=now, **values))).rowcount
        if not changed:
            return None
        row = (await conn.execute(sa.select(C).where(C.c.id == call_id))).mappings().one()
    return Call(**row)
