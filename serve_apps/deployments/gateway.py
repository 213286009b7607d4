"""Gateway: the FastAPI ingress deployment. Stateless: it authenticates, validates and relays
to the owning actors, and streams their events to the client as SSE.

The routes live in `serve_apps.routes` (one module per resource) and reach this replica only
through the typed `GatewayContext` it puts on `app.state` (see `serve_apps.http.deps`). What
stays here: construction, the live session-handle registry, the turn stream, and /mcp.

No `from __future__ import annotations` here: Serve rewrites the route signatures and FastAPI
must see real types, not strings, to tell bodies and requests from query parameters.
"""


import logging
from collections import OrderedDict
from typing import Any

from fastapi.responses import FileResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from ray import serve
from ray.exceptions import RayActorError
from ray.actor import ActorHandle
from ray.serve.handle import DeploymentHandle
from starlette.routing import Route

from actors.common.trace import mark
from actors.devices.privacy import event_for_reader
from actors.recent_errors import report
from actors.logmask import install_log_masking
from actors.session.actor import SessionNotFound
from actors.common.restart import begin_stream, first_then_rest, open_conversation
from actors.session.durable import lost_turn
from actors.session.pool import registry
from actors.session.admission import SessionsFull
from actors.session.start_queue import SessionsBusy
from actors.session.events import (
    ENDS_TURN,
    Done,
    Sentence,
    SessionStarted,
    TurnError,
    TurnStarted,
    sse,
)
from actors.store.models import HEALTH_CHANNEL, new_id
from actors.store.store import Store
from serve_apps.deployments import backpressure
from serve_apps.deployments.api import api_router, page_router
from serve_apps.deployments.backpressure import OVERLOADED
from serve_apps.http.agent_mcp import AgentMcpApp
from serve_apps.http.context import GatewayConfig, GatewayContext
from serve_apps.http.app import app
from serve_apps.http.errors import ApiError
from serve_apps.http.models import Health
from serve_apps.http.nul import RefuseNul
from serve_apps.http.openapi import install as install_openapi

__all__ = ["Gateway", "GatewayConfig"]

log = logging.getLogger(__name__)

app.include_router(api_router)
app.include_router(page_router)
# /openapi.json tells the truth: the error shape, the statuses each route answers, its media types.
install_openapi(app, unthrottled=backpressure.EXEMPT)
# A NUL character (which PostgreSQL cannot store) is a 422 at the edge, never a 500 in a write.
app.add_middleware(RefuseNul)

# Handles are cheap, but a long-running gateway should not remember every conversation ever.
HANDLE_CACHE = 1024

_gate: backpressure.InFlight | None = None


