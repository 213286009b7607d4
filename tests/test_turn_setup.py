"""A turn's start: its set-up reads the store on one connection, and its first write waits
(briefly) for the AgentLoop call to be on its way.

A conversation's process keeps a single pooled connection (`actors/session/actor.py`); a turn
whose reads ran at once took a second one, which on PostgreSQL meant opening and closing a
connection on every turn (18 ms of a 63 ms overhead in benchmarks/chat_overhead.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import event

from actors.memory.repository import remember
from actors.session import turns
from actors.session.ports import sent_or_later
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


class FakeStream:
    """A Serve streaming response whose request reaches a replica when `assigned` resolves."""

    def __init__(self, fail: bool = False) -> None:
        self.assigned: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.fail = fail

    async def _to_object_ref_gen(self) -> None:
        if self.fail:
            raise RuntimeError("no such replica")
        await self.assigned


async def test_the_first_write_waits_for_the_request_to_reach_a_replica_and_no_longer() -> None:
    stream = FakeStream()
    waiting = asyncio.ensure_future(sent_or_later(stream, 5.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    stream.assigned.set_result(None)
    await asyncio.wait_for(waiting, 1.0)

    # Never assigned (queues full): the write goes ahead at the bound, and the request is not
    # cancelled by the wait giving up.
    stuck = FakeStream()
    await asyncio.wait_for(sent_or_later(stuck, 0.02), 1.0)
    assert not stuck.assigned.cancelled()

    # A handle that cannot say, or a call that failed: no wait, nothing raised here.
    await asyncio.wait_for(sent_or_later(object(), 5.0), 1.0)
    await asyncio.wait_for(sent_or_later(FakeStream(fail=True), 5.0), 1.0)
