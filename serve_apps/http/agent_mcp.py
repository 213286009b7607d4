"""The agent itself as an MCP server at /mcp (streamable HTTP), for other agents and tools.

An MCP caller has no confirmation channel, so its turns are unattended: confirm-tier actions
are declined for it by construction. The owner key is required; the Host/Origin check guards
against DNS rebinding.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

ChatFn = Callable[[str, str | None], Awaitable[dict[str, Any]]]
KeyCheck = Callable[[str | None], Awaitable[bool]]


def build_agent_server(chat: ChatFn) -> MCPServer:
    server = MCPServer(name="iriis", instructions=(
        "Iriis is the owner's personal agent. Use `chat` to ask it something; pass the returned "
        "session_id to continue the same conversation. Actions that need the owner's confirmation "
        "are declined over MCP."))

    @server.tool(name="chat",
                 description="Send a message to Iriis and get its reply (and the session id to continue).")
    async def chat_tool(message: str, session_id: str | None = None) -> str:
        result = await chat(message, session_id)
        return json.dumps(result, ensure_ascii=False)

    return server


class AgentMcpApp:
    """ASGI app mounted at /mcp: owner-key check, then the SDK's streamable HTTP transport."""

    def __init__(self, chat: ChatFn, key_ok: KeyCheck, hosts: list[str]) -> None:
        self.server = build_agent_server(chat)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts],
        )
        self.server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security)
        self.manager = self.server.session_manager
        self.key_ok = key_ok
        self._running: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def _ensure_running(self) -> None:
        # The session manager needs its task group alive; Serve does not run mounted lifespans.
        if self._running is None:
            async def run() -> None:
                async with self.manager.run():
                    self._ready.set()
                    await asyncio.Event().wait()
            self._running = asyncio.get_running_loop().create_task(run())
        await self._ready.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        auth = headers.get("authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if not await self.key_ok(key):
            body = json.dumps({"error": {"code": "unauthorized",
                                         "message": "Send the owner key as 'Authorization: Bearer <key>'."}})
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self._ensure_running()
        await self.manager.handle_request(scope, receive, send)
