"""An in-process harness for the session actor's turns: the same `TurnEngine` the SessionActor
builds (actors/session/engine.py), with test ports in place of the actor's (a scripted agent for
the AgentLoop, PINs from a dict, notices and learning recorded), and no Ray and no store. Each
test takes milliseconds.

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
from actors.session import confirmations
from actors.session.confirmations import CONFIRM_TIMEOUT, ConfirmationAnswer, ConfirmationBook
from actors.session.core import SessionCore
from actors.session.durable import DurableTurns
from actors.session.engine import TurnEngine, TurnOptions, TurnPorts
from actors.session.events import ConfirmRequest, ToolActivity, TurnEvent, TurnRequest
from actors.session.learning import Learning
from actors.session.turnlog import TurnLog
from actors.store.models import OutboxItem
from actors.store.store import Store

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


class HarnessPorts(TurnPorts):
    """The test's side of a turn: the scripted agent answers, and what the actor would send
    elsewhere (failures, notices, learning) is kept in lists for the test to read."""

    def __init__(self, harness: SessionHarness) -> None:
        self.harness = harness

    async def prepare(self, core: SessionCore, turn: TurnLog, message: str,
                      options: TurnOptions) -> tuple[TurnRequest, int]:
        request, _ = await super().prepare(core, turn, message, options)
        return request, self.harness.person

    async def events(self, request: TurnRequest, sent: Any) -> AsyncIterator[TurnEvent]:
        sent()
        async for event in self.harness.agent.run(request, self.harness.confirm):
            yield event

    def failed(self, exc: Exception, what: str = "turn") -> None:
        self.harness.failures.append(exc)

    async def notify(self, item: OutboxItem) -> None:
        self.harness.notices.append(item)

    def learn(self, plan: Learning) -> None:
        self.harness.learned.append(plan)

    def pins(self) -> tuple[Callable[[], Awaitable[int]], confirmations.PinCheck]:
        async def person() -> int:
            return self.harness.person
        return person, pin_checker(self.harness.pins)


class SessionHarness:
    """One conversation's TurnEngine, as the SessionActor builds it, with the harness's ports
    (and the actor's durability wiring, DurableTurns, when given a store)."""

    def __init__(self, agent: FakeAgent, session_id: str = "s1", person: int = OWNER_ID,
                 pins: dict[int, str] | None = None, timeout: float = CONFIRM_TIMEOUT,
                 channel: str = "chat", store: Store | None = None, core: SessionCore | None = None) -> None:
        self.agent = agent
        self.person = person
        self.pins = pins or {}
        # A conversation rebuilt from the store (`core`), or a new one on `channel`.
        self.core = core if core is not None else SessionCore(session_id)
        if core is None:
            self.core.create(channel)
        self.learned: list[Learning] = []
        self.failures: list[Exception] = []
        self.notices: list[OutboxItem] = []
        self.durable = DurableTurns(self.core, store) if store is not None else None
        self.engine = TurnEngine(self.core, HarnessPorts(self), ConfirmationBook(session_id, timeout=timeout),
                                 self.durable)
        self.desk = self.engine.desk
        self.book = self.engine.book

    def start(self, message: str, background: bool = False) -> TurnLog:
        """`chat` without following: the turn runs as its own task."""
        return self.engine.start(message, TurnOptions(background=background))

    async def chat(self, message: str, background: bool = False) -> list[TurnEvent]:
        return await self.collect(self.start(message, background))

    async def collect(self, turn: TurnLog) -> list[TurnEvent]:
        """Follow the turn to its end (within the deadline), as a client would."""
        async def follow() -> list[TurnEvent]:
            return [event async for event in self.engine.follow(turn)]
        return await asyncio.wait_for(follow(), DEADLINE)

    async def confirm(self, turn_id: str, request: ConfirmRequest) -> bool:
        return await self.engine.ask(turn_id, request)

    async def answer(self, confirmation_id: str, approve: bool, pin: str | None = None) -> ConfirmationAnswer | ErrorInfo:
        return await self.engine.answer(confirmation_id, approve, pin)

    def cancel(self, heard: str | None = None, heard_index: int | None = None) -> bool:
        return self.engine.cancel(heard, heard_index)

    async def settle(self) -> None:
        """Wait for every turn task (after-turn work included) to end."""
        await asyncio.wait_for(asyncio.gather(*self.engine.tasks), DEADLINE)


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
