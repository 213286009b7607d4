"""SessionActor "session:{id}": one per conversation while it is in use.

It owns the conversation's state and is only its Ray plumbing: the policy lives in Ray-free
cores with their own tests. `engine.TurnEngine` runs the turns (one at a time, cancel jumping
that queue, the agent's events relayed, the reply saved, confirmations and the PIN rule, what a
turn teaches memory), the same engine the test harness builds; `ports.ActorPorts` is what it
reaches through Ray (the store, the AgentLoop); `IdleWatch` says when to exit.

Durable before done: a turn writes the person's message and a pending reply row when it starts,
updates that row as sentences go out (one small upsert at a time, off the event path), and
writes the final reply before `done` is published. Only what can be rebuilt (the rolling
summary, the `updated` stamp) waits for the flush timer. Killed mid-turn, the actor restarts
(`max_restarts`) and rebuilds from the store, where the pending row becomes an interrupted reply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TYPE_CHECKING

import ray
from pydantic import BaseModel

from actors.common.background import spawn
from actors.common.errors import ErrorInfo, IriisError
from actors.common.idle import IdleWatch
from actors.common.trace import mark
from actors.logmask import install_log_masking
from actors.recent_errors import report
from actors.session import turns
from actors.session.confirmations import ConfirmationAnswer, ConfirmationBook
from actors.session.core import SessionCore
from actors.session.durable import DurableTurns
from actors.session.engine import TurnEngine, TurnOptions
from actors.session.events import ConfirmRequest, TurnEvent
from actors.session.ports import ActorPorts
# The adoption record and the live-handle helpers live in slots.py; imported here too, where
# callers (the gateway's context, the CLI) have always found them.
from actors.session.slots import adopted_session, live_sessions, live_sessions_async, remember_adoption  # noqa: F401
from actors.session.warm import warm_process
from actors.store.store import Store

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger(__name__)
# A released actor ends itself this long after answering (the pool ends it at once anyway).
RELEASE_EXIT_DELAY = 1.0
# The longest a conversation asked to make room waits for its reflection to finish; past it the
# conversation stays, and the newcomer is told when to come back.
RELEASE_LEARNING_WAIT = 20.0


class SessionConfig(BaseModel):
    database_url: str
    flush_seconds: float = 180.0
    idle_seconds: float = 600.0
    # Warm spare actors the pool keeps for new conversations, and a custom Ray resource naming
    # the nodes they should prefer (any node when none is alive); see actors/session/registry.py.
    spares: int = 2
    refill_wait: float = 10.0   # the pool's next spare waits this long at most for a first turn
    cold_starts: int = 2        # actor processes the pool starts at once (spares and a burst's)
    start_wait: float = 30.0    # seconds a person's new conversation may queue for one (else 503)
    # Conversation processes alive at once (live, spares and starts); at the cap the least
    # recently used idle one is let go. 0: derived from the memory (actors/session/admission.py).
    max_live: int = 0
    prefer_resource: str = ""
    # Off (IRIIS_MEMORY=off): no memory block in the prompt and nothing learned from turns; the
    # agent evaluation measures what memory adds with the same scenarios run both ways.
    memory: bool = True


class SessionNotFound(IriisError):
    code = "session_not_found"


# Restarts without limit: each one rebuilds from the store, and a death is never the
# conversation's fault. An idle exit is on purpose (no restart).
@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class SessionActor:
    def __init__(self, session_id: str, config: SessionConfig, agent: DeploymentHandle) -> None:
        install_log_masking()
        self.config = config
        self.agent = agent
        self.store = process_store(config.database_url)
        # A pooled actor restarted in place takes back the conversation it had adopted.
        self._take(session_id or adopted_session())

    def _take(self, session_id: str) -> None:
        """Every per-conversation field, for `session_id` ("" while a spare)."""
        self.core = SessionCore(session_id)
        self.idle = IdleWatch(self.config.idle_seconds)
        self._loaded = False
        self._load_lock = asyncio.Lock()
        self._timers: list[asyncio.Task[None]] = []
        self._started = time.time()
        # Background learning (reflection, playbook); kept so idle exit waits for it.
        self._learning: set[asyncio.Task[Any]] = set()
        self.durable = DurableTurns(self.core, self.store, report)
        ports = ActorPorts(session_id, self.store, self.agent, self.idle, self._background, self.config.memory)
        self.turns = TurnEngine(self.core, ports, ConfirmationBook(session_id), self.durable, self.config.memory)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self, create: bool = False, channel: str = "chat") -> str:
        """Load from the store (or start a new conversation on `channel`); returns the
        conversation's channel, or "" if it does not exist."""
        async with self._load_lock:
            if not self._loaded:
                if not await self.core.load(self.store):
                    if not create:
                        return ""
                    self.core.create(channel)
                # The conversation row is written at once so other replicas see it exists; after
                # a restart, the replies its turns left pending are settled (interrupted).
                await self.core.buffer.flush(self.store)
                self._loaded = True
                loop = asyncio.get_running_loop()
                self._timers = [loop.create_task(self._flush_timer()), loop.create_task(self._idle_timer())]
        self.idle.touch()
        assert self.core.conversation is not None
        return self.core.conversation.channel

    async def _flush_timer(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_seconds)
            await self._safe_flush()

    def _busy(self) -> bool:
        return self._working() or bool(self._learning)

    def _working(self) -> bool:
        """A turn, a confirmation or a summary under way (what keeps the process from going
        even when room is needed); learning from a finished turn is not counted here."""
        return self.turns.working()

    async def _idle_timer(self) -> None:
        while True:
            await asyncio.sleep(self.idle.period())
            if self.idle.due(self._busy()) and await self._leave(f"idle for {self.idle.idle_for():.0f}s"):
                return

    async def _leave(self, why: str, delay: float = 0.0) -> bool:
        """The way out for an idle conversation (the idle timer's, and the pool's `release`):
        what its work session taught is distilled, the write buffer flushed, and the actor
        exits on purpose, with no restart (the next request rebuilds it from the store), after
        `delay` s (time for an answer to reach the caller). False, staying, when work came in
        meanwhile or the flush failed."""
        await self._end_work_session()
        if self._busy() or not await self._safe_flush():
            return False
        log.info("session %s %s; exiting", self.core.session_id, why)
        me = ray.get_runtime_context().current_actor
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, lambda: ray.kill(me, no_restart=True))
        else:
            ray.kill(me, no_restart=True)
        return True

    async def activity(self) -> float | None:
        """Seconds since this conversation was last used, or None while it is busy: the pool
        lets the least recently used idle conversation go when it needs room. One whose turn
        is over but whose reflection is still running reports 0 s, so it goes last."""
        if self._working():
            return None
        return 0.0 if self._learning else self.idle.idle_for()

    async def release(self) -> bool:
        """The pool needs this process's room (actors/session/admission.py): exit as an idle
        conversation does, unless a turn is running or work is pending (False, nothing done).
        Learning from the last turn is let finish first (up to RELEASE_LEARNING_WAIT s): an
        exit would cut it off. True once it is on its way out; the pool may end it at once."""
        if self._working():
            return False
        if self._learning:
            await asyncio.wait(set(self._learning), timeout=RELEASE_LEARNING_WAIT)
            if self._busy():
                return False
        return await self._leave("released to make room for another conversation", delay=RELEASE_EXIT_DELAY)

    async def _safe_flush(self) -> bool:
        try:
            await self.core.buffer.flush(self.store)
            return True
        except Exception as exc:
            log.exception("flush of session %s failed", self.core.session_id)
            report("session.flush", exc, request={"session": self.core.session_id})
            return False

    async def flush(self) -> int:
        return await self.core.buffer.flush(self.store)

    def adopt(self, session_id: str = "") -> str:
        """A spare from the session pool (actors/session/registry.py) takes on `session_id` before its
        first `open`. Returns the conversation held ("" while spare); once taken it never changes."""
        if session_id and not self.core.session_id and not self._loaded:
            remember_adoption(session_id)
            self._take(session_id)
        return self.core.session_id

    async def warm(self) -> dict[str, float]:
        """A spare, while it waits: the process-wide set-up a first turn would pay for."""
        return await warm_process(self.store, self.agent)

    async def first_turn(self, timeout: float) -> bool:
        """Whether a turn ended here within `timeout` s (the pool's next spare waits for it)."""
        try:
            await asyncio.wait_for(self.turns.turned.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def pid(self) -> int:
        """This actor's process id (fault tests kill it)."""
        return os.getpid()

    # -- reads ----------------------------------------------------------------------------

    async def messages(self) -> list[dict[str, Any]]:
        """The stored conversation; flushes first so a read never misses an accepted write."""
        self.idle.touch()
        await self.flush()
        return [m.model_dump() for m in await self.store.list_messages(self.core.session_id)]

    def state(self) -> dict[str, Any]:
        # `learning`: reflection and playbook work still running after the last reply.
        return {**turns.state(self.core, self.turns.desk, self.turns.book, self._started), "learning": len(self._learning)}

    def has_message(self, message_id: str) -> bool:
        return any(m.id == message_id for m in self.core.history)

    async def delete_message(self, message_id: str) -> bool:
        self.idle.touch()
        removed = self.core.remove(message_id)
        await self.flush()
        return removed

    async def set_aside_outside(self) -> int:
        """The owner sets aside the outside content seen so far (core.set_aside_outside):
        written before this returns; the next turn no longer sees it."""
        self.idle.touch()
        aside = self.core.set_aside_outside()
        await self.flush()
        return aside

    # -- turns ----------------------------------------------------------------------------

    async def chat(self, message: str, background: bool = False, attended: bool = True,
                   sources: list[str] | None = None, work_only: bool = False) -> AsyncIterator[TurnEvent]:
        """Stream a turn's typed events. The first one (`TurnStarted`) names the turn.

        `sources` names what the message came from when it is not the owner's words
        (`relay:<uid> from <name>`, `camera:ocr`, `task:<id>`): the turn is tainted from its start."""
        mark("session.in", self.core.session_id)
        if not self._loaded and not await self.open():
            raise SessionNotFound(self.core.session_id)
        turn = self.turns.start(message, TurnOptions(background=background, attended=attended,
                                                     sources=tuple(sources or ()), work_only=work_only))
        async for event in self.turns.follow(turn):
            yield event

    async def follow(self, turn_id: str | None = None) -> AsyncIterator[TurnEvent]:
        """Follow a running turn from its start, for a client that reopened."""
        turn = self.turns.desk.get(turn_id)
        if turn is None:
            return
        async for event in self.turns.follow(turn):
            yield event

    def client_left(self, turn_id: str) -> None:
        """The HTTP client went away: a background turn goes on, a plain one stops there."""
        self.turns.desk.client_left(turn_id)

    async def cancel(self, heard: str | None = None, heard_index: int | None = None) -> bool:
        """Stop the running turn now (barge-in); does not wait behind the turn lock."""
        return self.turns.cancel(heard, heard_index)

    async def keep_heard(self, message_id: str, heard: str) -> bool:
        """Barge-in after the reply was written (its audio still playing): the stored reply
        keeps only what was heard, marked interrupted, written before this returns."""
        self.idle.touch()
        if self.core.keep_heard(message_id, heard) is None:
            return False
        await self.durable.flush()
        return True

    async def request_confirmation(self, turn_id: str, request: ConfirmRequest) -> bool:
        """Called by the AgentLoop: ask the owner through the turn's stream and wait."""
        return await self.turns.ask(turn_id, request)

    async def answer_confirmation(self, confirmation_id: str, approve: bool,
                                  pin: str | None) -> ConfirmationAnswer | ErrorInfo:
        """Resolve a pending confirmation; a refusal (not found, PIN) comes back as ErrorInfo."""
        return await self.turns.answer(confirmation_id, approve, pin)

    # -- learning -------------------------------------------------------------------------

    def _background(self, ref: Awaitable[Any], what: str) -> None:
        async def run() -> None:
            try:
                await ref
            except Exception as exc:  # noqa: BLE001 - background boundary: learning is best effort
                log.warning("%s failed in session %s: %s", what, self.core.session_id, exc)
                report(f"session.{what}", exc, request={"session": self.core.session_id})

        spawn(run(), self._learning, fresh_context=True)

    async def _end_work_session(self) -> None:
        """A conversation going idle after several tool-using turns was a piece of work:
        distil what it taught before the actor exits."""
        work = self.turns.learning.end_work_session()
        if work is None:
            return
        try:
            await asyncio.wait_for(self.agent.distill.remote(work, self.core.session_id), 120)
        except Exception as exc:  # noqa: BLE001 - idle exit must go on
            report("session.playbook", exc, request={"session": self.core.session_id})

    async def end_work_session(self) -> None:
        """Distil the work session now (tests and the scheduler call this)."""
        await self._end_work_session()


def process_store(url: str) -> Store:
    """One store (engine and connection pool) per process: a pooled actor opens it while it is a
    spare, and keeps it (warm) for the conversation it adopts."""
    store = _stores.get(url)
    if store is None:
        store = _stores[url] = Store.open(url, pool_size=1, max_overflow=2)
    return store


_stores: dict[str, Store] = {}
