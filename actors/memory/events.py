"""The memory event log: one row per thing memory did, for the owner's notebooks and API."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from actors.store import schema
from actors.store.store import Store


async def log_event(conn: AsyncConnection, event: str, item_id: int | None = None,
                    session_id: str | None = None, data: dict[str, Any] | None = None,
                    now: float | None = None) -> None:
    await conn.execute(sa.insert(schema.memory_events).values(
        ts=now or time.time(), event=event, item_id=item_id, session_id=session_id, data=data))


async def record_event(store: Store, event: str, item_id: int | None = None,
                       session_id: str | None = None, data: dict[str, Any] | None = None) -> None:
    async with store.engine.begin() as conn:
        await log_event(conn, event, item_id, session_id, data)


async def list_events(store: Store, event: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Memory events, newest first."""
    query = sa.select(schema.memory_events).order_by(schema.memory_events.c.id.desc()).limit(limit)
    if event:
        query = query.where(schema.memory_events.c.event == event)
    async with store.engine.connect() as conn:
        return [dict(r) for r in (await conn.execute(query)).mappings().all()]
