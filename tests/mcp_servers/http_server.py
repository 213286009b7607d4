"""A streamable-HTTP MCP server for the catalogue tests, behind a bearer-token check.

Run as `python http_server.py`; the token it accepts comes from MCP_TEST_TOKEN. It binds a free
localhost port itself and prints it as the first line of stdout only once the socket is
listening, so the test can wait on that line instead of polling or sleeping.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.types import ASGIApp, Receive, Scope, Send

server = MCPServer("remote", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: a thing worth knowing"


@server.tool()
def shout(text: str) -> str:
    """Say the text loudly."""
    return text.upper()


class RequireBearer:
    """Refuse every request without the expected Authorization header, as a hosted server would."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers: dict[bytes, bytes] = dict(scope["headers"])
            if headers.get(b"authorization") != self.expected:
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


def main() -> None:
    token = os.environ["MCP_TEST_TOKEN"]
    app: Any = RequireBearer(server.streamable_http_app(), token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    # Connections made after this line queue on the listening socket until uvicorn accepts them.
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
