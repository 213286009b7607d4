"""One conversation's turns, without Ray: the core both the SessionActor and the test harness
build, so a test of the harness is a test of the actor's own wiring.

A turn: the person's message joins the history, the prompt is prepared, the agent's events are
relayed into the turn's log, the reply is saved and `Done` ends it (`turns`); then a notice for
a background turn nobody watched, what the turn teaches memory (`learning`) and the rolling
summary. What differs between the actor and a test is reached through `TurnPorts`: how the
prompt is prepared (the store, memory, tools), where the agent's events come from (the AgentLoop
deployment or a script), where notices, learning, summaries and failures go, and how a PIN is
checked. Durability (`DurableTurns`) is optional: the actor always has it, a test may.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass

from actors.common.background import spawn
from actors.common.errors import ErrorInfo
from actors.devices.people import OWNER_ID
from actors.session import confirmations, turns
from actors.session.confirmations import ConfirmationAnswer, ConfirmationBook, PinCheck, SessionRefusal
from actors.session.core import SessionCore
from actors.session.durable import DurableTurns
from actors.session.events import Cancel, ConfirmRequest, TurnEvent, TurnRequest
from actors.session.learning import Learning, LearningPlan
from actors.session.turnlog import TurnLog
from actors.session.turns import TurnDesk
from actors.store.models import OutboxItem


@dataclass(frozen=True)
class TurnOptions:
    """How a message is to be handled: as a background task, with the owner there to confirm,
    from outside content (`sources` names it: the turn is tainted from its start), or as work
    only (no conversation memory in the prompt)."""

    background: bool = False
    attended: bool = True
    sources: tuple[str, ...] = ()
    work_only: bool = False


class TurnPorts(ABC):
    """What a turn needs from outside its conversation. Each side says where the agent's events
    come from and how a PIN is checked; the other defaults are a test's: nothing is sent
    anywhere, nothing is learned, no summary is written."""

    async def prepare(self, core: SessionCore, turn: TurnLog, message: str,
                      options: TurnOptions) -> tuple[TurnRequest, int]:
        """The AgentLoop's request for this turn (the history as a prompt) and whose turn it is."""
        request = TurnRequest(messages=core.prompt("system"), session_id=core.session_id,
                              turn_id=turn.turn_id, attended=options.attended)
        return request, OWNER_ID

    @abstractmethod
    def events(self, request: TurnRequest, sent: Callable[[], object]) -> AsyncIterator[TurnEvent]:
        """The agent's events for `request`; `sent` (the turn's first write) is called once the
        request is on its way, also when sending failed."""

    def failed(self, exc: Exception, what: str = "turn") -> None:
        """`what` broke with `exc`: a turn (its client gets a plain error) or the summary."""

    async def notify(self, item: OutboxItem) -> None:
        """A background turn finished with nobody watching: tell the owner."""

    def learn(self, plan: Learning) -> None:
        """What the turn just finished teaches (reflection, playbook distillation)."""

    # The rolling summary with new messages folded in (summary, messages) -> summary; a side
    # without one (None) never folds the history.
    summarize: Callable[[str, list[dict[str, str]]], Awaitable[str]] | None = None

    @abstractmethod
    def pins(self) -> tuple[Callable[[], Awaitable[int]], PinCheck]:
        """Whose conversation this is, and whether a PIN is that person's."""

    def touch(self) -> None:
        """The conversation was used now (its idle clock starts again)."""


