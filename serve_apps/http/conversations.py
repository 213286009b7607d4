"""How a Gateway replica reaches conversations: the live SessionActor for an id (started, or
rebuilt from the store, on demand), a turn begun on it, and its events as server-sent events.

One per replica, held by the `GatewayContext` routes get (`gw.conversations.open`, `.begin`,
`.stream`, `.whole`), with the replica's cache of the handles it used lately.

No `from __future__ import annotations`: the context built on this is read by FastAPI.
"""

from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from ray.actor import ActorHandle
from ray.exceptions import RayActorError

from actors.common.restart import begin_stream, first_then_rest, open_conversation
from actors.common.trace import mark
from actors.devices.privacy import event_for_reader
from actors.recent_errors import report
from actors.session.actor import SessionConfig, SessionNotFound
from actors.session.admission import SessionsFull
from actors.session.durable import lost_turn
from actors.session.events import ENDS_TURN, Sentence, SessionStarted, TurnStarted, sse
from actors.session.start_queue import SessionsBusy
from actors.store.models import HEALTH_CHANNEL
from actors.store.store import Store
from serve_apps.http.errors import OVERLOADED, ApiError

# Handles are cheap, but a long-running gateway should not remember every conversation ever.
HANDLE_CACHE = 1024

# handle -> that actor's turn events (a streaming call)
StartTurn = Callable[[Any], Any]


class Conversations:
    def __init__(self, store: Store, config: SessionConfig, registry: Callable[[], Awaitable[Any]]) -> None:
        self.store = store
        self.config = config
        self._registry = registry   # the session pool's registry actor
        self._handles: OrderedDict[str, Any] = OrderedDict()

    async def open(self, session_id: str, create: bool = False, health_check: bool = False,
                   cached: bool = False) -> Any:
        """The live actor for a conversation. With `health_check`, the conversation must be (or
        become) a health-check session; with `cached`, a handle used before is returned as it
        is (begin the turn with `begin` then: that actor may have exited since)."""
        if cached and not health_check and session_id in self._handles:
            self._handles.move_to_end(session_id)
            return self._handles[session_id]
        if not create and session_id not in self._handles:
            if await self.store.get_conversation(session_id) is None:
                raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        channel_wanted = HEALTH_CHANNEL if health_check else "chat"
        try:
            # A new conversation gets a warm pooled actor (actors/session/pool.py). `open` is
            # cheap once loaded, and it is how we learn a cached actor has exited.
            handle, channel = await open_conversation(
                session_id, self._handles.get(session_id), lambda actor: actor.open.remote(create, channel_wanted),
                self._registry, start_wait=self.config.start_wait)
        except RayActorError:
            self._handles.pop(session_id, None)
            raise
        except SessionsBusy as exc:
            # A burst of new conversations: the wait for a process would be too long to hold
            # the line open with nothing to show, so the client hears when to come back.
            # Made again here: the one raised came through Ray, its text wrapped in a traceback.
            # At the cap on live conversations with every one busy, it says so (SessionsFull).
            busy = (SessionsFull if isinstance(exc, SessionsFull) else SessionsBusy)(exc.retry_after)
            raise ApiError(503, OVERLOADED, str(busy), headers={"Retry-After": str(busy.retry_after)}) from None
        self._handles[session_id] = handle
        self._handles.move_to_end(session_id)
        while len(self._handles) > HANDLE_CACHE:
            self._handles.popitem(last=False)
        if not channel:
            raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        if health_check and channel != HEALTH_CHANNEL:
            raise ApiError(422, "invalid_request",
                           f"Session {session_id!r} is a conversation, not a health check; "
                           "leave out session_id to start a health-check session.")
        return handle

    async def begin(self, session_id: str, handle: ActorHandle, start: StartTurn) -> tuple[Any, Any, Any]:
        """Start a turn and wait for its first event (the turn's id, sent at once), before any
        response is sent. If that actor has gone (it exited while idle, or is restarting after
        a death) the turn never began there: it goes once more to the actor found the careful
        way (a restart in place is waited for, a dead actor replaced), and a conversation
        deleted meanwhile is still a plain 404. Returns (handle, events, first)."""
        try:
            return await begin_stream(handle, start, lambda: self.open(session_id, create=False))
        except SessionNotFound:
            self._handles.pop(session_id, None)
            raise ApiError(404, "session_not_found", f"No session {session_id!r}.") from None
        except RayActorError as exc:
            raise ApiError(503, "session_unavailable", lost_turn(exc).error.message,
                           headers={"Retry-After": "2"}) from None

    async def whole(self, session_id: str, handle: ActorHandle, start: StartTurn) -> AsyncIterator[Any]:
        """Every event of a turn begun as `begin` begins one (the same errors), for a caller that
        reads the reply whole (/v1/ask, /mcp)."""
        _, events, first = await self.begin(session_id, handle, start)
        async for event in first_then_rest(first, events):
            yield event

    def stream(self, handle: ActorHandle, session_id: str, events: Any, reader_is_person: bool = True,
               first: Any = None) -> StreamingResponse:
        """A running turn's events as SSE (after `first`, when it was read already), shaped for
        who is reading; a client that leaves mid-turn is reported to the actor."""
        async def stream():
            turn_id = None
            finished = False
            try:
                async for event in first_then_rest(first, events):
                    if isinstance(event, TurnStarted):
                        turn_id = event.turn_id
                        yield sse(SessionStarted(session_id=session_id, turn_id=turn_id))
                        continue
                    finished = isinstance(event, ENDS_TURN)
                    if isinstance(event, Sentence):
                        mark("gateway.sentence", session_id)
                    yield sse(event_for_reader(event, reader_is_person))
            except (RayActorError, SessionNotFound) as exc:
                report("gateway.chat", exc, path="/v1/chat", request={"session": session_id})
                self._handles.pop(session_id, None)
                finished = True
                # Names the cause; the partial reply is in the store, marked interrupted.
                yield sse(lost_turn(exc))
            finally:
                if turn_id and not finished:
                    # The client left mid-turn: the actor decides (background goes on, else stop).
                    handle.client_left.remote(turn_id)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
