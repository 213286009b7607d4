"""Every active memory item reaches the prompt, kept current with one small read per prompt
(actors/memory/live.py), on both backends: inserts, uses, edits, deactivation, deletion and rows
written behind its back all show on the next look."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from actors.memory import live
from actors.memory.repository import deactivate, delete_item, memory_context, remember, search
from actors.memory.select import select
from actors.store import schema
from actors.store.store import Store


@pytest.fixture(autouse=True)
def _fresh_pools() -> Iterator[None]:
    live.reset()
    yield
    live.reset()


def _picked(store_items, index, query: str) -> list[str]:
    chosen = select(store_items, query, time.time(), index=index)
    return [i.text for i in chosen.memories + chosen.people]


async def _bulk(store: Store, n: int, now: float) -> None:
    rows = [{"kind": "fact", "text": f"filler note number {i} about errands", "importance": 3.0, "uses": 0,
             "active": True, "created": now - 86400 * 30 + i, "last_used": None} for i in range(n)]
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(schema.mind), rows)


async def test_every_active_item_is_ranked_not_only_the_newest_few_thousand(store: Store) -> None:
    now = time.time()
    old, _ = await remember(store, "person", "The owner's dentist is Dr Okafor on Belmont Street",
                            now=now - 86400 * 60)
    await _bulk(store, 6000, now)
    block, _ = await memory_context(store, "Who is my dentist on Belmont Street?", now=now)
    assert "Dr Okafor" in block
    items, index = await live.active_items(store)
    assert len([i for i, on in zip(items, index.active) if on]) == 6001
    assert old.id in index.row_of


async def test_changes_show_on_the_next_look(store: Store) -> None:
    now = time.time()
    a, _ = await remember(store, "fact", "The owner plays the cello on Sundays", now=now)
    b, _ = await remember(store, "fact", "The owner's bike is a green Dutch bicycle", now=now)
    items, index = await live.active_items(store)
    assert {a.id, b.id} <= set(index.row_of)

    # A new item, through the repository.
    c, _ = await remember(store, "fact", "The owner's cat is called Miso", now=now)
    items, index = await live.active_items(store)
    assert "The owner's cat is called Miso" in _picked(items, index, "what is my cat called")

    # Uses bump last_used: the index's recency column follows.
    await memory_context(store, "cello Sundays", now=now + 3600)
    items, index = await live.active_items(store)
    assert index.stamp[index.row_of[a.id]] == pytest.approx(now + 3600)
    assert index.items[index.row_of[a.id]].uses == 1

    # An edit of the text (as consolidation writes it, through SQLAlchemy Core): the old words
    # no longer find it, the new ones do.
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.mind).where(schema.mind.c.id == b.id).values(
            text="The owner's bike is a red racing bicycle"))
    items, index = await live.active_items(store)
    assert "The owner's bike is a red racing bicycle" in _picked(items, index, "red racing bike")
    assert index.items[index.row_of[b.id]].text.endswith("red racing bicycle")
    hits = await search(store, "green Dutch", embeddings=False)
    assert [h.item.id for h in hits] == []

    # Deactivated: never selected again.
    assert await deactivate(store, c.id)
    items, index = await live.active_items(store)
    assert "The owner's cat is called Miso" not in _picked(items, index, "what is my cat called")
    assert [h.item.id for h in await search(store, "cat Miso", embeddings=False)] == []


async def test_rows_deleted_or_written_without_a_stamp_force_a_fresh_read(store: Store) -> None:
    now = time.time()
    a, _ = await remember(store, "fact", "The owner's locker code changes every March", now=now)
    await live.active_items(store)
    assert await delete_item(store, a.id)
    _, index = await live.active_items(store)
    assert a.id not in index.row_of

    # Another writer that knows nothing of `changed` (raw SQL): the count gives it away.
    async with store.engine.begin() as conn:
        await conn.execute(sa.text(
            "INSERT INTO mind (kind, text, importance, uses, active, created) "
            "VALUES ('fact', 'The owner grows tomatoes on the balcony', 5, 0, true, :now)"), {"now": now})
    items, index = await live.active_items(store)
    assert "The owner grows tomatoes on the balcony" in _picked(items, index, "tomatoes balcony")


async def test_a_patched_index_scores_as_a_fresh_build(store: Store) -> None:
    now = time.time()
    for i in range(40):
        await remember(store, "fact", f"Fact {i}: the owner likes item{i} and colour{i % 5}", now=now - i * 60)
    await live.active_items(store)
    await memory_context(store, "colour3 item7", now=now + 10)
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.mind).where(schema.mind.c.id == 5).values(
            text="Fact 5: the owner now likes colour9 and nothing else", importance=9.0))
    for i in (3, 11):
        await deactivate(store, i)
    items, patched = await live.active_items(store)
    live.reset()
    fresh_items, fresh = await live.active_items(store)
    for query in ("colour9", "colour3 item7", "the owner likes"):
        assert _picked(items, patched, query) == _picked(fresh_items, fresh, query)
