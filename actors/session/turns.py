"""A conversation's turns without Ray: one at a time, cancel jumping that queue, the agent's
events relayed into the turn's log, the reply saved, and the notice for an unwatched turn.

The SessionActor wires these to Ray (the AgentLoop's stream, the store); tests drive them
directly through `tests/actor_harness.py`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from actors.common.attachments import expand_message
from actors.common.provenance import SYSTEM_TEXT, Provenance, untrusted
from actors.common.trace import mark
from actors.devices.people import OWNER_ID
from actors.devices.repository import conversation_person
from actors.memory.repository import MemoryChoice, choose_memory, mark_used, read_memory
from actors.session.confirmations import ConfirmationBook
from actors.session.core import SessionCore, system_prompt
from actors.session.events import (
    MAX_BACKGROUND_STEPS,
    MAX_CHAT_STEPS,
    Cancel,
    ConfirmRequest,
    Done,
    TurnError,
    TurnEvent,
    TurnRequest,
    TurnResult,
    TurnScope,
    TurnStarted,
    message_sources,
    said_by,
)
from actors.session.files import render_attachments
from actors.session.turnlog import TurnLog
from actors.store.models import OutboxItem, new_id
from actors.store.store import Store

FAILED_MESSAGE = "Something went wrong while answering; your message was saved. Please try again."


class TurnDesk:
    """Which turn runs, which wait, and how one is stopped."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.turns: dict[str, TurnLog] = {}
        self.current: TurnLog | None = None
        self.task: asyncio.Task[Any] | None = None
        self.waiting = 0

    @property
    def busy(self) -> bool:
        return self.lock.locked() or self.waiting > 0

    def open(self, background: bool = False) -> TurnLog:
        """A new turn, queued; finished turns are forgotten."""
        turn = TurnLog(new_id(), background=background)
        self.turns = {k: t for k, t in self.turns.items() if not t.finished}
        self.turns[turn.turn_id] = turn
        self.waiting += 1
        return turn

    def get(self, turn_id: str | None) -> TurnLog | None:
        return self.turns.get(turn_id) if turn_id else self.current

    @asynccontextmanager
    async def running(self, turn: TurnLog) -> AsyncIterator[None]:
        """Hold the turn lock for `turn`: the calling task is the one `cancel` stops."""
        async with self.lock:
            self.waiting -= 1
            self.current, self.task = turn, asyncio.current_task()
            try:
                yield
            finally:
                self.task = None

    def cancel(self, control: Cancel) -> bool:
        """Stop the running turn now, without waiting behind the lock."""
        turn, task = self.current, self.task
        if turn is None or turn.finished or task is None:
            return False
        turn.cancelled = True
        turn.heard = (control.heard, control.heard_index)
        task.cancel()
        return True

    async def follow(self, turn: TurnLog) -> AsyncIterator[TurnEvent]:
        """The turn's id first, then its events from the start."""
        yield TurnStarted(turn_id=turn.turn_id)
        try:
            async for event in turn.follow():
                yield event
        finally:
            # Ray closes this generator when its consumer goes away: a second signal, beside
            # the gateway's, that the client left mid-turn.
            if not turn.finished:
                self.client_left(turn.turn_id)

    def client_left(self, turn_id: str) -> None:
        """The client went away: a background turn goes on, a plain one stops there."""
        turn = self.turns.get(turn_id)
        if turn is None or turn.finished:
            return
        turn.detached = True
        if not turn.background and turn is self.current and self.task:
            turn.cancelled = True
            self.task.cancel()


async def prepare(store: Store, core: SessionCore, turn: TurnLog, message: str, attended: bool,
                  encoder: Callable[[], Awaitable[Any]], session: Any = None,
                  sources: list[str] | None = None, work_only: bool = False, memory: bool = True,
                  later: Callable[[Awaitable[Any]], None] | None = None) -> tuple[TurnRequest, int]:
    """The AgentLoop's request for this turn, and whose turn it is. The user's message is
    already in `core`'s history; `session` is the handle the AgentLoop asks confirmations of.

    Every message carries its provenance: the owner's words, the system's text, or what is
    neither (an attachment's text, a memory item or summary learned from outside content, and
    `sources`: what a caller says the message itself came from, such as `relay:<uid> from
    <name>` for a relay wake-up, `camera:ocr` for the camera hand-off or `task:<id>` for a
    scheduled task's run). Only untrusted sources may be named that way: a caller cannot make
    a message more trusted than the owner's own words.

    Whose conversation it is and what memory holds are read on one connection, one statement
    after another: a conversation's process keeps a single pooled connection, and reading them
    at once opened a second one for every turn (its cost: benchmarks/MEASURED.md). Memory is the
    owner's: other people's conversations neither see nor feed it, so theirs read none. Marking
    the chosen items used is handed to `later` when given (a counter and a log line, off the
    path to the first sentence). With `memory` off nothing is read from it."""
    now = time.time()
    async with store.engine.connect() as conn:
        person, device = await conversation_person(store, core.session_id, conn)
        read = await read_memory(store, conn) if person == OWNER_ID and memory else None
    mark("session.read", core.session_id)
    chosen = (await choose_memory(store, message, now, encoder=await encoder(), read=read) if read is not None
              else MemoryChoice("", [], []))
    memory, outside = chosen.block, chosen.outside
    if chosen.used:
        marking = mark_used(store, chosen.used, now, message, core.session_id)
        if later is None:
            await marking
        else:
            later(marking)
    messages = core.prompt(system_prompt() + (f"\n\n{memory}" if memory else ""))
    # Items learned from outside content are quoted in the block; reading them taints the turn.
    messages[0].provenance = [SYSTEM_TEXT, *(Provenance.memory(i) for i in outside)]
    files: list[Provenance] = []
    rendered = await render_attachments(store, message, turn, files)
    mark("session.rendered", core.session_id)
    user = messages[-1]
    if rendered:
        # The model reads the files' contents; the stored message stays as the owner sent it.
        user.content = expand_message(message, rendered)
    user.provenance = said_by("user", [*files, *(sources or [])])
    turn.sources = [str(p) for p in untrusted(message_sources(messages))]
    request = TurnRequest(
        messages=messages, session_id=core.session_id, turn_id=turn.turn_id, session=session, attended=attended,
        max_steps=MAX_BACKGROUND_STEPS if turn.background else MAX_CHAT_STEPS,
        # Whose turn it is, read once here: the AgentLoop offers that person's device tools.
        scope=TurnScope(person=person, device=device), work_only=work_only)
    return request, person


