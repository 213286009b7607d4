"""The session pool: a warm spare adopts a new conversation, the registry hands every caller
the same actor, a crash restarts it in place as the same conversation, and an idle exit is
followed by a fresh actor rebuilt from the store. Real Ray, real SQLite store."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
import ray

from actors.common.names import SESSIONS, find_actor_async, live_actors_async
from actors.session.actor import SessionConfig, live_sessions_async
from actors.session.pool import SLOT, find_session, registry, session_handle
from actors.store.migrate import migrate
from actors.store.store import Store

# A spare's process start and warm-up: seconds on a quiet machine, over a minute beside two CPU
# hogs (a loaded clean-clone run waited 60 s for one and failed).
SPARE_WAIT = 180

pytestmark = pytest.mark.ray


async def until(call, check, timeout: float = 30.0, errors: tuple[type[BaseException], ...] = ()):
    """Await `call()` until `check` holds on its answer (calls that raise `errors` are retried)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            value = await call()
            if check(value):
                return value
        except errors:
            pass
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.2)


@pytest.fixture
async def config(ray_session: None, tmp_path: Path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'pool.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    await store.close()
    cfg = SessionConfig(database_url=url, idle_seconds=2.0, spares=1)
    yield cfg
    from actors.session import pool

    if pool._registry is not None:
        ray.kill(pool._registry, no_restart=True)
        pool._registry = None

    async def leftovers() -> dict:
        # Every slot actor: conversations, spares, one still warming up.
        found = await live_actors_async(SLOT)
        for handle in found.values():
            ray.kill(handle, no_restart=True)
        return found

    # ray.kill returns at once, and the next test's registry would adopt the slot actors it finds
    # alive, or be this one found by name.
    await until(leftovers, lambda found: not found, timeout=60)
    await until(lambda: find_actor_async(SESSIONS), lambda found: found is None, timeout=30)


async def test_new_conversation_adopts_a_warm_spare(config: SessionConfig) -> None:
    reg = await registry(config, None)
    await until(lambda: reg.counts.remote(), lambda c: c["spare"] == 1, timeout=SPARE_WAIT)

    handle = await session_handle("conv-a", config, None)
    assert await handle.open.remote(True, "chat") == "chat"
    # The spare was used, and a new one is being started behind it.
    counts = await reg.counts.remote()
    assert counts["live"] == 1
    again = await session_handle("conv-a", config, None)
    assert again._actor_id == handle._actor_id
    assert (await find_session("conv-a"))._actor_id == handle._actor_id
    assert list(await live_sessions_async()) == ["conv-a"]
    # Two different conversations never share an actor.
    other = await session_handle("conv-b", config, None)
    assert other._actor_id != handle._actor_id
    assert await other.adopt.remote("conv-c") == "conv-b"


async def test_concurrent_first_requests_get_one_actor(config: SessionConfig) -> None:
    handles = await asyncio.gather(*(session_handle("conv-same", config, None) for _ in range(5)))
    assert len({h._actor_id for h in handles}) == 1


async def test_a_crashed_actor_comes_back_as_the_same_conversation(config: SessionConfig) -> None:
    handle = await session_handle("conv-crash", config, None)
    assert await handle.open.remote(True, "chat") == "chat"
    os.kill(await handle.pid.remote(), signal.SIGKILL)
    # Restarted in place (same handle), it takes back its conversation and finds it stored.
    await until(lambda: handle.adopt.remote(""), lambda held: held == "conv-crash", timeout=60,
                errors=(ray.exceptions.RayActorError,))
    assert await handle.open.remote(False) == "chat"
    await (await registry(config, None)).forget.remote("conv-crash", handle._actor_id.hex())
    assert (await session_handle("conv-crash", config, None))._actor_id == handle._actor_id


async def test_after_idle_exit_a_fresh_actor_rebuilds_from_the_store(config: SessionConfig) -> None:
    handle = await session_handle("conv-idle", config, None)
    assert await handle.open.remote(True, "task") == "task"
    with pytest.raises(ray.exceptions.RayActorError):
        for _ in range(120):
            await handle.adopt.remote("")
            await asyncio.sleep(0.5)
    await (await registry(config, None)).forget.remote("conv-idle", handle._actor_id.hex())
    fresh = await session_handle("conv-idle", config, None)
    assert fresh._actor_id != handle._actor_id
    assert await fresh.open.remote(False) == "task"


@ray.remote(num_cpus=0)
class CountingAgent:
    """Stands in for the AgentLoop handle: counts the warm-up calls it gets."""

    def __init__(self) -> None:
        self.calls = 0

    def ready(self) -> bool:
        self.calls += 1
        return True

    def count(self) -> int:
        return self.calls


async def test_a_spare_is_warmed_before_it_adopts(config: SessionConfig) -> None:
    agent = CountingAgent.remote()
    reg = await registry(config, agent)
    await until(lambda: reg.counts.remote(), lambda c: c["spare"] == 1, timeout=SPARE_WAIT)
    # The spare calls the agent while it waits, before any conversation exists.
    await until(lambda: agent.count.remote(), lambda calls: calls >= 1, timeout=60)
    handle = await session_handle("conv-warm", config, agent)
    spent = await handle.warm.remote()
    assert set(spent) == {"agent", "encoder", "store"}
    # Warming reads only: the adopted conversation is still new.
    assert await handle.open.remote(True, "chat") == "chat"
    assert await handle.messages.remote() == []


async def test_the_next_spare_waits_for_the_adopted_conversations_first_turn(config: SessionConfig) -> None:
    """Starting a process takes a core; the new conversation's first turn should have it."""
    config = config.model_copy(update={"spares": 2, "idle_seconds": 60.0, "refill_wait": 90.0})
    reg = await registry(config, None)
    await until(lambda: reg.counts.remote(), lambda c: c["spare"] == 2, timeout=90)
    handle = await session_handle("conv-first", config, None)
    assert await handle.open.remote(True, "chat") == "chat"
    await asyncio.sleep(1.5)
    assert await reg.counts.remote() == {"live": 1, "spare": 1, "starting": 0, "queued": 0}
    # A turn ends (with no model it ends in an error event): the next spare starts now, long
    # before refill_wait.
    events = [await ref async for ref in handle.chat.options(num_returns="streaming").remote("hello")]
    assert events[-1].type == "error"
    await until(lambda: reg.counts.remote(), lambda c: c["spare"] == 2, timeout=SPARE_WAIT)
    # Two adoptions in a row leave none on offer: the refill starts at once, without a turn.
    await session_handle("conv-x", config, None)
    await session_handle("conv-y", config, None)
    await until(lambda: reg.counts.remote(), lambda c: c["spare"] + c["starting"] >= 1, timeout=30)
    await until(lambda: reg.counts.remote(), lambda c: c["spare"] == 2, timeout=90)


async def test_a_burst_with_no_spare_starts_its_processes_in_turn(config: SessionConfig) -> None:
    """More new conversations than spares: each still gets its own actor, but the processes
    start `cold_starts` at a time in the order the conversations came, so the first ones are
    answered while the later ones wait, rather than every one waiting for all of them."""
    config = config.model_copy(update={"spares": 0, "cold_starts": 1, "idle_seconds": 60.0})
    reg = await registry(config, None)
    got: list[tuple[str, int]] = []   # (conversation, slot actors that existed once it had its own)

    async def first(session_id: str) -> object:
        handle = await session_handle(session_id, config, None)
        got.append((session_id, len(await live_actors_async(SLOT))))
        return handle

    order = ["burst-a", "burst-b", "burst-c"]
    tasks = []
    for session_id in order:
        tasks.append(asyncio.create_task(first(session_id)))
        # Each has reached the registry (waiting or answered) before the next one is sent.
        await until(lambda: reg.counts.remote(), lambda c, n=len(tasks): c["queued"] + c["live"] == n, timeout=60)
    handles = await asyncio.gather(*tasks)
    assert [session_id for session_id, _ in got] == order
    assert len({h._actor_id for h in handles}) == 3
    # One at a time: when a conversation had its actor, at most the next one's had been started.
    assert all(slots <= i + 2 for i, (_, slots) in enumerate(got)), got
    assert await reg.counts.remote() == {"live": 3, "spare": 0, "starting": 0, "queued": 0}
    for session_id, handle in zip(order, handles, strict=True):
        assert await handle.open.remote(True, "chat") == "chat"
        assert (await find_session(session_id))._actor_id == handle._actor_id


@pytest.mark.parametrize("held", [True, False], ids=["caller-held-it", "registry-still-lists-it"])
async def test_opening_a_conversation_whose_actor_is_gone_gets_a_fresh_one(config: SessionConfig, held: bool) -> None:
    """The one path the gateway, the scheduler and a camera stream open a conversation by: an
    actor gone for good (an idle exit) is replaced at the first try, whether the caller still
    held its handle or the registry still listed it (its sweep had not run yet)."""
    from actors.common.restart import open_conversation

    def opening(actor):
        return actor.open.remote(True, "chat")

    config = config.model_copy(update={"idle_seconds": 60.0})
    handle, channel = await open_conversation("conv-gone", None, opening, lambda: registry(config, None))
    assert channel == "chat"
    ray.kill(handle, no_restart=True)
    # ray.kill returns before the actor is gone: wait until it is (as an idle exit leaves it).
    with pytest.raises(ray.exceptions.RayActorError):
        for _ in range(120):
            await handle.adopt.remote("")
            await asyncio.sleep(0.25)
    fresh, channel = await open_conversation("conv-gone", handle if held else None, opening,
                                             lambda: registry(config, None))
    assert channel == "chat" and fresh._actor_id != handle._actor_id
    assert (await find_session("conv-gone"))._actor_id == fresh._actor_id


async def test_a_new_conversation_past_the_start_wait_is_refused_with_when_to_come_back(config: SessionConfig) -> None:
    """A burst with no spare: a newcomer whose wait for a process would be over the bound is
    told at once (SessionsBusy with a retry_after) and holds nothing; one that gives no bound
    (the scheduler's) waits its turn; the refused one, asked again once the queue is empty, has
    its own actor."""
    from actors.session.start_queue import SessionsBusy

    config = config.model_copy(update={"spares": 0, "cold_starts": 1, "idle_seconds": 60.0})
    reg = await registry(config, None)

    async def acquire(session_id: str) -> object:
        return await reg.acquire.remote(session_id)

    first = asyncio.create_task(acquire("wait-a"))
    second = asyncio.create_task(acquire("wait-b"))
    await until(lambda: reg.counts.remote(), lambda c: c["queued"] == 2, timeout=60)
    with pytest.raises(SessionsBusy) as refused:
        await reg.acquire.remote("wait-c", 0.5)
    assert 1 <= refused.value.retry_after <= 60
    assert (await reg.counts.remote())["queued"] == 2      # the refusal took no place in the queue
    handles = await asyncio.gather(first, second)
    assert len({h._actor_id for h in handles}) == 2
    # The queue is empty now: the same bound lets it in, and it starts at once.
    third = await reg.acquire.remote("wait-c", 0.5)
    assert await third.open.remote(True, "chat") == "chat"
    assert third._actor_id not in {h._actor_id for h in handles}
