"""Transport plumbing for an MCP connection: noticing a stream's end, keeping a stderr tail.

A stdio server that exits closes its stdout; nothing in the SDK surfaces that while no request is
in flight, so `watched` wraps the transport's read stream to report it. `StderrTail` keeps the
last lines a stdio server wrote to stderr, the one clue to why it exited.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

_STDERR_LINES = 20


class _EofWatch:
    """The transport's read stream, reporting when it ends.

    A stdio server that exits closes its stdout, which ends this stream; nothing else in the SDK
    surfaces that while no request is in flight.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
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
async def watched(transport: AbstractAsyncContextManager[Any], on_eof: Callable[[], None]) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _EofWatch(read_stream, on_eof), write_stream


class StderrTail(asyncio.Protocol):
    """Keeps the last lines a stdio server wrote to stderr: the one clue to why it exited."""

    def __init__(self, server: str, scrub: Callable[[str], str]) -> None:
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