class TurnEngine:
    """Turns one at a time, cancel jumping the queue, confirmations asked on the turn's
    stream, and the after-turn work, for one conversation."""

    def __init__(self, core: SessionCore, ports: TurnPorts, book: ConfirmationBook | None = None,
                 durable: DurableTurns | None = None, memory: bool = True) -> None:
        self.core = core
        self.ports = ports
        self.desk = TurnDesk()
        self.book = book if book is not None else ConfirmationBook(core.session_id)
        self.learning = LearningPlan()
        self.durable = durable
        # Off: nothing the turns say is kept to learn from (IRIIS_MEMORY=off).
        self.memory = memory
        self.tasks: set[asyncio.Task[None]] = set()      # the turns, after-turn work included
        self.turned = asyncio.Event()                    # a turn has ended here
        self.summarizing: asyncio.Task[None] | None = None

    # -- turns --------------------------------------------------------------------------------

    def start(self, message: str, options: TurnOptions = TurnOptions()) -> TurnLog:
        """Queue a turn and return its log at once; the turn runs as its own task, in a fresh
        context (Ray would cancel it, and the agent call under it, when the caller went away)."""
        turn = self.desk.open(options.background)
        spawn(self._run(turn, message, options), self.tasks, fresh_context=True)
        return turn

    async def follow(self, turn: TurnLog) -> AsyncIterator[TurnEvent]:
        async for event in self.desk.follow(turn):
            yield event

    def cancel(self, heard: str | None = None, heard_index: int | None = None) -> bool:
        """Stop the running turn now (barge-in), without waiting behind the turn lock."""
        return self.desk.cancel(Cancel(heard=heard, heard_index=heard_index))

    def working(self) -> bool:
        """A turn, a confirmation or a summary under way."""
        return bool(self.desk.busy or len(self.book) or (self.summarizing and not self.summarizing.done()))

    async def _run(self, turn: TurnLog, message: str, options: TurnOptions) -> None:
        self.ports.touch()
        await turns.conduct(self.desk, self.core, self.book, turn,
                            lambda: self._turn(turn, message, options), self.ports.failed)
        self.ports.touch()
        self.turned.set()
        await self._after_turn(turn)

    async def _turn(self, turn: TurnLog, message: str, options: TurnOptions) -> None:
        self.core.add("user", message, meta={"sources": list(options.sources)} if options.sources else None)
        try:
            request, person = await self.ports.prepare(self.core, turn, message, options)
        except BaseException:
            self._begin(turn)
            raise
        # Closed at once when the reply ends early (an error), which stops the agent's stream.
        async with aclosing(self.ports.events(request, lambda: self._begin(turn))) as events:
            await turns.reply(self.core, turn, message, events, learn=person == OWNER_ID and self.memory)

    def _begin(self, turn: TurnLog) -> None:
        """The turn's first write (the person's message, a pending reply row), not awaited:
        the turn's end waits for it, so nothing reaches `done` unwritten."""
        if self.durable is not None:
            self.durable.begin(turn)

    async def _after_turn(self, turn: TurnLog) -> None:
        item = turns.notice(turn, self.core.session_id)
        if item is not None:
            await self.ports.notify(item)
        channel = self.core.conversation.channel if self.core.conversation else None
        self.ports.learn(self.learning.after_turn(turn.exchange, turn.background, turn.cancelled, channel))
        if self.ports.summarize is not None and self.core.to_fold() and (self.summarizing is None or self.summarizing.done()):
            self.summarizing = spawn(self._summarize(), self.tasks)

    async def _summarize(self) -> None:
        """Fold what left the verbatim window into the rolling summary, in the background."""
        try:
            assert self.ports.summarize is not None
            await turns.fold_summary(self.core, self.ports.summarize)
        except Exception as exc:  # noqa: BLE001 - background boundary: folded again after the next turn
            self.ports.failed(exc, "summary")

    # -- confirmations ------------------------------------------------------------------------

    async def ask(self, turn_id: str, request: ConfirmRequest) -> bool:
        """The agent asks before an action: the question goes out on the turn's stream."""
        return await turns.ask(self.desk, self.book, turn_id, request)

    async def answer(self, confirmation_id: str, approve: bool, pin: str | None) -> ConfirmationAnswer | ErrorInfo:
        """Resolve a pending confirmation; a refusal (not found, PIN) comes back as ErrorInfo."""
        self.ports.touch()
        person, check = self.ports.pins()
        try:
            return await confirmations.answer(self.book, confirmation_id, approve, pin, person, check)
        except SessionRefusal as exc:
            return exc.info()
