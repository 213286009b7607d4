"""MCP server "self": lets the agent look at its own recent errors, audit log and tool servers.

Run over stdio: ``python -m actors.tools.servers.selfinfo``. It reads the Iriis HTTP API at
``IRIIS_API_URL`` (e.g. http://127.0.0.1:8000) with the owner key ``IRIIS_API_KEY`` as a bearer
token: ``GET /v1/errors``, ``GET /v1/audit`` and ``GET /v1/tools``. Without both variables the
tools answer with a sentence saying self-inspection is not configured, rather than failing, so
the model can relay that to the owner.

The API URL is configuration, not model input, and is normally loopback, so these calls do not
go through the SSRF guard.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar
from zoneinfo import ZoneInfo

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.tools.servers.core import owner_zone

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
API_TIMEOUT = 10.0
NOT_CONFIGURED = ("Self-inspection is not configured: the self tool server needs IRIIS_API_URL "
                  "and IRIIS_API_KEY to read the Iriis API.")
_CLIP = 200


class ApiSettings(BaseModel):
    url: str
    key: str


class ErrorItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ts: float = 0.0
    source: str = "?"
    path: str | None = None
    error: str = ""


class AuditItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ts: float = 0.0
    session_id: str | None = None
    tool: str = "?"
    arguments: dict[str, Any] | None = None
    tier: str = "?"
    confirmed: bool | None = None
    result: str | None = None
    error: str | None = None
    duration_ms: float = 0.0


class Listing(BaseModel):
    """The API's list envelope: ``{"data": [...], "count": n}``."""

    model_config = ConfigDict(extra="ignore")

    data: list[Any] = Field(default_factory=list)


def api_settings(env: Mapping[str, str]) -> ApiSettings | None:
    url = env.get("IRIIS_API_URL", "").strip().rstrip("/")
    key = env.get("IRIIS_API_KEY", "").strip()
    return ApiSettings(url=url, key=key) if url and key else None


def _clip(text: str, limit: int = _CLIP) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _when(ts: float, zone: ZoneInfo) -> str:
    return dt.datetime.fromtimestamp(ts, zone).strftime("%Y-%m-%d %H:%M:%S")


class IriisApi:
    def __init__(self, settings: ApiSettings) -> None:
        self._settings = settings

    async def get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self._settings.key}", "Accept": "application/json"}
        try:
            # trust_env off: the API is local and a proxy from the environment must not see the key.
            async with httpx.AsyncClient(base_url=self._settings.url, timeout=API_TIMEOUT,
                                         trust_env=False) as client:
                response = await client.get(path, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot reach the Iriis API at {self._settings.url}: "
                            f"{type(exc).__name__}") from None
        if response.status_code in (401, 403):
            raise ToolError(f"the Iriis API refused IRIIS_API_KEY (HTTP {response.status_code} on {path})")
        return response

    async def listing(self, path: str, params: dict[str, Any] | None = None) -> list[Any]:
        return listing_data(await self.get(path, params), path)


def listing_data(response: httpx.Response, path: str) -> list[Any]:
    """The items of a list envelope the API answered `path` with; ToolError for anything else."""
    if response.status_code >= 400:
        raise ToolError(f"the Iriis API answered HTTP {response.status_code} on {path}")
    try:
        return Listing.model_validate(response.json()).data
    except (ValueError, ValidationError):
        raise ToolError(f"the Iriis API answered {path} in an unexpected shape") from None


_Entry = TypeVar("_Entry", ErrorItem, AuditItem)


def _newest_first(items: list[Any], model: type[_Entry], empty: str, heading: str,
                  line: Callable[[_Entry], str]) -> str:
    """A listing's object entries read as `model`, one `line` each under `heading` (which may
    name the {count}), newest first; `empty` when there are none. Anything else is skipped."""
    entries = [model.model_validate(i) for i in items if isinstance(i, dict)]
    if not entries:
        return empty
    entries.sort(key=lambda e: e.ts, reverse=True)
    return "\n".join([heading.format(count=len(entries)), *(line(e) for e in entries)])


