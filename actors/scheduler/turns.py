"""The Ray side of a task's session (`runner.TaskTurns`): the task's own SessionActor for the
turn, and the AgentLoop (a Serve handle) for the judge and the playbook."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TYPE_CHECKING

from ray.exceptions import RayActorError

from actors.common.restart import begin_stream, first_then_rest, open_conversation
from actors.session.actor import SessionConfig
from actors.session.pool import find_session, registry, session_handle
from actors.session.events import TurnEvent

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.serve.handle import DeploymentHandle

TASK_CHANNEL = "task"
JUDGE_PURPOSE = "task_judge"


class SessionTurns:
    # The channel its conversations are created with (a subclass names its own).
    channel = TASK_CHANNEL

    def __init__(self, session: SessionConfig, agent: DeploymentHandle) -> None:
        self.session = session
        self.agent = agent
        self._handles: dict[str, Any] = {}

    async def _handle(self, conversation_id: str) -> Any:
        handle = self._handles.get(conversation_id)
        if handle is None:
            # The same warm pool as the gateway's conversations (actors/session/pool.py).
            handle = self._handles[conversation_id] = await session_handle(conversation_id, self.session, self.agent)
        return handle

    async def open(self, conversation_id: str) -> Any:
        """The conversation's live actor, loaded (one restarting in place is waited for, one
        that exited while idle since we cached it replaced by a fresh one, rebuilt from the store)."""
        try:
            handle, _ = await open_conversation(
                conversation_id, self._handles.get(conversation_id),
                lambda actor: actor.open.remote(True, self.channel), lambda: registry(self.session, self.agent))
        except RayActorError:
            self._handles.pop(conversation_id, None)
            raise
        self._handles[conversation_id] = handle
        return handle

    async def run(self, conversation_id: str, message: str, sources: list[str] | None = None,
                  work_only: bool = False) -> AsyncIterator[TurnEvent]:
        def start(actor: ActorHandle) -> Any:
            return actor.chat.options(num_returns="streaming").remote(
                message, background=True, attended=False, sources=sources, work_only=work_only)

        try:
            # An actor gone before the turn began (idle exit, a death) is found again, once.
            _, events, first = await begin_stream(await self._handle(conversation_id), start,
                                                  lambda: self.open(conversation_id))
            async for event in first_then_rest(first, events):
                yield event
        finally:
            self._handles.pop(conversation_id, None)

    async def cancel(self, conversation_id: str) -> None:
        # By name, not from the cache: the turn's stream may be gone already (a timeout), and
        # a background turn whose reader left goes on until it is told to stop.
        handle = await find_session(conversation_id)
        if handle is not None:
            await handle.cancel.remote()

    async def judge(self, messages: list[dict[str, str]]) -> str | None:
        return await self.agent.complete.remote(messages, JUDGE_PURPOSE)

    async def distill(self, work: str, conversation_id: str) -> None:
        await self.agent.distill.remote(work, conversation_id)
