"""Gateway: the FastAPI ingress deployment. Stateless: it authenticates, validates and relays
to the owning actors, and streams their events to the client as SSE.

The routes live in `serve_apps.routes` (one module per resource) and reach this replica only
through the typed `GatewayContext` it puts on `app.state` (see `serve_apps.http.deps`), which
reaches conversations through `serve_apps.http.conversations`. What stays here: construction,
the liveness probe, the page and /mcp.

No `from __future__ import annotations` here: Serve rewrites the route signatures and FastAPI
must see real types, not strings, to tell bodies and requests from query parameters.
"""


import logging
from typing import Any

from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from ray import serve
from ray.actor import ActorHandle
from ray.serve.handle import DeploymentHandle
from starlette.routing import Route

from actors.logmask import install_log_masking
from actors.session.events import Done, TurnError
from actors.store.models import new_id
from actors.store.store import Store
from serve_apps.deployments import backpressure
from serve_apps.deployments.api import api_router, page_router
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
        self.context = GatewayContext(store=self.store, hashes=self.hashes, config=config, agent=agent,
                                      perception=perception)
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
            handle = await self.context.conversations.open(sid, create=session_id is None)
            async for event in self.context.conversations.whole(sid, handle, start):
                if isinstance(event, Done):
                    reply["reply"] = event.text
                elif isinstance(event, TurnError):
                    reply["error"] = event.error.message
        except ApiError as exc:
            reply["error"] = exc.message
        return reply
