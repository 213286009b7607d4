"""Memory items in the store: write with secret refusal and deduplication, read, select for
a prompt. The rules themselves live in the pure modules beside this one."""

from __future__ import annotations

import time

import sqlalchemy as sa

from actors.memory.dedup import Insert, decide_insert
from actors.memory.embed import Encoder
# list_events and the record keys are re-exported: callers read memory through this module.
from actors.memory.events import list_events, log_event  # noqa: F401
from actors.memory.model import MOOD_KV, PERSONA_KV, Kind, MindItem, Mood, Persona
from actors.memory.prompt import render_memory_block
from actors.memory.secrets import looks_secret
from actors.memory.select import select
from actors.memory.vectors import similarities_for
from actors.store import schema
from actors.store.store import Store



class MemoryRefused(ValueError):
    """The text looks like a secret; memory never stores those."""


async def list_items(store: Store, kind: str | None = None, active: bool | None = None,
                     search: str | None = None, limit: int = 500) -> list[MindItem]:
    query = sa.select(schema.mind).order_by(schema.mind.c.id.desc()).limit(limit)
    if kind:
        query = query.where(schema.mind.c.kind == kind)
    if active is not None:
        query = query.where(schema.mind.c.active == active)
    if search:
        query = query.where(schema.mind.c.text.ilike(f"%{search}%"))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [MindItem(**r) for r in rows]


async def get_item(store: Store, item_id: int) -> MindItem | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(schema.mind).where(schema.mind.c.id == item_id))).mappings().first()
    return MindItem(**row) if row else None


async def delete_item(store: Store, item_id: int) -> bool:
    async with store.engine.begin() as conn:
        result = await conn.execute(sa.delete(schema.mind).where(schema.mind.c.id == item_id))
    return result.rowcount > 0


async def remember(store: Store, kind: Kind, text: str, importance: float = 5.0,
                   now: float | None = None, source: str = "owner") -> tuple[MindItem, bool]:
    """Store an item, or reinforce a near-duplicate; returns (item, created)."""
    text = text.strip()
    if looks_secret(text):
        raise MemoryRefused("that looks like a password, key or PIN; memory does not keep secrets")
    now = now or time.time()
    existing = await list_items(store, kind=kind, active=True)
    decision = decide_insert(kind, text, importance, existing)
    async with store.engine.begin() as conn:
        if isinstance(decision, Insert):
            new_id = (await conn.execute(sa.insert(schema.mind).values(
                kind=kind, text=text, importance=max(1.0, min(10.0, importance)), uses=0, active=True,
                created=now, last_used=None).returning(schema.mind.c.id))).scalar_one()
            created = True
            item_id = new_id
            event = {"source": source, "kind": kind, "text": text}
        else:
            item_id = decision.item_id
            await conn.execute(sa.update(schema.mind).where(schema.mind.c.id == item_id).values(
                importance=decision.new_importance, last_used=now))
            created = False
            event = {"source": source, "importance": decision.new_importance}
        await log_event(conn, "insert" if created else "reinforce", item_id, data=event, now=now)
    item = await get_item(store, item_id)
    assert item is not None
    return item, created


async def memory_block(store: Store, query: str, now: float | None = None,
                       session_id: str | None = None, encoder: Encoder | None = None) -> str:
    """The memory part of the system prompt for this query; marks what it selected as used."""
    now = now or time.time()
    # One read for the items and one for both records: this runs before every model call.
    items = await list_items(store, active=True, limit=5000)
    async with store.engine.connect() as conn:
        rows = dict((await conn.execute(
            sa.select(schema.kv.c.key, schema.kv.c.value).where(schema.kv.c.key.in_([MOOD_KV, PERSONA_KV]))
        )).all())
    if not items and not rows:
        return ""
    # The paraphrase term, when a sentence encoder is available; None keeps it lexical.
    similarities = await similarities_for(store, items, query, encoder) if encoder is not None else None
    selection = select(items, query, now, similarities=similarities)
    block = render_memory_block(selection, Persona(**rows[PERSONA_KV]) if rows.get(PERSONA_KV) else None,
                                Mood(**rows[MOOD_KV]) if rows.get(MOOD_KV) else None, now)
    if selection.ids:
        await mark_used(store, selection.ids, now, query, session_id)
    return block


async def mark_used(store: Store, ids: list[int], now: float, query: str = "",
                    session_id: str | None = None) -> None:
    """Bump uses and last_used, and log what this prompt selected (the notebooks read it)."""
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.mind).where(schema.mind.c.id.in_(ids)).values(
            uses=schema.mind.c.uses + 1, last_used=now))
        await log_event(conn, "selection", None, session_id, {"ids": ids, "query": query[:200]}, now)


async def deactivate(store: Store, item_id: int) -> bool:
    """Retire an item: kept for the record, never selected or recalled again."""
    async with store.engine.begin() as conn:
        result = await conn.execute(sa.update(schema.mind).where(schema.mind.c.id == item_id).values(active=False))
    return result.rowcount > 0