def format_errors(items: list[Any], zone: ZoneInfo) -> str:
    def line(e: ErrorItem) -> str:
        where = f" {e.path}" if e.path else ""
        return f"- {_when(e.ts, zone)} [{e.source}{where}] {_clip(e.error)}"

    return _newest_first(items, ErrorItem, "No recent errors.", "{count} recent error(s), newest first:", line)


def format_audit(items: list[Any], zone: ZoneInfo) -> str:
    def line(e: AuditItem) -> str:
        args = _clip(json.dumps(e.arguments, ensure_ascii=False, default=str), 120) if e.arguments else ""
        confirmed = {True: ", confirmed", False: ", declined", None: ""}[e.confirmed]
        outcome = f"error: {_clip(e.error)}" if e.error else f"-> {_clip(e.result or '')}"
        return (f"- {_when(e.ts, zone)} {e.tool}({args}) tier {e.tier}{confirmed}, "
                f"{e.duration_ms:.0f} ms {outcome}")

    return _newest_first(items, AuditItem, "The audit log is empty.", "{count} tool call(s), newest first:", line)


def format_tool_servers(items: list[Any]) -> str:
    if not items:
        return "No tool servers are listed."
    lines = [f"{len(items)} tool server(s):"]
    for item in items:
        if not isinstance(item, dict):
            lines.append(f"- {_clip(str(item))}")
            continue
        name = item.get("name") or item.get("server") or "?"
        status = item.get("status") or item.get("state")
        tools = item.get("tools")
        parts = [str(status)] if status else []
        if isinstance(tools, list):
            names = [t.get("name", "?") if isinstance(t, dict) else str(t) for t in tools]
            parts.append(f"{len(names)} tool(s): {_clip(', '.join(names), 300)}")
        elif isinstance(tools, int):
            parts.append(f"{tools} tool(s)")
        if item.get("error"):
            parts.append(f"error: {_clip(str(item['error']))}")
        lines.append(f"- {name}: {'; '.join(parts) or _clip(json.dumps(item, default=str))}")
    return "\n".join(lines)


def create_server(env: Mapping[str, str] | None = None) -> MCPServer:
    env = dict(os.environ if env is None else env)
    settings = api_settings(env)
    zone = owner_zone(env)
    api = IriisApi(settings) if settings is not None else None
    instructions = ("Self-inspection: recent errors, the tool-call audit log and the tool servers "
                    "of this Iriis instance.")
    if api is None:
        instructions += " Not configured here (IRIIS_API_URL and IRIIS_API_KEY are unset)."
    server = MCPServer("self", instructions=instructions)

    @server.tool(annotations=READ_ONLY)
    async def recent_errors(limit: Annotated[int, Field(ge=1, le=200)] = 10) -> str:
        """The most recent server errors (time, where, message)."""
        if api is None:
            return NOT_CONFIGURED
        return format_errors(await api.listing("/v1/errors", {"limit": limit}), zone)

    @server.tool(annotations=READ_ONLY)
    async def audit_log(limit: Annotated[int, Field(ge=1, le=1000)] = 20) -> str:
        """The most recent tool calls: tool, arguments, tier, confirmation, outcome, duration."""
        if api is None:
            return NOT_CONFIGURED
        return format_audit(await api.listing("/v1/audit", {"limit": limit}), zone)

    @server.tool(annotations=READ_ONLY)
    async def tool_servers() -> str:
        """The configured tool servers and their state, as the Iriis API reports them."""
        if api is None:
            return NOT_CONFIGURED
        response = await api.get("/v1/tools")
        if response.status_code == 404:
            return "This Iriis API does not list tool servers (GET /v1/tools answered 404)."
        return format_tool_servers(listing_data(response, "/v1/tools"))

    return server


def main() -> None:
    create_server().run("stdio")


if __name__ == "__main__":
    main()
