"""Memory items in the store: write with secret refusal and deduplication, read, select for
a prompt. The rules themselves live in the pure modules beside this one."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from actors.common.errors import IriisError
from actors.memory.dedup import Insert, decide_insert
from actors.memory.embed import Encoder
# list_events and the record keys are re-exported: callers read memory through this module.
from actors.memory.events import list_events, log_event  # noqa: F401
from actors.memory.model import MOOD_KV, PERSONA_KV, Kind, MindItem, Mood, Persona
from actors.memory.index import MemoryIndex
from actors.memory.live import active_items
from actors.memory.prompt import outside_items, render_memory_block
from actors.memory.secrets import looks_secret
from actors.memory.select import Found, select
from actors.memory.select import search as rank_search
from actors.memory.transfer import MemoryRecord, export_line
from actors.memory.vectors import similarities_for
from actors.store import schema
from actors.store.store import Store



class MemoryRefused(IriisError, ValueError):
    """The text looks like a secret; memory never stores those."""

    code = "memory_refused"


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
                   now: float | None = None, source: str = "owner",
                   provenance: str | None = None) -> tuple[MindItem, bool]:
    """Store an item, or reinforce a near-duplicate; returns (item, created). `provenance`
    names the untrusted sources it was learned from (None: the owner's own words)."""
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
                created=now, last_used=None, provenance=provenance).returning(schema.mind.c.id))).scalar_one()
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
    return (await memory_context(store, query, now, session_id, encoder))[0]


class MemoryChoice(NamedTuple):
    """What a prompt's memory block holds: the text, the ids learned from outside content (a
    turn whose prompt holds one has read untrusted content, `memory:<id>`), and every id used."""

    block: str
    outside: list[int]
    used: list[int]


class MemoryRead(NamedTuple):
    """What a prompt's memory block is chosen from: every active item, their index, and the
    mood and persona records."""

    items: list[MindItem]
    index: MemoryIndex
    records: dict[str, Any]


async def read_memory(store: Store, conn: AsyncConnection | None = None) -> MemoryRead:
    """The store reads behind a prompt's memory: the rows changed since this process last looked
    (`live`) and both records, on `conn` when the caller lends one."""
    async with store.reading(conn) as conn:
        items, index = await active_items(store, conn)
        records = dict((await conn.execute(
            sa.select(schema.kv.c.key, schema.kv.c.value).where(schema.kv.c.key.in_([MOOD_KV, PERSONA_KV]))
        )).all())
    return MemoryRead(items, index, records)


async def choose_memory(store: Store, query: str, now: float | None = None,
                        encoder: Encoder | None = None, read: MemoryRead | None = None) -> MemoryChoice:
    """The memory block for this query, with nothing written (see `mark_used`). `read`: the
    store's part, when the caller has already read it (`read_memory`)."""
    now = now or time.time()
    items, index, rows = read or await read_memory(store)
    if not items and not rows:
        return MemoryChoice("", [], [])
    # The paraphrase term, when a sentence encoder is available; None keeps it lexical.
    similarities = await similarities_for(store, items, query, encoder) if encoder is not None else None
    selection = select(items, query, now, similarities=similarities, index=index)
    block = render_memory_block(selection, Persona(**rows[PERSONA_KV]) if rows.get(PERSONA_KV) else None,
                                Mood(**rows[MOOD_KV]) if rows.get(MOOD_KV) else None, now)
    return MemoryChoice(block, [i.id for i in outside_items(selection)], list(selection.ids))


async def memory_context(store: Store, query: str, now: float | None = None,
                         session_id: str | None = None, encoder: Encoder | None = None) -> tuple[str, list[int]]:
    """The memory block and its ids learned from outside content; what it selected is marked
    used before this returns."""
    now = now or time.time()
    chosen = await choose_memory(store, query, now, encoder)
    if chosen.used:
        await mark_used(store, chosen.used, now, query, session_id)
    return chosen.block, chosen.outside


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


# -- search, import, export (issue 20) -----------------------------------------------------------

