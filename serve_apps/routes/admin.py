"""The owner's views of the system: the audit log, the outbox, recent errors, providers'
health, tool servers, the conversation actors' pool, and link previews fetched through the
SSRF guard.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from fastapi import APIRouter

from actors.common.fetch import safe_fetch
from actors.common.html import link_preview
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
    page,
)

router = APIRouter()


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
    """Every tool server: on, off (with the missing variable), down (restarting)."""
    return page(ToolList, await gw.agent.tools_status.remote())


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
