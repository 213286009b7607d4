"""One connection to one MCP server (stdio or streamable HTTP), on the official SDK.

The SDK's `Client` is an async context manager built on anyio task groups, which must be entered
and left by the same task. So each connection owns a runner task that holds the client open until
`close()` or until the connection is lost; calls from other tasks go through the client it holds.

Losing the connection is noticed three ways: the server's message stream ends (a stdio process
exits), the transport's own tasks fail (an HTTP server goes away mid-call), or a call fails with a
transport error. Each ends the runner, and `wait_lost()` returns why.

Every message that leaves this module (exceptions, log lines) is scrubbed first: the usual token
shapes via `mask_secrets`, plus the exact header and secret-looking env values of this server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import IO, Any, Literal, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)
from pydantic import BaseModel, Field, ValidationError

from actors.logmask import mask_secrets
from actors.tools.config import ServerConfig

logger = logging.getLogger(__name__)

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_WHITESPACE = re.compile(r"\s+")
# Env and header names whose values are credentials; those values are scrubbed from messages
# verbatim (Authorization matches through "auth").
_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|auth|credential|cookie|session)")
# Shorter values ("1", "true", "Bearer") would garble messages without protecting anything.
_MIN_SECRET_LEN = 6
_STDERR_LINES = 20
_STDERR_DRAIN_S = 1.0
_CLOSE_TIMEOUT_S = 10.0
_MAX_LIST_PAGES = 50
# Matches the SDK's own defaults: a server may hold a response stream open for minutes.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# Errors that mean the link to the server is gone, as opposed to the server answering "no".
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    OSError, httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream,
)
# Protocol errors after which the session cannot carry on (the HTTP server forgot our session).
_SESSION_GONE = ("Session terminated",)


# ---------------------------------------------------------------------------------------------
# Configuration helpers: expansion, header hygiene, the /mcp path rule, error text.


def expand_vars(text: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` from `environ`; the default applies when unset or empty.

    An unset variable without a default becomes empty, as in a shell; `requires_env` is the place
    to insist that one is set.
    """
    def one(match: re.Match[str]) -> str:
        value = environ.get(match.group(1), "")
        default = match.group(2)
        return default if default is not None and not value else value

    return _VAR.sub(one, text)


def normalise_header(value: str) -> str:
    """A key pasted with a trailing newline (or a tab inside) is an invalid header value; keep the
    words, one space between them."""
    return _WHITESPACE.sub(" ", value).strip()


def mcp_url(url: str) -> str:
    """A bare base URL (`https://host` or `https://host/`) means the conventional `/mcp` endpoint;
    any explicit path, `/mcp` included, is kept as written."""
    parts = urlsplit(url.strip())
    if parts.path in ("", "/"):
        parts = parts._replace(path="/mcp")
    return urlunsplit(parts)


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


