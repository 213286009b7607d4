"""The frame-ack gate: frames are worked on one at a time, the ack goes out as work starts (so
the next frame uploads while this one is perceived), and at most one frame waits. A client that
sends a third before its ack breaks the protocol. No Ray, no socket: the caller gives the ack
and the work as coroutines."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from actors.common.errors import ErrorInfo
from vision.frames import looks_like_jpeg


class BadFrame(ErrorInfo):
    """A frame refused at the socket: numbered, acked and reported like any other."""


def check_frame(data: bytes, limit: int) -> BadFrame | None:
    """Why a frame cannot be perceived (too large, not a JPEG), or None."""
    if len(data) > limit:
        return BadFrame(code="frame_too_large", message=f"The frame is {len(data)} bytes; the limit is {limit}. "
                                                        "Send a smaller JPEG (640x480 at quality 80 is plenty).")
    if not looks_like_jpeg(data):
        return BadFrame(code="not_jpeg", message="Frames must be JPEG images.")
    return None


class FrameGate:
    """One frame in work, one waiting; frames are numbered from 1 in arrival order."""

    def __init__(self, limit: int, ack: Callable[[int], Awaitable[None]],
                 work: Callable[[int, bytes | BadFrame], Awaitable[None]]) -> None:
        self.limit = limit
        self._ack, self._work = ack, work
        self.frames = 0
        self.pending: bytes | BadFrame | None = None
        self.worker: asyncio.Task[None] | None = None

    def offer(self, data: bytes) -> bool:
        """Take a frame; False when one is already waiting (the client broke the ack protocol)."""
        item: bytes | BadFrame = check_frame(data, self.limit) or data
        if self.worker is None:
            self.worker = asyncio.get_running_loop().create_task(self._run(item))
        elif self.pending is None:
            self.pending = item
        else:
            return False
        return True

    async def _run(self, item: bytes | BadFrame) -> None:
        current: bytes | BadFrame | None = item
        try:
            while current is not None:
                self.frames += 1
                index = self.frames
                await self._ack(index)
                await self._work(index, current)
                current, self.pending = self.pending, None
        finally:
            self.worker = None

    async def idle(self) -> None:
        """Wait until every frame taken so far has been worked on (tests)."""
        while self.worker is not None:
            await asyncio.shield(self.worker)

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