# The pool a prompt ranks (memory_block reads the same number), so a search score is a prompt score.
async def search(store: Store, query: str, limit: int = 20, kind: str | None = None,
                 now: float | None = None, encoder: Encoder | None = None,
                 embeddings: bool = True) -> list[Found]:
    """Active items about `query`, best first, with exactly the score the prompt gives them and
    its terms (`select.search`). The similarities are standardised over the whole pool, as the
    prompt's are, and `kind` filters only what is returned. `embeddings=False` stays lexical;
    otherwise `encoder` (or the process's own model) adds the paraphrase term when available."""
    now = now or time.time()
    items, index = await active_items(store)
    similarities = await similarities_for(store, items, query, encoder) if embeddings else None
    return rank_search(items, query, now, limit, kind, similarities, index)


async def iter_export(store: Store, batch: int = 1000) -> AsyncIterator[str]:
    """Every item (active or not), oldest id first, one JSON line each (`transfer.export_line`)."""
    after = 0
    while True:
        query = sa.select(schema.mind).where(schema.mind.c.id > after).order_by(schema.mind.c.id).limit(batch)
        async with store.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        if not rows:
            return
        for row in rows:
            yield export_line(MindItem(**row))
        after = rows[-1]["id"]


async def import_records(store: Store, records: list[MemoryRecord], now: float | None = None) -> tuple[int, int]:
    """Insert `records` in one transaction, each with its own times, uses and state; returns
    (inserted, skipped). An item whose kind and text already exist (in the store or earlier in
    the file) is skipped, so importing an export twice changes nothing."""
    now = now or time.time()
    async with store.engine.begin() as conn:
        existing = {(k, t) for k, t in (await conn.execute(sa.select(schema.mind.c.kind, schema.mind.c.text)))}
        rows = []
        for record in records:
            key = (record.kind, record.text)
            if key in existing:
                continue
            existing.add(key)
            rows.append({"kind": record.kind, "text": record.text, "importance": record.importance,
                         "uses": record.uses, "active": record.active,
                         "created": record.created if record.created is not None else now,
                         "last_used": record.last_used, "provenance": record.provenance})
        for start in range(0, len(rows), 500):
            await conn.execute(sa.insert(schema.mind), rows[start:start + 500])
        await log_event(conn, "import", None, data={"inserted": len(rows), "skipped": len(records) - len(rows)},
                        now=now)
    return len(rows), len(records) - len(rows)


async def remember_at(store: Store, record: MemoryRecord, source: str = "owner") -> tuple[MindItem, bool]:
    """`remember` for an item that carries its own history (created, last_used): a near-duplicate
    is reinforced and keeps the later of the two last-used times; a new item keeps its times."""
    if looks_secret(record.text):
        raise MemoryRefused("that looks like a password, key or PIN; memory does not keep secrets")
    now = time.time()
    created = record.created if record.created is not None else now
    existing = await list_items(store, kind=record.kind, active=True)
    decision = decide_insert(record.kind, record.text, record.importance, existing)
    async with store.engine.begin() as conn:
        if isinstance(decision, Insert):
            item_id = (await conn.execute(sa.insert(schema.mind).values(
                kind=record.kind, text=record.text, importance=record.importance, uses=record.uses,
                active=True, created=created, last_used=record.last_used).returning(schema.mind.c.id))).scalar_one()
            await log_event(conn, "insert", item_id, data={"source": source, "kind": record.kind,
                                                           "text": record.text}, now=now)
            created_new = True
        else:
            item_id = decision.item_id
            old = next(i for i in existing if i.id == item_id)
            used = max(t for t in (old.last_used, record.last_used, created) if t)
            await conn.execute(sa.update(schema.mind).where(schema.mind.c.id == item_id).values(
                importance=decision.new_importance, last_used=used))
            await log_event(conn, "reinforce", item_id, data={"source": source,
                                                              "importance": decision.new_importance}, now=now)
            created_new = False
    item = await get_item(store, item_id)
    assert item is not None
    return item, created_new
