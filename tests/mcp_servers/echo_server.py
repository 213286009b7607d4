"""A stdio MCP server for the catalogue tests.

Run as `python echo_server.py [NAME]`. It offers a read-only tool, an ordinary one, one that
reports an error, one with a required `purpose`, a slow one, one that tells its pid, one that
claims a saved file and one that ends the process, so the catalogue's tier rules, error handling, timeouts and restarts can be
exercised for real.
ECHO_PREFIX (set through the server's `env` in the test config) is put in front of echoes, to
show that `${VAR}` expansion reached the process.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

NAME = sys.argv[1] if len(sys.argv) > 1 else "echo"

server = MCPServer(NAME, log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return os.environ.get("ECHO_PREFIX", "") + text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the given reason."""
    # ToolError (not a bare exception) so the reason reaches the client instead of a generic line.
    raise ToolError(reason)


@server.tool()
def run(command: str, purpose: str) -> str:
    """Pretend to run a command; the purpose is what the owner would be asked about."""
    return f"would run {command!r} to {purpose}"


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after the given number of seconds."""
    await anyio.sleep(seconds)
    return "done"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """This server's process id, so a test can end it from outside."""
    return os.getpid()


@server.tool()
def saved(file_id: int) -> dict[str, object]:
    """Claim to have saved a file: what a server reports as its artefact (`file_id`, `files`)."""
    return {"file_id": file_id, "files": [file_id]}


@server.tool()
def exit_now(code: int = 3) -> str:
    """End the server process at once, as a crash would."""
    sys.stderr.write(f"echo server exiting with {code}\n")
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    server.run()
