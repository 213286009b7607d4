"""Getting a spare SessionActor's process ready before it adopts a conversation.

In a fresh actor process a new conversation's first turn paid for things a continued one never
does (figures in benchmarks/MEASURED.md):
- the first call through the AgentLoop handle sets up Serve's router in this process (which
  replicas exist, a long poll to the controller), several times a later call's cost;
- the sentence encoder's actor lookup (a GCS read);
- the store's first reads (SQL compiled on first use, the memory index loaded into this
  process, a second pooled connection opened).

A spare does all of that once while it waits (`warm`), so the conversation it adopts starts
where a continued one would. Everything here is per process and survives adoption, which
replaces only the actor's per-conversation fields (`SessionActor._take`) and keeps its handles
and this module's state. No side effects on the store: reads only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TYPE_CHECKING

from actors.devices.repository import conversation_person
from actors.memory.embed_actor import remote_encoder
from actors.memory.repository import read_memory
from actors.store.store import Store

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger(__name__)

# (encoder or None,) once looked up: one lookup per process, not per conversation. A failed
# lookup is not kept: the next turn tries again.
_encoder: tuple[Any] | None = None
_encoder_lock: asyncio.Lock | None = None


async def shared_encoder() -> Any:
    """The cluster's sentence encoder (paraphrase-aware memory), or None to stay lexical."""
    global _encoder, _encoder_lock
    if _encoder is not None:
        return _encoder[0]
    _encoder_lock = _encoder_lock or asyncio.Lock()
    async with _encoder_lock:
        if _encoder is None:
            try:
                _encoder = (await remote_encoder(),)
            except Exception as exc:  # noqa: BLE001 - memory must never cost a reply
                log.warning("sentence encoder unavailable: %s", exc)
                return None
    return _encoder[0]


async def _timed(name: str, step: Callable[[], Awaitable[Any]], spent: dict[str, float]) -> None:
    started = time.perf_counter()
    try:
        await step()
    except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs speed
        log.warning("spare session warm-up: %s failed: %s", name, exc)
    spent[name] = round((time.perf_counter() - started) * 1000, 1)


async def warm_process(store: Store, agent: DeploymentHandle) -> dict[str, float]:
    """Do once, now, what a new conversation's first turn would otherwise pay for; returns the
    milliseconds each step took (the pool logs them)."""
    spent: dict[str, float] = {}
    if agent is not None:
        # A plain call on the handle itself (not an `options()` copy): the router it builds is
        # shared by the streaming copies each turn makes.
        await _timed("agent", lambda: agent.ready.remote(), spent)
    await _timed("encoder", shared_encoder, spent)

    async def reads() -> None:
        # On one connection, as a turn's start does (`turns.prepare`).
        async with store.engine.connect() as conn:
            await conversation_person(store, "", conn)
            await read_memory(store, conn)

    await _timed("store", reads, spent)
    return spent
