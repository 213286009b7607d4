"""SessionActor "session:{id}": one per conversation while it is in use.

It owns the conversation's state and is only its Ray plumbing: the policy lives in Ray-free
cores with their own tests. `turns` (one turn at a time, cancel jumping that queue, the agent's
events relayed, the reply saved), `confirmations` (pending confirmations and the PIN rule),
`learning` (what a turn teaches memory) and `IdleWatch` (when to exit).

Durable before done: a turn writes the person's message and a pending reply row when it starts,
updates that row as sentences go out (one small upsert at a time, off the event path), and
writes the final reply before `done` is published. Only what can be rebuilt (the rolling
summary, the `updated` stamp) waits for the flush timer. Killed mid-turn, the actor restarts
(`max_restarts`) and rebuilds from the store, where the pending row becomes an interrupted reply.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, TYPE_CHECKING

import ray
from pydantic import BaseModel

from actors.common.background import spawn
from actors.common.errors import ErrorInfo, IriisError
from actors.common.idle import IdleWatch
from actors.common.trace import mark
from actors.devices.people import OWNER_ID
from actors.logmask import install_log_masking
from actors.recent_errors import report
from actors.session import confirmations, turns
from actors.session.confirmations import (
    ConfirmationAnswer,
    ConfirmationBook,
    SessionRefusal,
)
from actors.session.core import SessionCore
from actors.session.durable import DurableTurns
from actors.session.events import Cancel, ConfirmRequest, Sentence, TurnEvent, TurnRequest
from actors.session.learning import LearningPlan
# The adoption record and the live-handle helpers live in slots.py; imported here too, where
# callers (the gateway's context, the CLI) have always found them.
from actors.session.slots import adopted_session, live_sessions, live_sessions_async, remember_adoption  # noqa: F401
from actors.session.turnlog import TurnLog
from actors.session.turns import TurnDesk
from actors.session.warm import shared_encoder, warm_process
from actors.store.store import Store

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger(__name__)
# The longest a turn's first write waits for its AgentLoop call to reach a replica.
SEND_WAIT = 0.02
# A released actor ends itself this long after answering (the pool ends it at once anyway).
RELEASE_EXIT_DELAY = 1.0
# The longest a conversation asked to make room waits for its reflection to finish; past it the
# conversation stays, and the newcomer is told when to come back.
RELEASE_LEARNING_WAIT = 20.0


async def sent_or_later(stream: Any, timeout: float) -> None:
    """Return once Serve has handed `stream`'s request to a replica, or after `timeout` (queues
    full, or a handle that cannot say), whichever is first. Never raises and never cancels the
    wait (that would cancel the request): the stream itself reports a call that failed."""
    try:
        assigned = asyncio.ensure_future(stream._to_object_ref_gen())
    except Exception:  # noqa: BLE001 - an older or other handle: no wait
        return
    assigned.add_done_callback(lambda f: f.cancelled() or f.exception())
    await asyncio.wait({assigned}, timeout=timeout)


class SessionConfig(BaseModel):
    database_url: str
    flush_seconds: float = 180.0
    idle_seconds: float = 600.0
    # Warm spare actors the pool keeps for new conversations, and a custom Ray resource naming
    # the nodes they should prefer (any node when none is alive); see actors/session/pool.py.
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
        self.desk = TurnDesk()
        self.confirmations = ConfirmationBook(session_id)
        self.learning = LearningPlan()
        self.idle = IdleWatch(self.config.idle_seconds)
        self._loaded = False
        self._load_lock = asyncio.Lock()
        self._summarizing: asyncio.Task[None] | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._started = time.time()
        # Background learning (reflection, playbook); kept so idle exit waits for it.
        self._learning: set[asyncio.Task[Any]] = set()
        self._turned = asyncio.Event()   # a turn has ended here (the pool waits for it)
        self.durable = DurableTurns(self.core, self.store, report)

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
        return bool(self.desk.busy or len(self.confirmations)
                    or (self._summarizing and not self._summarizing.done()))

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
        """A spare from the session pool (actors/session/pool.py) takes on `session_id` before its
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
            await asyncio.wait_for(self._turned.wait(), timeout)
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
        return {**turns.state(self.core, self.desk, self.confirmations, self._started), "learning": len(self._learning)}

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
        turn = self.desk.open(background)
        # A fresh context: the turn must not inherit the caller's request context, or Ray
        # cancels it (and the AgentLoop call under it) when that caller goes away.
        asyncio.get_running_loop().create_task(self._run(turn, message, attended, sources, work_only), context=contextvars.Context())
        async for event in self.desk.follow(turn):
            yield event

    async def follow(self, turn_id: str | None = None) -> AsyncIterator[TurnEvent]:
        """Follow a running turn from its start, for a client that reopened."""
        turn = self.desk.get(turn_id)
        if turn is None:
            return
        async for event in self.desk.follow(turn):
            yield event

    def client_left(self, turn_id: str) -> None:
        """The HTTP client went away: a background turn goes on, a plain one stops there."""
        self.desk.client_left(turn_id)

    async def cancel(self, heard: str | None = None, heard_index: int | None = None) -> bool:
        """Stop the running turn now (barge-in); does not wait behind the turn lock."""
        return self.desk.cancel(Cancel(heard=heard, heard_index=heard_index))

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
        return await turns.ask(self.desk, self.confirmations, turn_id, request)

    async def answer_confirmation(self, confirmation_id: str, approve: bool,
                                  pin: str | None) -> ConfirmationAnswer | ErrorInfo:
        """Resolve a pending confirmation; a refusal (not found, PIN) comes back as ErrorInfo."""
        self.idle.touch()
        person, check = confirmations.store_pins(self.store, self.core.session_id)
        try:
            return await confirmations.answer(self.confirmations, confirmation_id, approve, pin, person, check)
        except SessionRefusal as exc:
            return exc.info()

    async def _run(self, turn: TurnLog, message: str, attended: bool, sources: list[str] | None = None,
                   work_only: bool = False) -> None:
        self.idle.touch()
        await turns.conduct(self.desk, self.core, self.confirmations, turn,
                            lambda: self._turn(turn, message, attended, sources, work_only), self._turn_failed)
        self.idle.touch()
        self._turned.set()
        await self._after_turn(turn)

    def _turn_failed(self, exc: Exception) -> None:
        log.exception("turn failed in session %s", self.core.session_id)
        report("session.turn", exc, request={"session": self.core.session_id})

    async def _turn(self, turn: TurnLog, message: str, attended: bool, sources: list[str] | None = None,
                    work_only: bool = False) -> None:
        self.core.add("user", message, meta={"sources": sources} if sources else None)
        # The person's message (and the pending reply) go to the store beside the model's work:
        # the write starts once the prompt's reads are done, as the AgentLoop call goes out (run
        # at once, it slowed those reads by ~5 ms). The turn's end waits for that write
        # (DurableTurns.settle), so nothing reaches `done` unwritten.
        mark("session.begun", self.core.session_id)
        try:
            request, person = await turns.prepare(self.store, self.core, turn, message, attended, shared_encoder,
                                                  session=ray.get_runtime_context().current_actor, sources=sources,
                                                  work_only=work_only, memory=self.config.memory,
                                                  later=lambda work: self._background(work, "memory_use"))
        except BaseException:
            self.durable.begin(turn)
            raise
        mark("session.prepared", self.core.session_id)
        # Closed at once when the reply ends early (an error), which stops the AgentLoop's stream.
        async with aclosing(self._agent_events(request, lambda: self.durable.begin(turn))) as events:
            await turns.reply(self.core, turn, message, events, learn=person == OWNER_ID and self.config.memory)

    async def _agent_events(self, request: TurnRequest, sent: Callable[[], object]) -> AsyncIterator[TurnEvent]:
        """The AgentLoop's stream; stopped there too if this turn stops reading early. `sent`
        (the turn's first write) runs once a replica has the request, or after at most
        SEND_WAIT: begun before, its statement building and commit held this event loop while
        Serve's router was sending the request (2.5 ms more to the AgentLoop)."""
        stream = None
        complete = False
        try:
            try:
                stream = self.agent.options(stream=True).run.remote(request)
                await sent_or_later(stream, SEND_WAIT)
            finally:
                sent()  # also when the call failed or the turn was stopped in those milliseconds
            async for event in stream:
                if isinstance(event, Sentence):
                    mark("session.sentence", self.core.session_id)
                yield event
            complete = True
        finally:
            if not complete and stream is not None:
                stream.cancel()

    async def _after_turn(self, turn: TurnLog) -> None:
        item = turns.notice(turn, self.core.session_id)
        if item is not None:
            try:
                await self.store.add_outbox(item)
            except Exception as exc:  # noqa: BLE001 - a lost notification must not lose the turn
                report("session.outbox", exc, request={"session": self.core.session_id})
        channel = self.core.conversation.channel if self.core.conversation else None
        plan = self.learning.after_turn(turn.exchange, turn.background, turn.cancelled, channel)
        if plan.reflect is not None:
            self._background(self.agent.reflect.remote(plan.reflect), "reflection")
        if plan.distill is not None:
            self._background(self.agent.distill.remote(plan.distill, self.core.session_id), "playbook")
        if self.core.to_fold() and (self._summarizing is None or self._summarizing.done()):
            self._summarizing = asyncio.get_running_loop().create_task(self._summarize())

    # -- learning -------------------------------------------------------------------------

    def _background(self, ref: Any, what: str) -> None:
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
        work = self.learning.end_work_session()
        if work is None:
            return
        try:
            await asyncio.wait_for(self.agent.distill.remote(work, self.core.session_id), 120)
        except Exception as exc:  # noqa: BLE001 - idle exit must go on
            report("session.playbook", exc, request={"session": self.core.session_id})

    async def end_work_session(self) -> None:
        """Distil the work session now (tests and the scheduler call this)."""
        await self._end_work_session()

    async def _summarize(self) -> None:
        """Fold what left the verbatim window into the rolling summary, in the background."""
        try:
            await turns.fold_summary(self.core, self.agent.summarize.remote)
        except Exception as exc:
            log.exception("summary failed in session %s", self.core.session_id)
            report("session.summary", exc, request={"session": self.core.session_id})


def process_store(url: str) -> Store:
    """One store (engine and connection pool) per process: a pooled actor opens it while it is a
    spare, and keeps it (warm) for the conversation it adopts."""
    store = _stores.get(url)
    if store is None:
        store = _stores[url] = Store.open(url, pool_size=1, max_overflow=2)
    return store


_stores: dict[str, Store] = {}
