"""SessionActor "session:{id}": one per conversation while it is in use.

It owns the conversation's state: one turn at a time (a lock), cancel jumping that queue,
pending confirmations, the rolling summary, and buffered writes flushed on a timer, on every
read, on idle exit and at shutdown.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import ray
from pydantic import BaseModel

from actors.common.names import NAMESPACE, live_actors, live_actors_async
from actors.errors import report
from actors.logmask import install_log_masking
from actors.memory.embed_actor import remote_encoder
from actors.memory.reflection import is_trivial
from actors.memory.repository import memory_block
from actors.common.attachments import expand_message
from actors.session.core import SessionCore, system_prompt
from actors.session.events import TurnEvent
from actors.session.files import render_attachments
from actors.session.loop import MAX_BACKGROUND_STEPS, MAX_CHAT_STEPS
from actors.devices.grants import device_of_server
from actors.devices.people import OWNER_ID, check_pin
from actors.devices.repository import conversation_person
from actors.session.turnlog import TurnLog
from actors.store.models import HEALTH_CHANNEL, OutboxItem, new_id
from actors.store.store import Store

log = logging.getLogger(__name__)

CONFIRM_TIMEOUT = 600.0
PIN_PROBLEMS = {
    "pin_required": "This action needs your PIN.",
    "pin_not_set": "No PIN is set; run `iriis pin set` (or `iriis pin set --user EMAIL`) on the server.",
    "wrong_pin": "That PIN is not right.",
}
# Tool-using turns in one sitting that make a "work session" worth a playbook distillation.
WORK_SESSION_TURNS = 2


class SessionConfig(BaseModel):
    database_url: str
    flush_seconds: float = 180.0
    idle_seconds: float = 600.0


class SessionNotFound(Exception):
    pass


def _refusal(code: str, message: str) -> dict[str, Any]:
    return {"error": code, "message": message}


class _Pending:
    def __init__(self, turn_id: str, request: dict[str, Any]) -> None:
        self.turn_id = turn_id
        self.request = request
        self.future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()


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
        self._turns: dict[str, TurnLog] = {}
        self._waiting = 0
        self._pending: dict[str, _Pending] = {}
        self._summarizing: asyncio.Task[None] | None = None
        self._last_activity = time.monotonic()
        self._timers: list[asyncio.Task[None]] = []
        self._started = time.time()
        # Background learning (reflection, playbook); kept so idle exit waits for it.
        self._learning: set[asyncio.Task[Any]] = set()
        self._encoder_state: tuple[Any] | None = None
        # Tool-using turns since the last playbook distillation: a "work session".
        self._work: list[str] = []

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
                    # The conversation row is written at once so other replicas see it exists;
                    # only its messages wait for the batch flush.
                    await self.core.buffer.flush(self.store)
                self._loaded = True
                loop = asyncio.get_running_loop()
                self._timers = [loop.create_task(self._flush_timer()), loop.create_task(self._idle_timer())]
        self._last_activity = time.monotonic()
        assert self.core.conversation is not None
        return self.core.conversation.channel

    async def _flush_timer(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_seconds)
            await self._safe_flush()

    async def _idle_timer(self) -> None:
        period = min(30.0, self.config.idle_seconds / 4)
        while True:
            await asyncio.sleep(period)
            idle = time.monotonic() - self._last_activity
            busy = self._turn_lock.locked() or self._waiting or self._pending or self._learning or (
                self._summarizing and not self._summarizing.done())
            if not busy and idle >= self.config.idle_seconds:
                await self._end_work_session()
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
        running = bool(turn and not turn.finished)
        return {
            "session_id": self.core.session_id,
            "running": running,
            "turn": turn.progress() if turn else None,
            "queued": self._waiting,
            "pending_confirmations": [
                {"id": cid, "turn_id": p.turn_id, **{k: p.request[k] for k in ("tool", "question", "needs_pin")}}
                for cid, p in self._pending.items()
            ],
            "summary": self.core.conversation.summary if self.core.conversation else "",
            "pending_writes": self.core.buffer.pending,
            # Lets an owner (and a test) see that an idle actor exited and was rebuilt.
            "actor_started": self._started,
        }

    def has_message(self, message_id: str) -> bool:
        return any(m.id == message_id for m in self.core.history)

    async def delete_message(self, message_id: str) -> bool:
        self._last_activity = time.monotonic()
        removed = self.core.remove(message_id)
        await self.flush()
        return removed

    # -- turns ----------------------------------------------------------------------------

    async def chat(self, message: str, background: bool = False, attended: bool = True) -> AsyncIterator[dict[str, Any]]:
        """Stream a turn's events (as dicts). The first one names the turn."""
        if not self._loaded and not await self.open():
            raise SessionNotFound(self.core.session_id)
        turn = TurnLog(new_id(), background=background)
        self._turns = {k: t for k, t in self._turns.items() if not t.finished}
        self._turns[turn.turn_id] = turn
        self._waiting += 1
        # A fresh context: the turn must not inherit the caller's request context, or Ray
        # cancels it (and the AgentLoop call under it) when that caller goes away.
        asyncio.get_running_loop().create_task(self._run(turn, message, attended), context=contextvars.Context())
        async for event in self._stream(turn):
            yield event

    async def follow(self, turn_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Follow a running turn from its start, for a client that reopened."""
        turn = self._turns.get(turn_id) if turn_id else self.current
        if turn is None:
            return
        async for event in self._stream(turn):
            yield event

    async def _stream(self, turn: TurnLog) -> AsyncIterator[dict[str, Any]]:
        """The turn's id first, then its events from the start."""
        yield {"type": "turn", "data": {"turn_id": turn.turn_id}}
        try:
            async for event in turn.follow():
                yield event.model_dump()
        finally:
            # Ray closes this generator when its consumer goes away: a second signal, beside
            # the gateway's, that the client left mid-turn.
            if not turn.finished:
                self.client_left(turn.turn_id)

    def client_left(self, turn_id: str) -> None:
        """The HTTP client went away: a background turn goes on, a plain one stops there."""
        turn = self._turns.get(turn_id)
        if turn is None or turn.finished:
            return
        turn.detached = True
        if not turn.background and turn is self.current and self._current_task:
            turn.cancelled = True
            self._current_task.cancel()

    async def cancel(self, heard: str | None = None, heard_index: int | None = None) -> bool:
        """Stop the running turn now (barge-in); does not wait behind the turn lock."""
        turn, task = self.current, self._current_task
        if turn is None or turn.finished or task is None:
            return False
        turn.cancelled = True
        turn.heard = (heard, heard_index)
        task.cancel()
        return True

    async def request_confirmation(self, turn_id: str, request: dict[str, Any]) -> bool:
        """Called by the AgentLoop: ask the owner through the turn's stream and wait."""
        turn = self._turns.get(turn_id)
        if turn is None or turn.finished:
            return False
        cid = f"{self.core.session_id}.{secrets.token_hex(6)}"
        pending = _Pending(turn_id, request)
        self._pending[cid] = pending
        await turn.push(TurnEvent(type="confirm", data={
            "id": cid, "question": request["question"], "tool": request["tool"],
            "arguments": request["arguments"], "needs_pin": request["needs_pin"],
            "reason": request.get("reason", ""), "expires_in": CONFIRM_TIMEOUT}))
        try:
            return await asyncio.wait_for(asyncio.shield(pending.future), CONFIRM_TIMEOUT)
        except asyncio.TimeoutError:
            return False
        finally:
            self._pending.pop(cid, None)

    async def answer_confirmation(self, confirmation_id: str, approve: bool, pin: str | None) -> dict[str, Any]:
        """Resolve a pending confirmation. Errors come back as {"error": code, "message"}:
        plain data crosses Ray more predictably than custom exceptions."""
        pending = self._pending.get(confirmation_id)
        if pending is None or pending.future.done():
            return _refusal("not_found", "No pending confirmation with that id (answered, expired or unknown).")
        self._last_activity = time.monotonic()
        if approve and pending.request["needs_pin"]:
            # The PIN is the conversation's own person's: a member approves with theirs, and
            # nobody else's PIN (the owner's included) approves an action in their name.
            person, _device = await conversation_person(self.store, self.core.session_id)
            problem = await check_pin(self.store, person, pin)
            if problem:
                return _refusal(problem, PIN_PROBLEMS[problem])
        pending.future.set_result(approve)
        return {"id": confirmation_id, "status": "approved" if approve else "declined"}

    async def _run(self, turn: TurnLog, message: str, attended: bool) -> None:
        try:
            async with self._turn_lock:
                self._waiting -= 1
                self.current, self._current_task = turn, asyncio.current_task()
                self._last_activity = time.monotonic()
                await self._turn(turn, message, attended)
        except asyncio.CancelledError:
            self._finish_cancelled(turn)
            await turn.push(TurnEvent(type="done", data=self._done_data(None, turn.heard_text(), cancelled=True)))
        except Exception as exc:  # noqa: BLE001 - a turn's top boundary: the client gets a plain error
            log.exception("turn failed in session %s", self.core.session_id)
            report("session.turn", exc, request={"session": self.core.session_id})
            await turn.push(TurnEvent(type="error", data={
                "code": "internal_error",
                "message": "Something went wrong while answering; your message was saved. Please try again.",
            }))
        finally:
            for cid, pending in list(self._pending.items()):
                if pending.turn_id == turn.turn_id and not pending.future.done():
                    pending.future.set_result(False)
            self._current_task = None
            self._last_activity = time.monotonic()
            await self._after_turn(turn)

    def _finish_cancelled(self, turn: TurnLog) -> None:
        heard = turn.heard_text()
        if heard:
            self.core.add("assistant", heard, meta={"interrupted": True})

    def _done_data(self, message_id: str | None, text: str, cancelled: bool = False) -> dict[str, Any]:
        return {"session_id": self.core.session_id, "message_id": message_id, "text": text,
                "cancelled": cancelled}

    async def _turn(self, turn: TurnLog, message: str, attended: bool) -> None:
        self.core.add("user", message)
        person, device = await conversation_person(self.store, self.core.session_id)
        # Memory is the owner's: other people's conversations neither see nor feed it.
        memory = (await memory_block(self.store, message, session_id=self.core.session_id,
                                     encoder=await self._encoder())
                  if person == OWNER_ID else "")
        messages = self.core.prompt(system_prompt() + (f"\n\n{memory}" if memory else ""))
        rendered = await render_attachments(self.store, message, turn)
        if rendered:
            # The model reads the files' contents; the stored message stays as the owner sent it.
            messages[-1] = {"role": "user", "content": expand_message(message, rendered)}
        request = {
            "messages": messages, "session_id": self.core.session_id, "turn_id": turn.turn_id,
            "session": ray.get_runtime_context().current_actor, "attended": attended,
            "max_steps": MAX_BACKGROUND_STEPS if turn.background else MAX_CHAT_STEPS,
            # Whose turn it is, read once here: the AgentLoop offers that person's device tools.
            "scope": {"person": person, "device": device},
        }
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
        if result is not None and person == OWNER_ID:
            turn.exchange = {"session_id": self.core.session_id, "user": message, "reply": text,
                             "tools": tools or []}

    async def _after_turn(self, turn: TurnLog) -> None:
        if turn.background and turn.detached and not turn.cancelled:
            # Nobody was watching when it finished: queue a notification for the owner.
            first = turn.first_sentence() or "Your request is finished."
            try:
                await self.store.add_outbox(OutboxItem(
                    kind="turn_done", session_id=self.core.session_id, title="Iriis finished",
                    body=first, data={"turn_id": turn.turn_id}))
            except Exception as exc:  # noqa: BLE001 - a lost notification must not lose the turn
                report("session.outbox", exc, request={"session": self.core.session_id})
        if turn.exchange is not None and not turn.cancelled:
            self._learn(turn)
        if self.core.to_fold() and (self._summarizing is None or self._summarizing.done()):
            self._summarizing = asyncio.get_running_loop().create_task(self._summarize())

    # -- learning -------------------------------------------------------------------------

    async def _encoder(self) -> Any:
        """The shared sentence encoder (paraphrase-aware memory), or None to stay lexical."""
        if self._encoder_state is None:
            try:
                self._encoder_state = (await remote_encoder(),)
            except Exception as exc:  # noqa: BLE001 - memory must never cost a reply
                log.warning("sentence encoder unavailable: %s", exc)
                self._encoder_state = (None,)
        return self._encoder_state[0]

    def _learn(self, turn: TurnLog) -> None:
        """After the reply is delivered: reflect on the exchange; a finished background task
        also distils playbook rules, and tool-using turns add to the work session."""
        exchange = turn.exchange or {}
        if self.core.conversation is not None and self.core.conversation.channel == HEALTH_CHANNEL:
            return
        if any(device_of_server(str(t.get("source") or "")) is not None for t in exchange.get("tools", [])):
            # Device output stays in its person's conversation: it never becomes shared memory.
            return
        # Checked here too so a chit-chat turn costs no call at all.
        if not is_trivial(exchange.get("user", ""), exchange.get("reply", ""), exchange.get("tools")):
            self._background(self.agent.reflect.remote(exchange), "reflection")
        if exchange.get("tools"):
            work = work_summary(exchange)
            if turn.background:
                self._background(self.agent.distill.remote(work, self.core.session_id), "playbook")
            else:
                self._work.append(work)

    def _background(self, ref: Any, what: str) -> None:
        async def run() -> None:
            try:
                await ref
            except Exception as exc:  # noqa: BLE001 - background boundary: learning is best effort
                log.warning("%s failed in session %s: %s", what, self.core.session_id, exc)
                report(f"session.{what}", exc, request={"session": self.core.session_id})

        task = asyncio.get_running_loop().create_task(run(), context=contextvars.Context())
        self._learning.add(task)
        task.add_done_callback(self._learning.discard)

    async def _end_work_session(self) -> None:
        """A conversation going idle after several tool-using turns was a piece of work:
        distil what it taught before the actor exits."""
        if len(self._work) < WORK_SESSION_TURNS:
            self._work.clear()
            return
        work, self._work = "\n\n".join(self._work[-6:]), []
        try:
            await asyncio.wait_for(self.agent.distill.remote(work, self.core.session_id), 120)
        except Exception as exc:  # noqa: BLE001 - idle exit must go on
            report("session.playbook", exc, request={"session": self.core.session_id})

    async def end_work_session(self) -> None:
        """Distil the work session now (tests and the scheduler call this)."""
        await self._end_work_session()

    async def _summarize(self) -> None:
        """Fold what left the verbatim window into the rolling summary, in the background."""
        fold = self.core.to_fold()
        if not fold or self.core.conversation is None:
            return
        try:
            summary = await self.agent.summarize.remote(
                self.core.conversation.summary, [{"role": m.role, "content": m.content} for m in fold])
        except Exception as exc:  # noqa: BLE001 - background boundary: the next turn tries again
            log.exception("summary failed in session %s", self.core.session_id)
            report("session.summary", exc, request={"session": self.core.session_id})
            return
        self.core.apply_summary(summary, fold[-1].seq)


def work_summary(exchange: dict[str, Any]) -> str:
    """A turn as a playbook prompt reads it: the ask, each tool and its outcome, the reply."""
    calls = "; ".join(f"{t.get('name')} -> {t.get('status', '')}: {str(t.get('result', ''))[:160]}"
                      for t in exchange.get("tools", []))
    return f"Asked: {exchange.get('user', '')[:600]}\nTools: {calls}\nReplied: {exchange.get('reply', '')[:600]}"


def live_sessions() -> dict[str, Any]:
    """Handles of the session actors alive now, by session id (blocking: for the CLI)."""
    return live_actors("session")


async def live_sessions_async() -> dict[str, Any]:
    return await live_actors_async("session")


def session_actor(session_id: str, config: SessionConfig, agent: Any) -> Any:
    return SessionActor.options(
        name=f"session:{session_id}", namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
    ).remote(session_id, config, agent)
