"""A turn's set-up reads the store on one connection.

A conversation's process keeps a single pooled connection (`actors/session/actor.py`); a turn
whose reads ran at once took a second one, which on PostgreSQL meant opening and closing a
connection on every turn (18 ms of a 63 ms overhead in benchmarks/chat_overhead.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from actors.memory.repository import remember
from actors.session import turns
from actors.session.core import SessionCore
from actors.session.turnlog import TurnLog
from actors.store.store import Store


async def test_a_turns_reads_take_one_connection_and_still_find_the_owners_memory(store: Store) -> None:
    await remember(store, "fact", "The owner's sister is called Ana")
    out = {"now": 0, "most": 0}

    def checkout(*_: Any) -> None:
        out["now"] += 1
        out["most"] = max(out["most"], out["now"])

    def checkin(*_: Any) -> None:
        out["now"] -= 1

    event.listen(store.engine.sync_engine.pool, "checkout", checkout)
    event.listen(store.engine.sync_engine.pool, "checkin", checkin)

    async def no_encoder() -> None:
        return None

    core = SessionCore("setup-1")
    core.create()
    core.add("user", "what is my sister called?")
    later: list[Any] = []
    try:
        request, person = await turns.prepare(store, core, TurnLog("t1"), "what is my sister called?", True,
                                              no_encoder, later=later.append)
    finally:
        event.remove(store.engine.sync_engine.pool, "checkout", checkout)
        event.remove(store.engine.sync_engine.pool, "checkin", checkin)
    for marking in later:
        await marking
    assert "Ana" in str(request.messages[0].content)
    assert out["most"] == 1 and out["now"] == 0
