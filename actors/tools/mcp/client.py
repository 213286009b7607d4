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
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import IO, Any

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, Tool
from pydantic import ValidationError

from actors.tools.config import ServerConfig
from actors.tools.mcp.outcomes import (
    CallOutcome, McpCallError, McpConnectError, McpError, McpTimeout, McpUnavailable, describe_error,
    result_text)
from actors.tools.mcp.resolve import Scrubber, resolve_server
from actors.tools.mcp.streams import StderrTail, watched

logger = logging.getLogger(__name__)

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
        self._stderr: StderrTail | None = None
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
        with self._failures("the tool list"):
            for _ in range(_MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallOutcome:
        """Run one tool. A tool's own failure comes back as `is_error=True`; a refused request
        raises McpCallError, a lost connection McpUnavailable, a slow answer McpTimeout."""
        client = self._require()
        with self._failures(f"the answer from {tool}"):
            # TimeoutError is an OSError: it is told apart here, before _failures reads it as a
            # lost link.
            try:
                async with asyncio.timeout(timeout):
                    result = await client.call_tool(tool, arguments)
            except TimeoutError:
                raise McpTimeout(f"{self.name}: {tool} did not answer within {timeout:g} s") from None
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

    @contextlib.contextmanager
    def _failures(self, answer: str) -> Iterator[None]:
        """A request's failures as McpError: refused (McpCallError), link gone (McpUnavailable),
        or `answer` not following the protocol."""
        try:
            yield
        except MCPError as exc:
            raise self._mcp_error(exc) from None
        except _TRANSPORT_ERRORS as exc:
            raise self._lost(exc) from None
        except ValidationError:
            raise McpCallError(f"{self.name}: {answer} did not follow the protocol") from None

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
        tail = StderrTail(self.name, self.scrub)
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
                client = Client(watched(transport, self._on_eof), cache=None)
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
