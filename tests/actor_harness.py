"""An in-process harness for the session actor's cores: a conversation's turns driven the way
the SessionActor drives them (`actors.session.turns`, `confirmations`, `learning`), with a
scripted agent in place of the AgentLoop, and no Ray and no store. Each test takes milliseconds.

    agent = FakeAgent([Sentence(text="Hi.", index=0), TurnResult(text="Hi.")])
    harness = await run_core_test(agent, send=["hello"], expect=[["turn", "sentence", "done"]])

A script is a list of steps: a typed event is yielded as the AgentLoop would; `Ask` asks for a
confirmation and waits for the answer; `Hold` parks the agent until the test releases it (to
cancel the turn, or leave it, mid-way); `Fail` raises inside the turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors.common.errors import ErrorInfo
from actors.devices.people import OWNER_ID
from actors.session import confirmations, turns
from actors.session.confirmations import (
    CONFIRM_TIMEOUT,
    ConfirmationAnswer,
    ConfirmationBook,
    SessionRefusal,
)
from actors.session.core import SessionCore
from actors.session.events import (
    Cancel,
    ConfirmRequest,
    ToolActivity,
    TurnEvent,
    TurnRequest,
)
from actors.session.learning import Learning, LearningPlan
from actors.session.turnlog import TurnLog
from actors.session.turns import TurnDesk

DEADLINE = 5.0


@dataclass
class Ask:
    """The agent asks to confirm `request`; the answer goes on as a tool event."""

    request: ConfirmRequest


@dataclass
class Hold:
    """The agent waits here until `released` is set; `reached` says it got there."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Fail:
    """The turn breaks here with `error`."""

    error: Exception = field(default_factory=lambda: RuntimeError("scripted failure"))


Step = Any  # a TurnEvent, Ask, Hold or Fail
Confirm = Callable[[str, ConfirmRequest], Awaitable[bool]]


class FakeAgent:
    """The AgentLoop's `run`, one script per turn, recording the requests it got."""

    def __init__(self, *scripts: Sequence[Step]) -> None:
        self.scripts = [list(s) for s in scripts]
        self.requests: list[TurnRequest] = []
        self.answers: list[bool] = []

    async def run(self, request: TurnRequest, confirm: Confirm) -> AsyncIterator[TurnEvent]:
        self.requests.append(request)
        for step in self.scripts.pop(0):
            if isinstance(step, Ask):
                approved = await confirm(request.turn_id or "", step.request)
                self.answers.append(approved)
                yield ToolActivity(name=step.request.tool, status="done" if approved else "declined",
                                   result="", files=[])
            elif isinstance(step, Hold):
                step.reached.set()
                await step.released.wait()
            elif isinstance(step, Fail):
                raise step.error
            else:
                yield step


def pin_checker(pins: dict[int, str]) -> confirmations.PinCheck:
    """`check_pin` over a dict of people's PINs, with the store's answers."""
    async def check(person: int, pin: str | None) -> str | None:
        if not pin:
            return "pin_required"
        if person not in pins:
            return "pin_not_set"
        return None if pins[person] == pin else "wrong_pin"
    return check


class SessionHarness:
    """One conversation's cores, wired as the SessionActor wires them."""

    def __init__(self, agent: FakeAgent, session_id: str = "s1", person: int = OWNER_ID,
                 pins: dict[int, str] | None = None, timeout: float = CONFIRM_TIMEOUT,
                 channel: str = "chat") -> None:
        self.agent = agent
        self.person = person
        self.pins = pins or {}
        self.core = SessionCore(session_id)
        self.core.create(channel)
        self.desk = TurnDesk()
        self.book = ConfirmationBook(session_id, timeout=timeout)
        self.learning = LearningPlan()
        self.learned: list[Learning] = []
        self.failures: list[Exception] = []
        self.notices: list[Any] = []
        self.tasks: list[asyncio.Task[None]] = []

    # -- what the actor's methods do --------------------------------------------------------

    def start(self, message: str, background: bool = False) -> TurnLog:
        """`chat` without following: the turn runs as its own task."""
        turn = self.desk.open(background)
        self.tasks.append(asyncio.get_running_loop().create_task(self._run(turn, message)))
        return turn

    async def chat(self, message: str, background: bool = False) -> list[TurnEvent]:
        return await self.collect(self.start(message, background))

    async def collect(self, turn: TurnLog) -> list[TurnEvent]:
        """Follow the turn to its end (within the deadline), as a client would."""
        async def follow() -> list[TurnEvent]:
            return [event async for event in self.desk.follow(turn)]
        return await asyncio.wait_for(follow(), DEADLINE)

    async def confirm(self, turn_id: str, request: ConfirmRequest) -> bool:
        return await turns.ask(self.desk, self.book, turn_id, request)

    async def answer(self, confirmation_id: str, approve: bool, pin: str | None = None) -> ConfirmationAnswer | ErrorInfo:
        async def person() -> int:
            return self.person
        try:
            return await confirmations.answer(self.book, confirmation_id, approve, pin, person,
                                              pin_checker(self.pins))
        except SessionRefusal as exc:
            return exc.info()

    def cancel(self, heard: str | None = None, heard_index: int | None = None) -> bool:
        return self.desk.cancel(Cancel(heard=heard, heard_index=heard_index))

    async def settle(self) -> None:
        """Wait for every turn task (after-turn work included) to end."""
        await asyncio.wait_for(asyncio.gather(*self.tasks), DEADLINE)

    async def _run(self, turn: TurnLog, message: str) -> None:
        await turns.conduct(self.desk, self.core, self.book, turn, lambda: self._turn(turn, message),
                            self.failures.append)
        notice = turns.notice(turn, self.core.session_id)
        if notice is not None:
            self.notices.append(notice)
        channel = self.core.conversation.channel if self.core.conversation else None
        self.learned.append(self.learning.after_turn(turn.exchange, turn.background, turn.cancelled, channel))

    async def _turn(self, turn: TurnLog, message: str) -> None:
        self.core.add("user", message)
        request = TurnRequest(messages=self.core.prompt("system"), session_id=self.core.session_id,
                              turn_id=turn.turn_id)
        await turns.reply(self.core, turn, message, self.agent.run(request, self.confirm),
                          learn=self.person == OWNER_ID)


async def run_core_test(agent: FakeAgent, send: Sequence[str], expect: Sequence[Sequence[str]],
                        **options: Any) -> SessionHarness:
    """Send each message as one turn, one after another, and check the kinds of events each
    turn's stream carried against `expect`. Returns the harness for further checks."""
    assert len(send) == len(expect), "one expected event list per message"
    harness = SessionHarness(agent, **options)
    for message, kinds in zip(send, expect):
        events = await harness.chat(message)
        assert [e.type for e in events] == list(kinds), [e.type for e in events]
    await harness.settle()
    return harness