async def ask(desk: TurnDesk, book: ConfirmationBook, turn_id: str, request: ConfirmRequest) -> bool:
    """The AgentLoop asks before an action: the question goes out on the turn's stream and the
    answer (False once the turn is over or the wait times out) comes back."""
    turn = desk.turns.get(turn_id)
    if turn is None or turn.finished:
        return False
    pending = book.open(turn_id, request)
    await turn.push(book.event(pending))
    return await book.wait(pending)


async def relay(events: AsyncIterator[TurnEvent], turn: TurnLog) -> TurnResult | None:
    """The agent's events into the turn's log; its result, or None after an error."""
    result: TurnResult | None = None
    async for event in events:
        if isinstance(event, TurnResult):
            result = event
            continue
        await turn.push(event)
        if isinstance(event, TurnError):
            return None
    return result


async def reply(core: SessionCore, turn: TurnLog, message: str, events: AsyncIterator[TurnEvent],
                learn: bool) -> None:
    """Relay the agent's events, then save the reply and end the turn with `Done` (an agent
    error has ended it already, and nothing is saved)."""
    result = await relay(events, turn)
    if turn.finished:
        return
    await turn.push(save_reply(core, turn, result, message, learn))


async def conduct(desk: TurnDesk, core: SessionCore, book: ConfirmationBook, turn: TurnLog,
                  body: Callable[[], Awaitable[None]], on_failure: Callable[[Exception], None]) -> None:
    """Run `body` as the turn once the lock is free. However it ends, the turn's log ends:
    cancelled (what was heard is kept), failed (a plain error), or by `body` itself; and the
    confirmations it left pending are declined."""
    try:
        async with desk.running(turn):
            await body()
    except asyncio.CancelledError:
        await turn.push(save_cancelled(core, turn))
    except Exception as exc:  # noqa: BLE001 - a turn's top boundary: the client gets a plain error
        on_failure(exc)
        await turn.push(failed())
    finally:
        book.decline_turn(turn.turn_id)


def save_reply(core: SessionCore, turn: TurnLog, result: TurnResult | None, message: str,
               learn: bool) -> Done:
    """Save the reply and say the turn is done; with `learn`, keep the exchange to learn from."""
    text = result.text if result else ""
    tools = (result.tools if result else None) or None
    sources = (result.sources if result else None) or None
    meta = {k: v for k, v in (("tools", tools), ("sources", sources)) if v} or None
    saved = core.add("assistant", text, meta=meta)
    if result is not None and learn:
        turn.exchange = {"session_id": core.session_id, "user": message, "reply": text, "tools": tools or [],
                         "sources": sources or []}
    return Done(session_id=core.session_id, message_id=saved.id, text=text)


def save_cancelled(core: SessionCore, turn: TurnLog) -> Done:
    """Keep only what the owner heard of an interrupted reply."""
    heard = turn.heard_text()
    if heard:
        # Cut short, it still keeps what the turn had read: it taints later turns as a whole one would.
        meta: dict[str, Any] = {"interrupted": True}
        if turn.sources:
            meta["sources"] = list(turn.sources)
        core.add("assistant", heard, meta=meta)
    return Done(session_id=core.session_id, message_id=None, text=heard, cancelled=True)


def failed() -> TurnError:
    return TurnError.of("internal_error", FAILED_MESSAGE)


def notice(turn: TurnLog, session_id: str) -> OutboxItem | None:
    """A background turn that finished with nobody watching: a notification for the owner."""
    if not (turn.background and turn.detached and not turn.cancelled):
        return None
    return OutboxItem(kind="turn_done", session_id=session_id, title="Iriis finished",
                      body=turn.first_sentence() or "Your request is finished.", data={"turn_id": turn.turn_id})


async def fold_summary(core: SessionCore, summarize: Callable[[str, list[dict[str, Any]]], Awaitable[str]]) -> bool:
    """Fold what left the verbatim window into the rolling summary; False if nothing had to."""
    fold = core.to_fold()
    if not fold or core.conversation is None:
        return False
    summary = await summarize(core.conversation.summary, [{"role": m.role, "content": m.content} for m in fold])
    # A reply to a turn that read outside content may carry it: the summary stays marked.
    sources = [s for m in fold for s in ((m.meta or {}).get("sources") or [])]
    core.apply_summary(summary, fold[-1].seq, sources)
    return True


def state(core: SessionCore, desk: TurnDesk, book: ConfirmationBook, started: float) -> dict[str, Any]:
    """What the session's state route shows: the running turn, the queue, pending confirmations."""
    turn = desk.current
    return {
        "session_id": core.session_id,
        "running": bool(turn and not turn.finished),
        "turn": turn.progress() if turn else None,
        "queued": desk.waiting,
        "pending_confirmations": book.listing(),
        "summary": core.conversation.summary if core.conversation else "",
        "pending_writes": core.buffer.pending,
        # Lets an owner (and a test) see that an idle actor exited and was rebuilt.
        "actor_started": started,
    }
