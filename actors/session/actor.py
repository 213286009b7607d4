"""SessionActor "session:{id}": one per conversation while it is in use.

It owns the conversation's state: one turn at a time (a lock), cancel jumping that queue,
buffered writes flushed on a timer, on every read, on idle exit and at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import ray
from pydantic import BaseModel

from actors.errors import NAMESPACE, report
from actors.logmask import install_log_masking
from actors.session.core import SessionCore, system_prompt
from actors.session.events import TurnEvent
from actors.session.turnlog import TurnLog
from actors.store.models import new_id
from actors.store.store import Store

log = logging.getLogger(__name__)


class SessionConfig(BaseModel):
    database_url: str
    flush_seconds: float = 180.0
    idle_seconds: float = 600.0


class SessionNotFound(Exception):
    pass


@ray.remote(num_cpus=0, max_restarts=3, max_task_retries=0)
class SessionActor:
    def __init__(self, session_id: str, config: SessionConfig, agent: Any) -> None:
        install_log_masking()
        self.config = config
        self.agent = agent
        self.store = Store.open(config.database_url)
        self.core = SessionCore(session_id)
        self._loaded = False
        self._load_lock = asyncio.Lock()
        self._turn_lock = asyncio.Lock()
        self.current: TurnLog | None = None
        self._current_task: asyncio.Task[None] | None = None
        self._waiting = 0
        self._last_activity = time.monotonic()
        self._timers: list[asyncio.Task[None]] = []
        self._started = time.time()

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self, create: bool = False) -> bool:
        """Load from the store (or start a new conversation); False if it does not exist."""
        async with self._load_lock:
            if not self._loaded:
                if not await self.core.load(self.store):
                    if not create:
                        return False
                    self.core.create()
                    # The conversation row is written at once so other replicas see it exists;
                    # only its messages wait for the batch flush.
                    await self.core.buffer.flush(self.store)
                self._loaded = True
                loop = asyncio.get_running_loop()
                self._timers = [loop.create_task(self._flush_timer()), loop.create_task(self._idle_timer())]
        self._last_activity = time.monotonic()
        return True

    async def _flush_timer(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_seconds)
            await self._safe_flush()

    async def _idle_timer(self) -> None:
        period = min(30.0, self.config.idle_seconds / 4)
        while True:
            await asyncio.sleep(period)
            idle = time.monotonic() - self._last_activity
            busy = self._turn_lock.locked() or self._waiting
            if not busy and idle >= self.config.idle_seconds:
                if await self._safe_flush():
                    log.info("session %s idle for %.0fs; exiting", self.core.session_id, idle)
                    # Exiting on purpose: no restart; the next request rebuilds it from the store.
                    ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                    return

    async def _safe_flush(self) -> bool:
        try:
            await self.core.buffer.flush(self.store)
            return True
        except Exception as exc:  # noqa: BLE001 - timer boundary: keep the batch, report, retry later
            log.exception("flush of session %s failed", self.core.session_id)
            report("session.flush", exc, request={"session": self.core.session_id})
            return False

    async def flush(self) -> int:
        return await self.core.buffer.flush(self.store)

    # -- reads ----------------------------------------------------------------------------

    async def messages(self) -> list[dict[str, Any]]:
        """The stored conversation; flushes first so a read never misses an accepted write."""
        self._last_activity = time.monotonic()
        await self.flush()
        return [m.model_dump() for m in await self.store.list_messages(self.core.session_id)]

    def state(self) -> dict[str, Any]:
        turn = self.current
        return {
            "session_id": self.core.session_id,
            "running": bool(turn and not turn.finished),
            "turn_id": turn.turn_id if turn else None,
            "queued": self._waiting,
            "pending_writes": self.core.buffer.pending,
            # Lets an owner (and a test) see that an idle actor exited and was rebuilt.
            "actor_started": self._started,
        }

    # -- turns ----------------------------------------------------------------------------

    async def chat(self, message: str) -> AsyncIterator[dict[str, Any]]:
        """Stream a turn's events (as dicts). The turn runs on even if the caller leaves."""
        if not self._loaded and not await self.open():
            raise SessionNotFound(self.core.session_id)
        turn = TurnLog(new_id())
        self._waiting += 1
        task = asyncio.get_running_loop().create_task(self._run(turn, message))
        task.add_done_callback(lambda _t: None)
        async for event in turn.follow():
            yield event.model_dump()

    async def cancel(self) -> bool:
        """Stop the running turn now; does not wait behind the turn lock."""
        turn, task = self.current, self._current_task
        if turn is None or turn.finished or task is None:
            return False
        turn.cancelled = True
        task.cancel()
        return True

    async def _run(self, turn: TurnLog, message: str) -> None:
        try:
            async with self._turn_lock:
                self._waiting -= 1
                self.current, self._current_task = turn, asyncio.current_task()
                self._last_activity = time.monotonic()
                await self._turn(turn, message)
        except asyncio.CancelledError:
            self._finish_cancelled(turn)
            await turn.push(TurnEvent(type="done", data=self._done_data(None, turn.spoken(), cancelled=True)))
        except Exception as exc:  # noqa: BLE001 - a turn's top boundary: the client gets a plain error
            log.exception("turn failed in session %s", self.core.session_id)
            report("session.turn", exc, request={"session": self.core.session_id})
            await turn.push(TurnEvent(type="error", data={
                "code": "internal_error",
                "message": "Something went wrong while answering; your message was saved. Please try again.",
            }))
        finally:
            self._current_task = None
            self._last_activity = time.monotonic()

    def _finish_cancelled(self, turn: TurnLog) -> None:
        heard = turn.spoken()
        if heard:
            self.core.add("assistant", heard, meta={"interrupted": True})

    def _done_data(self, message_id: str | None, text: str, cancelled: bool = False) -> dict[str, Any]:
        return {"session_id": self.core.session_id, "message_id": message_id, "text": text,
                "cancelled": cancelled}

    async def _turn(self, turn: TurnLog, message: str) -> None:
        self.core.add("user", message)
        request = {"messages": self.core.prompt(system_prompt()), "session_id": self.core.session_id}
        stream = self.agent.options(stream=True).run.remote(request)
        result: dict[str, Any] | None = None
        try:
            async for event in stream:
                if event["type"] == "result":
                    result = event["data"]
                elif event["type"] == "error":
                    await turn.push(TurnEvent(**event))
                    return
                else:
                    await turn.push(TurnEvent(**event))
        finally:
            if result is None:
                stream.cancel()
        text = (result or {}).get("text", "")
        tools = (result or {}).get("tools") or None
        saved = self.core.add("assistant", text, meta={"tools": tools} if tools else None)
        await turn.push(TurnEvent(type="done", data=self._done_data(saved.id, text)))


def session_actor(session_id: str, config: SessionConfig, agent: Any) -> Any:
    return SessionActor.options(
        name=f"session:{session_id}", namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
    ).remote(session_id, config, agent)