class ResolvedServer(BaseModel):
    """A server entry with `${VAR}`s expanded, headers cleaned and the URL completed."""

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Values to scrub from any message: the values of headers and env variables named like
        credentials, and a header's last word on its own (the token after "Bearer")."""
        found: list[str] = []
        for key, value in self.headers.items():
            if _SECRET_NAME.search(key):
                found.append(value)
                found.append(value.rsplit(" ", 1)[-1])
        for key, value in self.env.items():
            if _SECRET_NAME.search(key):
                found.append(value.strip())
        # Longest first, so a whole header value goes before its tail is looked for.
        return sorted({s for s in found if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)


def resolve_server(name: str, config: ServerConfig, environ: Mapping[str, str]) -> ResolvedServer:
    def x(text: str) -> str:
        return expand_vars(text, environ)

    url = mcp_url(x(config.url)) if config.url else None
    return ResolvedServer(
        name=name,
        transport=config.transport,
        command=x(config.command) if config.command else None,
        args=[x(a) for a in config.args],
        env={k: x(v) for k, v in config.env.items()},
        url=url,
        headers={normalise_header(k): normalise_header(x(v)) for k, v in config.headers.items()},
    )


class Scrubber:
    """Masks the usual token shapes and this server's own secret values."""

    def __init__(self, secrets: list[str]) -> None:
        self._secrets = secrets

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return mask_secrets(text)


# ---------------------------------------------------------------------------------------------
# Errors raised to the catalogue; their text is already scrubbed and fit to show.


class McpError(Exception):
    """Base for connection errors; str() is scrubbed, one line."""


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


# ---------------------------------------------------------------------------------------------
# Transport plumbing.


class _EofWatch:
    """The transport's read stream, reporting when it ends.

    A stdio server that exits closes its stdout, which ends this stream; nothing else in the SDK
    surfaces that while no request is in flight.
    """

    def __init__(self, inner: Any, on_eof: Any) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's contextvars from here (streamable HTTP sets them).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_eof()
            raise

    def __aiter__(self) -> _EofWatch:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._on_eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _EofWatch:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def _watched(transport: AbstractAsyncContextManager[Any], on_eof: Any) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _EofWatch(read_stream, on_eof), write_stream


class _StderrTail(asyncio.Protocol):
    """Keeps the last lines a stdio server wrote to stderr: the one clue to why it exited."""

    def __init__(self, server: str, scrub: Scrubber) -> None:
        self.lines: deque[str] = deque(maxlen=_STDERR_LINES)
        self._server = server
        self._scrub = scrub
        self._partial = b""
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        *complete, self._partial = (self._partial + data).split(b"\n")
        if len(self._partial) > 8192:  # a line without end should not grow without bound
            complete.append(self._partial)
            self._partial = b""
        for raw in complete:
            line = raw.decode(errors="replace").rstrip()
            if line:
                self.lines.append(line)
                logger.debug("mcp %s stderr: %s", self._server, self._scrub(line))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()

    def last(self) -> str | None:
        return self._scrub(self.lines[-1]) if self.lines else None


# ---------------------------------------------------------------------------------------------


class McpConnection:
    """One live session with one MCP server.

    `start()` connects (spawning the process for stdio) and returns once the handshake is done;
    `call()` and `list_tools()` work while `alive`; `wait_lost()` returns, with a reason, when the
    connection ends for any reason other than `close()`. A connection is single-use: after it is
    lost, make a new one.
    """

    def __init__(self, name: str, config: ServerConfig, environ: Mapping[str, str] | None = None, *,
                 connect_timeout: float = 30.0) -> None:
        self.name = name
        self.server = resolve_server(name, config, os.environ if environ is None else environ)
        self.scrub = Scrubber(self.server.secrets())
        self._connect_timeout = connect_timeout
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._done = asyncio.Event()
        self._closing = False
        self._reason: str | None = None
        self._stderr: _StderrTail | None = None
        # Our copy of the stderr pipe's write end, closed once the child holds its own.
        self._errlog: IO[str] | None = None

    @property
    def alive(self) -> bool:
        return self._client is not None and self._reason is None and not self._closing

    @property
    def error(self) -> str | None:
        """Why the connection ended (scrubbed), or None while it is up or was closed by us."""
        return self._reason

    async def start(self) -> None:
        """Connect and handshake, within `connect_timeout`; raises McpConnectError."""
        if self._task is not None:
            raise RuntimeError("an McpConnection starts once; make a new one to reconnect")
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self.name}")
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait({ready, self._task}, timeout=self._connect_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self._task.cancel()
            raise
        finally:
            ready.cancel()
        if self._ready.is_set():
            if self.alive:
                return
            # Connected and lost at once: let the runner finish its own orderly shutdown.
            await asyncio.wait({self._task})
        elif not self._task.done():
            self._set_reason(f"no answer within {self._connect_timeout:g} s")
            self._task.cancel()
            await asyncio.wait({self._task})
        reason = self._reason or "the connection ended during start-up"
        if self.server.url:
            # Which address failed matters most for remote servers; the scrubber has already
            # masked any key in its query string (and does so again here for the URL itself).
            reason = f"{reason} ({self.scrub(self.server.url)})"
        raise McpConnectError(reason)

    async def list_tools(self) -> list[Tool]:
        client = self._require()
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            for _ in range(_MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except MCPError as exc:
            raise self._mcp_error(exc) from None
        except _TRANSPORT_ERRORS as exc:
            raise self._lost(exc) from None
        except ValidationError:
            raise McpCallError(f"{self.name}: the tool list did not follow the protocol") from None
        return tools

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallOutcome:
        """Run one tool. A tool's own failure comes back as `is_error=True`; a refused request
        raises McpCallError, a lost connection McpUnavailable, a slow answer McpTimeout."""
        client = self._require()
        try:
            async with asyncio.timeout(timeout):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            raise McpTimeout(f"{self.name}: {tool} did not answer within {timeout:g} s") from None
        except MCPError as exc:
            raise self._mcp_error(exc) from None
        except _TRANSPORT_ERRORS as exc:
            raise self._lost(exc) from None
        except ValidationError:
            raise McpCallError(f"{self.name}: the answer from {tool} did not follow the protocol") from None
        return CallOutcome(self.scrub(result_text(result)), result.is_error, result.structured_content)

    async def wait_lost(self) -> str:
        """Wait until the connection ends; returns why (empty when closed by us)."""
        await self._done.wait()
        return self._reason or ""

    async def close(self) -> None:
        self._closing = True
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if not self._ready.is_set():
            # Still handshaking: there is no session to end politely.
            task.cancel()
        # stdio shutdown is bounded inside the SDK (stdin close, grace, kill); HTTP ends its
        # session with one DELETE, which a hung server could stall, hence the outer bound.
        # Waiting here keeps server processes from outliving whoever closes the connection.
        _, pending = await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT_S)
        if pending:
            task.cancel()
            await asyncio.wait({task})

    # -- internals -------------------------------------------------------------------------

    def _require(self) -> Client:
        if self._client is None or not self.alive:
            raise McpUnavailable(f"{self.name} is not connected" + (f" ({self._reason})" if self._reason else ""))
        return self._client

    def _set_reason(self, reason: str) -> None:
        if self._reason is None and not self._closing:
            self._reason = self.scrub(reason)

    def _lost(self, exc: BaseException | str) -> McpUnavailable:
        self._set_reason(exc if isinstance(exc, str) else describe_error(exc))
        self._stop.set()
        return McpUnavailable(f"{self.name}: {self._reason or 'the connection closed'}")

    def _mcp_error(self, exc: MCPError) -> McpError:
        if exc.code == REQUEST_TIMEOUT:
            return McpTimeout(f"{self.name}: {self.scrub(exc.message)}")
        if exc.code == CONNECTION_CLOSED or exc.message in _SESSION_GONE:
            return self._lost(self._eof_reason() if exc.code == CONNECTION_CLOSED else exc.message)
        return McpCallError(f"{self.name}: {self.scrub(exc.message)}")

    def _eof_reason(self) -> str:
        if self.server.transport == "stdio":
            return "the server process exited"
        return "the server closed the connection"

    def _on_eof(self) -> None:
        if not self._closing:
            self._set_reason(self._eof_reason())
            self._stop.set()

    async def _open_transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Any]:
        server = self.server
        if server.transport == "http":
            assert server.url is not None  # McpConfig validation guarantees it
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=server.headers, timeout=_HTTP_TIMEOUT))
            return streamable_http_client(server.url, http_client=http)
        assert server.command is not None  # McpConfig validation guarantees it
        params = StdioServerParameters(command=server.command, args=server.args, env=server.env)
        errlog = await self._stderr_pipe(stack)
        return stdio_client(params, errlog=errlog)

    async def _stderr_pipe(self, stack: AsyncExitStack) -> IO[str]:
        read_fd, write_fd = os.pipe()
        tail = _StderrTail(self.name, self.scrub)
        reader = os.fdopen(read_fd, "rb")
        try:
            pipe_transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: tail, reader)
        except OSError:
            reader.close()
            os.close(write_fd)
            raise
        stack.callback(pipe_transport.close)
        # Exit order is last-in first-out: the client (and the process) goes, then the drain,
        # then the pipe is closed.
        stack.push_async_callback(self._drain_stderr)
        self._stderr = tail
        self._errlog = os.fdopen(write_fd, "w")
        return self._errlog

    async def _drain_stderr(self) -> None:
        """By now the SDK has stopped the process; its last words may still be in the pipe, and
        they are the best explanation of a crash. Bounded, since a grandchild may hold the pipe."""
        if self._stderr is not None and not self._closing:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_STDERR_DRAIN_S):
                    await self._stderr.closed.wait()

    async def _run(self) -> None:
        failure: str | None = None
        try:
            async with AsyncExitStack() as stack:
                transport = await self._open_transport(stack)
                errlog = self._errlog
                client = Client(_watched(transport, self._on_eof), cache=None)
                try:
                    await stack.enter_async_context(client)
                finally:
                    # The child holds its own copy of the write end by now; ours must go, or the
                    # pipe never reports EOF.
                    if errlog is not None:
                        errlog.close()
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except (MCPError, *_TRANSPORT_ERRORS, ValueError, TimeoutError) as exc:
            # ValueError: a header httpx refuses, a NUL in a spawn argument, a malformed answer.
            failure = describe_error(exc)
        except BaseExceptionGroup as group:
            if not _only_cancellations(group):
                failure = describe_error(group)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # boundary: a background task must not die silently
            logger.exception("mcp %s: connection task failed", self.name)
            failure = describe_error(exc)
        finally:
            self._client = None
            if failure is not None:
                self._set_reason(failure)
            if self._reason is not None and self._stderr is not None and (last := self._stderr.last()):
                self._reason = f"{self._reason} (last stderr line: {last})"
            if not self._closing:
                self._set_reason("the connection closed")
                if self._ready.is_set():
                    logger.warning("mcp %s: connection lost: %s", self.name, self._reason)
                else:
                    logger.debug("mcp %s: could not connect: %s", self.name, self._reason)
            self._done.set()


def _only_cancellations(group: BaseExceptionGroup[BaseException]) -> bool:
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return all(isinstance(e, asyncio.CancelledError) for e in leaves)
