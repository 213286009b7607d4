"""Admission by memory with real Ray and a real SQLite store: however many conversations are
opened, the conversation processes alive (live, spares, starts) never pass the cap; the least
recently used idle ones are let go and come back from the store with nothing lost; a busy one
is never let go, and with everything busy a person's newcomer is refused with when to come
back while a background one waits for room."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import ray

from actors.common.names import NAMESPACE, live_actors_async
from actors.common.restart import open_conversation
from actors.session.actor import SessionConfig
from actors.session.events import Sentence, TurnResult
from actors.session.pool import SLOT, registry
from actors.session.start_queue import SessionsBusy
from tests.test_pool import config, until  # noqa: F401 (`config` is the pool tests' fixture)

pytestmark = pytest.mark.ray

# Three times the cap's conversations are opened, then all reopened: 10 cold starts at CAP 2
# (CAP 3 took 20 s on a quiet machine and 250 s beside two CPU hogs).
CAP = 2


class Watch:
    """Samples the slot actors alive (and the registry's own count) until stopped."""

    def __init__(self, reg: Any) -> None:
        self.reg = reg
        self.most = 0
        self.most_counted = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.most = max(self.most, len(await live_actors_async(SLOT)))
            c = await self.reg.counts.remote()
            self.most_counted = max(self.most_counted, c["live"] + c["spare"] + c["starting"])
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        self.most = max(self.most, len(await live_actors_async(SLOT)))
        self._task.cancel()


async def say(handle: Any, text: str) -> list[Any]:
    """One turn (with no model it ends in an error event, the person's message stored)."""
    return [await ref async for ref in handle.chat.options(num_returns="streaming").remote(text)]


async def test_past_the_cap_idle_conversations_make_room_and_lose_nothing(config: SessionConfig) -> None:
    capped = config.model_copy(update={"max_live": CAP, "spares": 1, "cold_starts": 1, "idle_seconds": 300.0})
    reg = await registry(capped, None)
    assert (await reg.state.remote())["max_live"] == CAP
    watch = Watch(reg)
    conversations = [f"cap-{n}" for n in range(3 * CAP)]

    def opening(actor: Any) -> Any:
        return actor.open.remote(True, "chat")

    try:
        for session_id in conversations:
            handle, channel = await open_conversation(session_id, None, opening, lambda: registry(capped, None))
            assert channel == "chat"
            events = await say(handle, f"hello {session_id}")
            assert events[-1].type == "error"
            assert len(await live_actors_async(SLOT)) <= CAP
        state = await reg.state.remote()
        assert state["live"] <= CAP and state["released"] >= len(conversations) - CAP
        # Every conversation reopened, the released ones rebuilt from the store: all still there.
        for session_id in conversations:
            handle, channel = await open_conversation(session_id, None, lambda a: a.open.remote(False),
                                                      lambda: registry(capped, None))
            assert channel == "chat"
            said = [(m["role"], m["content"]) for m in await handle.messages.remote()]
            assert ("user", f"hello {session_id}") in said, (session_id, said)
    finally:
        await watch.stop()
    assert watch.most <= CAP, watch.most
    assert watch.most_counted <= CAP, watch.most_counted


@ray.remote(num_cpus=0)
class Gate:
    """Holds the agent's answer until the test opens it."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()

    async def wait(self) -> None:
        await self.opened.wait()

    async def open(self) -> None:
        self.opened.set()


class HeldStream:
    """A turn's stream from the agent: nothing until the gate opens, then a failure (which ends
    the turn as an error, learning nothing)."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def __aiter__(self) -> Any:
        return self._events()

    async def _events(self) -> Any:
        await self.gate.wait.remote()
        raise RuntimeError("the test let the turn go")
        yield  # an async generator

    def cancel(self) -> None:
        pass


