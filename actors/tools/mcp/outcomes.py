"""What an MCP connection hands back: the outcome of a call, and errors fit to show.

Error text raised from here on is already scrubbed (see actors.tools.mcp.resolve.Scrubber) and
one line; `describe_error` makes that line from whatever the SDK or the transport raised.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, NamedTuple

from mcp.shared.exceptions import MCPError
from mcp_types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from actors.common.errors import IriisError


class McpError(IriisError):
    """Base for connection errors; str() is scrubbed, one line."""

    code = "tool_server_error"


class McpConnectError(McpError):
    """The server could not be started or reached, or did not complete the handshake."""


class McpUnavailable(McpError):
    """The connection is gone (or was never up); the server needs restarting."""


class McpCallError(McpError):
    """The server is up but refused the request (unknown tool, bad arguments, bad answer)."""


class McpTimeout(McpError):
    """The server did not answer within the time given; the connection stays up."""


class CallOutcome(NamedTuple):
    text: str
    is_error: bool
    structured: Any


def result_text(result: CallToolResult) -> str:
    """Text for the model: text blocks as they are, other media named but not inlined."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, (ImageContent, AudioContent)):
            parts.append(f"[{block.type} ({block.mime_type}) not shown]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri} not shown]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource: {block.uri}]")
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return text


def root_cause(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups.

    anyio task groups wrap a failed connect as ExceptionGroup(ExceptionGroup(ConnectError)), whose
    own text ("unhandled errors in a TaskGroup") says nothing; cancellations that ride along with
    the real failure are skipped.
    """
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def describe_error(exc: BaseException) -> str:
    """One readable line for an error, unwrapped from exception groups (not yet scrubbed)."""
    cause = root_cause(exc)
    text = str(cause).strip()
    name = type(cause).__name__
    if isinstance(cause, MCPError):
        return text or name
    return f"{name}: {text}" if text else name


# -- what a structured result names ----------------------------------------------------------

MAX_NAMED_SOURCES = 20


def file_ids(structured: Any) -> list[int]:
    """File handles a tool reported in its structured result (`file_id` or `files`)."""
    if not isinstance(structured, dict):
        return []
    ids = [structured.get("file_id")] + list(structured.get("files") or [])
    return list(dict.fromkeys(i for i in ids if isinstance(i, int) and not isinstance(i, bool)))


def named_sources(structured: Any) -> list[str]:
    """Sources a tool named in its structured result: a top-level `sources` list, or a `source`
    on each item of a list result (`{"result": [{..., "source": "memory:12"}]}`). A name can
    only add taint: the loop keeps the untrusted ones and, for a server that is not trusted,
    only those of the kind its own provenance already has."""
    if not isinstance(structured, dict):
        return []
    items = structured.get("result")
    named = list(structured.get("sources") or [])
    if isinstance(items, list):
        named += [i.get("source") for i in items if isinstance(i, dict)]
    return [s[:160] for s in named if isinstance(s, str) and s.strip()][:MAX_NAMED_SOURCES]
