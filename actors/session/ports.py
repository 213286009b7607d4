"""The SessionActor's side of a turn (`engine.TurnPorts`): the prompt prepared from the store,
the AgentLoop deployment's event stream, the outbox, learning and summaries sent to the
AgentLoop, failures to the error log, PINs checked against the store. Thin Ray plumbing; the
turn itself is `engine.TurnEngine`, which the test harness drives with its own ports."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

import ray

from actors.common.idle import IdleWatch
from actors.common.trace import mark
from actors.recent_errors import report
from actors.session import confirmations, turns
from actors.session.confirmations import PinCheck
from actors.session.core import SessionCore
from actors.session.engine import TurnOptions, TurnPorts
from actors.session.events import Sentence, TurnEvent, TurnRequest
from actors.session.learning import Learning
from actors.session.turnlog import TurnLog
from actors.session.warm import shared_encoder
from actors.store.models import OutboxItem
from actors.store.store import Store

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger(__name__)
# The longest a turn's first write waits for its AgentLoop call to reach a replica.
SEND_WAIT = 0.02


async def sent_or_later(stream: Any, timeout: float) -> None:
    """Return once Serve has handed `stream`'s request to a replica, or after `timeout` (queues
    full, or a handle that cannot say), whichever is first. Never raises and never cancels the
    wait (that would cancel the request): the stream itself reports a call that failed.

    Private Serve API: `DeploymentResponseGenerator._to_object_ref_gen` is the only way to learn
    that a streaming request reached a replica (no public call says so)."""
    try:
        assigned = asyncio.ensure_future(stream._to_object_ref_gen())
    except Exception:  # noqa: BLE001 - an older or other handle: no wait
        return
    assigned.add_done_callback(lambda f: f.cancelled() or f.exception())
    await asyncio.wait({assigned}, timeout=timeout)


@dataclass
class ActorPorts(TurnPorts):
    session_id: str
    store: Store
    agent: DeploymentHandle
    idle: IdleWatch
    # Learning work kept beside the conversation (the actor's idle exit waits for it).
    background: Callable[[Awaitable[Any], str], None]
    memory: bool

    async def prepare(self, core: SessionCore, turn: TurnLog, message: str,
                      options: TurnOptions) -> tuple[TurnRequest, int]:
        # The person's message (and the pending reply) go to the store beside the model's work:
        # the write starts once the prompt's reads are done, as the AgentLoop call goes out. The
        # turn's end waits for that write (DurableTurns.settle), so nothing reaches `done` unwritten.
        mark("session.begun", self.session_id)
        prepared = await turns.prepare(self.store, core, turn, message, options.attended, shared_encoder,
                                       session=ray.get_runtime_context().current_actor,
                                       sources=list(options.sources) or None, work_only=options.work_only,
                                       memory=self.memory, later=lambda work: self.background(work, "memory_use"))
        mark("session.prepared", self.session_id)
        return prepared

    async def events(self, request: TurnRequest, sent: Callable[[], object]) -> AsyncIterator[TurnEvent]:
        """The AgentLoop's stream; stopped there too if the turn stops reading early. `sent` runs
        once a replica has the request, or after at most SEND_WAIT: begun before, its statement
        building and commit held this event loop while Serve's router was sending the request."""
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
                    mark("session.sentence", self.session_id)
                yield event
            complete = True
        finally:
            if not complete and stream is not None:
                stream.cancel()

    def failed(self, exc: Exception, what: str = "turn") -> None:
        log.exception("%s failed in session %s", what, self.session_id)
        report(f"session.{what}", exc, request={"session": self.session_id})

    async def notify(self, item: OutboxItem) -> None:
        try:
            await self.store.add_outbox(item)
        except Exception as exc:  # noqa: BLE001 - a lost notification must not lose the turn
            report("session.outbox", exc, request={"session": self.session_id})

    def learn(self, plan: Learning) -> None:
        if plan.reflect is not None:
            self.background(self.agent.reflect.remote(plan.reflect), "reflection")
        if plan.distill is not None:
            self.background(self.agent.distill.remote(plan.distill, self.session_id), "playbook")

    async def summarize(self, summary: str, messages: list[dict[str, str]]) -> str:  # type: ignore[override]
        return await self.agent.summarize.remote(summary, messages)

    def pins(self) -> tuple[Callable[[], Awaitable[int]], PinCheck]:
        return confirmations.store_pins(self.store, self.session_id)

    def touch(self) -> None:
        self.idle.touch()
