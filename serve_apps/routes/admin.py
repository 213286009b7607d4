"""The owner's views of the system: the audit log, the outbox, recent errors, providers'
health, tool servers (and the owner's switch on each), the conversation actors' pool, and link
previews fetched through the SSRF guard.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel
from ray.exceptions import RayActorError

from actors.common.fetch import safe_fetch
from actors.common.html import link_preview
from actors.common.names import TOOL_HUB, find_actor_async
from actors.common.restart import through_restart
from actors.common.ssrf import FetchError, SsrfError
from actors.recent_errors import error_log
from actors.session.pool import registry
from serve_apps.http.deps import GatewayDep, Owner, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.models import (
    AuditList,
    ErrorList,
    LinkPreview,
    OutboxList,
    ProviderList,
    SessionPoolPublic,
    ToolList,
    ToolPublic,
    page,
)

router = APIRouter()
# What an mcp.yaml server's name can be in a path; anything else names no server (404).
SERVER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _server_name(name: Annotated[str, Path(
        description="A tool server's name as mcp.yaml spells it: 1 to 64 letters, digits, `_`, `.` or `-`.")]) -> str:
    if not SERVER_NAME.match(name):
        raise ApiError(404, "not_found", "No tool server has that name.")
    return name


# After the auth parameter, like `SessionId`: a caller without a key hears 401 first.
ServerName = Annotated[str, Depends(_server_name)]


class ToolSwitch(BaseModel):
    enabled: bool


def _tools_unavailable(why: str) -> ApiError:
    return ApiError(503, "tools_unavailable", f"The tool servers are restarting ({why}): try again in a moment.",
                    headers={"Retry-After": "5"})


@router.get("/audit")
async def audit(_owner: Owner, store: StoreDep, limit: int = 100) -> AuditList:
    return page(AuditList, await store.list_audit(max(1, min(limit, 1000))))


@router.get("/outbox")
async def outbox(_owner: Owner, store: StoreDep, status: str | None = None) -> OutboxList:
    return page(OutboxList, await store.list_outbox(status))


@router.get("/errors")
async def errors(_owner: Owner, limit: int = 50) -> ErrorList:
    return page(ErrorList, await error_log().recent.remote(max(1, min(limit, 200))))


@router.get("/providers")
async def providers(_owner: Owner, gw: GatewayDep) -> ProviderList:
    return page(ProviderList, await gw.agent.providers_status.remote())


@router.get("/tools")
async def tools(_owner: Owner, gw: GatewayDep) -> ToolList:
    """Every tool server: on, off (with the missing variable, or switched off by the owner),
    down (with the error; restarting) or starting, with its last successful call and last error."""
    return page(ToolList, await gw.agent.tools_status.remote())


@router.put("/tools/{name}")
async def switch_tool_server(_owner: Owner, name: ServerName, body: ToolSwitch) -> ToolPublic:
    """The owner's switch on one of mcp.yaml's servers (a mail or calendar account, say).
    Off: its process stops, its tools leave every turn's offer at once, and its state is "off"
    ("switched off by the owner"). On: it starts again ("starting", then "on" or "down").
    Kept in the store, so a restart keeps it; a server off for want of a variable stays off."""
    hub = await find_actor_async(TOOL_HUB)
    if hub is None:
        raise _tools_unavailable("not running")
    try:
        status = await through_restart(lambda: hub.switch.remote(name, body.enabled))
    except RayActorError as exc:
        raise _tools_unavailable(type(exc).__name__) from None
    if status is None:
        raise ApiError(404, "not_found", f"No tool server named {name!r} can be switched: mcp.yaml's servers can, "
                                         "the built-in tools cannot.")
    return ToolPublic.model_validate(status)


@router.get("/pool")
async def session_pool(_owner: Owner, gw: GatewayDep) -> SessionPoolPublic:
    """The conversation actors' pool and its start queue, as the registry sees them now."""
    found = await registry(gw.config.session, gw.agent)
    return SessionPoolPublic.model_validate(await found.state.remote())


@router.get("/preview", responses=error_responses(502))
async def preview(url: str, _owner: Owner) -> LinkPreview:
    """A link preview fetched server-side through the SSRF guard (re-checked per redirect)."""
    try:
        fetched = await safe_fetch(url, max_bytes=512_000, timeout=10)
    except SsrfError as exc:
        raise ApiError(422, "url_refused", f"That address is not allowed: {exc}") from None
    except FetchError as exc:
        raise ApiError(502, "fetch_failed", f"The page could not be fetched: {exc}") from None
    html = fetched.text or ""
    return LinkPreview(url=url, final_url=fetched.final_url, status=fetched.status,
                       **link_preview(html, fetched.final_url))
