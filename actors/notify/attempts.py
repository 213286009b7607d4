"""One row per delivery attempt on one channel, for an outbox row or a call: what was tried,
when, and how it went."""

from __future__ import annotations

import sqlalchemy as sa
from pydantic import BaseModel

from actors.store import schema
from actors.store.store import Store

A = schema.notify_attempts


class Attempt(BaseModel):
    id: int | None = None
    ts: float
    outbox_id: int | None = None
    call_id: int | None = None
    channel: str
    target: str | None = None
    ok: bool
    status_code: int | None = None
    error: str | None = None


async def record(store: Store, attempts: list[Attempt]) -> None:
    if not attempts:
        return
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(A), [a.model_dump(exclude={"id"}) for a in attempts])


async def list_attempts(store: Store, outbox_id: int | None = None, call_id: int | None = None,
                        limit: int = 200) -> list[Attempt]:
    query = sa.select(A).order_by(A.c.id).limit(limit)
    if outbox_id is not None:
        query = query.where(A.c.outbox_id == outbox_id)
    if call_id is not None:
        query = query.where(A.c.call_id == call_id)
    async with store.engine.connect() as conn:
        return [Attempt(**r) for r in (await conn.execute(query)).mappings().all()]

