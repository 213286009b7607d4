"""Memory items in the store, on both backends: refusal, dedup, selection into the prompt."""

from __future__ import annotations

import pytest

from actors.memory import repository as memory
from actors.store.store import Store


async def test_remember_inserts_then_reinforces_a_near_duplicate(store: Store) -> None:
    first, created = await memory.remember(store, "fact", "The owner drinks green tea every morning", 5, now=1000.0)
    assert created and first.importance == 5
    again, created = await memory.remember(store, "fact", "The owner drinks green tea every morning!", 4, now=2000.0)
    assert not created and again.id == first.id and again.importance == 6 and again.last_used == 2000.0
    other, created = await memory.remember(store, "fact", "The owner's bike is blue", 3)
    assert created and other.id != first.id
    assert len(await memory.list_items(store, kind="fact", active=True)) == 2


async def test_secrets_are_refused_at_write_time(store: Store) -> None:
    with pytest.raises(memory.MemoryRefused):
        await memory.remember(store, "fact", "my bank password is hunter2", 5)
    assert await memory.list_items(store) == []


async def test_the_prompt_block_carries_matching_items_and_marks_them_used(store: Store) -> None:
    tea, _ = await memory.remember(store, "fact", "The owner likes oolong tea", 5, now=1000.0)
    await memory.remember(store, "person", "Anna is the owner's sister", 5, now=1000.0)
    block = await memory.memory_block(store, "which tea should I buy?", now=5000.0)
    assert "The owner likes oolong tea" in block and f"#{tea.id}" in block
    used = await memory.get_item(store, tea.id)
    assert used is not None and used.uses == 1 and used.last_used == 5000.0


async def test_list_filters_and_delete(store: Store) -> None:
    a, _ = await memory.remember(store, "lesson", "Ask before booking flights", 5)
    await memory.remember(store, "fact", "The owner lives in Lyon", 5)
    assert [i.id for i in await memory.list_items(store, kind="lesson")] == [a.id]
    assert [i.text for i in await memory.list_items(store, search="lyon")] == ["The owner lives in Lyon"]
    assert await memory.delete_item(store, a.id) and not await memory.delete_item(store, a.id)
    assert await memory.get_item(store, a.id) is None