class HeldAgent:
    """The AgentLoop handle's shape (`options(stream=True).run.remote(request)`), held by a gate."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def options(self, **_: Any) -> HeldAgent:
        return self

    @property
    def run(self) -> HeldAgent:
        return self

    def remote(self, _request: Any) -> HeldStream:
        return HeldStream(self.gate)


async def test_a_busy_conversation_is_never_let_go(config: SessionConfig) -> None:
    gate = Gate.remote()
    agent = HeldAgent(gate)
    capped = config.model_copy(update={"max_live": 1, "spares": 0, "cold_starts": 1, "idle_seconds": 300.0})
    reg = await registry(capped, agent)
    busy = await reg.acquire.remote("held")
    assert await busy.open.remote(True, "chat") == "chat"
    turn = asyncio.create_task(say(busy, "wait for it"))
    await until(lambda: busy.activity.remote(), lambda idle: idle is None, timeout=60)
    # Asked directly, it refuses and stays.
    assert await busy.release.remote() is False
    assert await busy.adopt.remote("") == "held"
    # A person's new conversation hears at once when to come back; nothing was let go.
    with pytest.raises(SessionsBusy) as refused:
        await reg.acquire.remote("newcomer", 30.0)
    assert 1 <= refused.value.retry_after <= 60
    assert (await reg.state.remote())["released"] == 0
    # A background one waits for room: it gets it once the turn has ended.
    async def background() -> Any:
        return await reg.acquire.remote("background")

    waiting = asyncio.create_task(background())
    # The registry counts it as waiting for room (past a recheck or two), and it is not let in.
    await until(lambda: reg.state.remote(), lambda s: s["waiting_for_room"] == 1, timeout=60)
    assert not waiting.done()
    assert len(await live_actors_async(SLOT)) == 1
    await gate.open.remote()
    events = await turn
    assert events[-1].type == "error"
    fresh = await asyncio.wait_for(waiting, 120)
    assert await fresh.open.remote(True, "chat") == "chat"
    assert (await reg.state.remote())["released"] == 1
    with pytest.raises(ray.exceptions.RayActorError):
        await busy.adopt.remote("")
    # The let-go conversation comes back from the store, its message kept.
    back, channel = await open_conversation("held", None, lambda a: a.open.remote(False),
                                            lambda: registry(capped, agent))
    assert channel == "chat"
    assert ("user", "wait for it") in [(m["role"], m["content"]) for m in await back.messages.remote()]
    ray.kill(gate)


async def test_camera_streams_and_devices_hold_places_under_the_same_cap(config: SessionConfig) -> None:
    capped = config.model_copy(update={"max_live": 2, "spares": 0, "cold_starts": 1, "idle_seconds": 300.0})
    reg = await registry(capped, None)
    for session_id in ("idle-1", "idle-2"):
        handle, _channel = await open_conversation(session_id, None, lambda a: a.open.remote(True, "chat"),
                                                   lambda: registry(capped, None))
        await say(handle, f"hello {session_id}")
    assert len(await live_actors_async(SLOT)) == 2
    # A camera stream and a device each take a place: the idle conversations are let go for them.
    # Their actors stand in for the CameraActor and the DeviceActor (the registry's sweep frees
    # a place whose actor is gone).
    standing = [Gate.options(name=name, namespace=NAMESPACE).remote() for name in ("camera:s1", "device:7")]
    await reg.claim.remote("camera:s1", "socket-1", 5.0)
    await reg.claim.remote("device:7", "socket-2", 5.0)
    state = await reg.state.remote()
    assert state["streams"] == 2 and state["live"] == 0 and state["released"] == 2
    await until(lambda: live_actors_async(SLOT), lambda alive: not alive, timeout=60)
    # Full of streams, which are never let go: the next one and a person's conversation are refused.
    with pytest.raises(SessionsBusy):
        await reg.claim.remote("camera:s2", "socket-3", 5.0)
    with pytest.raises(SessionsBusy):
        await reg.acquire.remote("newcomer", 30.0)
    # The device reconnects (its place passes to the new socket); the old socket's close frees nothing.
    await reg.claim.remote("device:7", "socket-4", 5.0)
    await reg.unclaim.remote("device:7", "socket-2")
    assert (await reg.state.remote())["streams"] == 2
    # The camera stream ends: its place goes to the conversation, which comes back from the store.
    await reg.unclaim.remote("camera:s1", "socket-1")
    back, channel = await open_conversation("idle-1", None, lambda a: a.open.remote(False),
                                            lambda: registry(capped, None))
    assert channel == "chat"
    assert ("user", "hello idle-1") in [(m["role"], m["content"]) for m in await back.messages.remote()]
    for actor in standing:
        ray.kill(actor)


@ray.remote(num_cpus=0)
class Reflections:
    """The agent's reflection, held until the test lets it finish; it notes what it reflected on."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.done: list[str] = []

    async def reflect(self, exchange: dict[str, Any]) -> None:
        await self.opened.wait()
        self.done.append(exchange["user"])

    async def open(self) -> None:
        self.opened.set()

    def finished(self) -> list[str]:
        return self.done


class AnsweringStream:
    """A turn's stream from the agent: one sentence, then the result."""

    def __aiter__(self) -> Any:
        return self._events()

    async def _events(self) -> Any:
        reply = "I will remember that the tomatoes need water at seven."
        yield Sentence(text=reply, index=0)
        yield TurnResult(text=reply)

    def cancel(self) -> None:
        pass


class LearningAgent(HeldAgent):
    """HeldAgent's handle shape, but turns answer at once; reflection waits on `Reflections`."""

    def remote(self, _request: Any) -> AnsweringStream:  # type: ignore[override]
        return AnsweringStream()

    @property
    def reflect(self) -> Any:
        return self.gate.reflect


async def test_a_conversation_still_learning_makes_room_once_its_reflection_is_done(config: SessionConfig) -> None:
    reflections = Reflections.remote()
    capped = config.model_copy(update={"max_live": 1, "spares": 0, "cold_starts": 1, "idle_seconds": 300.0,
                                       "memory": True})
    reg = await registry(capped, LearningAgent(reflections))
    learner = await reg.acquire.remote("learner")
    assert await learner.open.remote(True, "chat") == "chat"
    events = await say(learner, "My tomatoes need water every evening at seven.")
    assert events[-1].type == "done", events
    await until(lambda: learner.state.remote(), lambda s: s["learning"] == 1, timeout=30)
    # Its turn is over, only its reflection is pending: a person's new conversation is not sent
    # away, and the learner waits for its reflection before it goes.
    async def acquire() -> Any:
        return await reg.acquire.remote("newcomer", 30.0)

    newcomer = asyncio.create_task(acquire())
    await until(lambda: reg.state.remote(), lambda s: s["releasing"] == 1, timeout=60)
    assert await reflections.finished.remote() == []
    assert not newcomer.done()
    await reflections.open.remote()
    fresh = await asyncio.wait_for(newcomer, 120)
    assert await fresh.open.remote(True, "chat") == "chat"
    assert await reflections.finished.remote() == ["My tomatoes need water every evening at seven."]
    assert (await reg.state.remote())["released"] == 1