# Serve's limits sit above the replica's own gate (`backpressure`), which answers first in the
# documented error shape; `build_app` sets both from IRIIS_GATEWAY_MAX_ONGOING.
@serve.deployment(
    ray_actor_options={"num_cpus": 0},
    max_ongoing_requests=500,
    max_queued_requests=200,
    backpressure_config={"retry_after_s": 2},
)
@serve.ingress(app)
class Gateway:
    def __init__(self, agent: DeploymentHandle, config: GatewayConfig, perception: DeploymentHandle | None = None,
                 max_ongoing: int = 200, retry_after: int = 2) -> None:
        install_log_masking()
        global _gate
        if _gate is None:  # once per replica process, before the app serves anything
            _gate = backpressure.install(app, max_ongoing, retry_after)
        self.agent = agent
        self.perception = perception
        self.config = config
        self.hashes = frozenset(config.owner_key_hashes)
        self.store = Store.open(config.database_url)
        self._sessions: OrderedDict[str, Any] = OrderedDict()
        self.context = GatewayContext(store=self.store, hashes=self.hashes, config=config, agent=agent,
                                      perception=perception, open_session=self._session,
                                      stream_turn=self._sse, begin_turn=self._turn)
        # Route modules (APIRouter, one resource each) find this replica through app.state.
        app.state.gateway = self.context
        app.mount("/static", StaticFiles(directory=self.context.web_dir), name="static")
        self.mcp = AgentMcpApp(self._mcp_chat, self.context.owner_key_now, config.hosts)
        # A Route (not a Mount) so /mcp itself answers, without a redirect to /mcp/.
        app.router.routes.append(Route("/mcp", endpoint=self.mcp, name="mcp"))

    # The liveness probe and the page stay methods of the deployment: with routes of its own the
    # ingress serves the app this constructor configured (app.state, /static, /mcp); with none,
    # Serve would serve a frozen copy taken at import and `app.state.gateway` would be missing.

    @app.get("/healthz")
    async def healthz(self) -> Health:
        return Health(status="ok")

    @app.get("/", include_in_schema=False, response_model=None)
    async def index(self) -> FileResponse:
        return FileResponse(self.context.web_dir / "index.html", headers={"Cache-Control": "no-cache"})

    async def _mcp_chat(self, message: str, session_id: str | None) -> dict[str, Any]:
        """One unattended turn for an MCP caller: no confirmations, the whole reply at once."""
        sid = session_id or new_id()
        reply: dict[str, Any] = {"session_id": sid}

        def start(actor: ActorHandle) -> Any:
            return actor.chat.options(num_returns="streaming").remote(message, attended=False)

        try:
            handle = await self._session(sid, create=session_id is None)
            async for event in self.context.whole_turn(sid, handle, start):
                if isinstance(event, Done):
                    reply["reply"] = event.text
                elif isinstance(event, TurnError):
                    reply["error"] = event.error.message
        except ApiError as exc:
            reply["error"] = exc.message
        return reply

    # -- the live conversations ---------------------------------------------------------

    async def _session(self, session_id: str, create: bool, health_check: bool = False,
                       cached: bool = False) -> Any:
        """The live actor for a conversation, started (and rebuilt from the store) on demand.
        With `health_check`, the conversation must be (or become) a health-check session.
        With `cached`, a handle used before is returned as it is (see GatewayContext.session)."""
        if cached and not health_check and session_id in self._sessions:
            self._sessions.move_to_end(session_id)
            return self._sessions[session_id]
        if not create and session_id not in self._sessions:
            if await self.store.get_conversation(session_id) is None:
                raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        channel_wanted = HEALTH_CHANNEL if health_check else "chat"
        try:
            # A new conversation gets a warm pooled actor (actors/session/pool.py). `open` is
            # cheap once loaded, and it is how we learn a cached actor has exited.
            handle, channel = await open_conversation(
                session_id, self._sessions.get(session_id), lambda actor: actor.open.remote(create, channel_wanted),
                lambda: registry(self.config.session, self.agent), start_wait=self.config.session.start_wait)
        except RayActorError:
            self._sessions.pop(session_id, None)
            raise
        except SessionsBusy as exc:
            # A burst of new conversations: the wait for a process would be too long to hold
            # the line open with nothing to show, so the client hears when to come back.
            # Made again here: the one raised came through Ray, its text wrapped in a traceback.
            # At the cap on live conversations with every one busy, it says so (SessionsFull).
            busy = (SessionsFull if isinstance(exc, SessionsFull) else SessionsBusy)(exc.retry_after)
            raise ApiError(503, OVERLOADED, str(busy), headers={"Retry-After": str(busy.retry_after)}) from None
        self._sessions[session_id] = handle
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > HANDLE_CACHE:
            self._sessions.popitem(last=False)
        if not channel:
            raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        if health_check and channel != HEALTH_CHANNEL:
            raise ApiError(422, "invalid_request",
                           f"Session {session_id!r} is a conversation, not a health check; "
                           "leave out session_id to start a health-check session.")
        return handle

    async def _turn(self, session_id: str, handle: ActorHandle, start: Any) -> tuple[Any, Any, Any]:
        """Start a turn and wait for its first event (the turn's id, sent at once), before any
        response is sent. If that actor has gone (it exited while idle, or is restarting after
        a death) the turn never began there: it goes once more to the actor found the careful
        way (a restart in place is waited for, a dead actor replaced), and a conversation
        deleted meanwhile is still a plain 404. Returns (handle, events, first)."""
        try:
            return await begin_stream(handle, start, lambda: self._session(session_id, create=False))
        except SessionNotFound:
            self._sessions.pop(session_id, None)
            raise ApiError(404, "session_not_found", f"No session {session_id!r}.") from None
        except RayActorError as exc:
            raise ApiError(503, "session_unavailable", lost_turn(exc).error.message,
                           headers={"Retry-After": "2"}) from None

    def _sse(self, handle: ActorHandle, session_id: str, events: Any, reader_is_person: bool = True,
             first: Any = None) -> StreamingResponse:
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
                self._sessions.pop(session_id, None)
                finished = True
                # Names the cause; the partial reply is in the store, marked interrupted.
                yield sse(lost_turn(exc))
            finally:
                if turn_id and not finished:
                    # The client left mid-turn: the actor decides (background goes on, else stop).
                    handle.client_left.remote(turn_id)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
