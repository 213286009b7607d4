"""Calls in flight to one device: ids, the per-device cap, timeouts, and failing them all when
the connection goes. Pure asyncio; the DeviceActor owns one. Every call ends in a `CallReply`,
whose failure is an `ErrorInfo` with a stable code."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from pydantic import BaseModel

from actors.common.errors import ErrorInfo
from actors.devices.frames import Hello, ResultFrame
from actors.devices.protocol import FAILED, content_text

BUSY = "the device is busy: it already has {n} calls running; try again in a moment"
NO_ANSWER = "the device did not answer within {s:g} s; it may be asleep or offline"
LOST = "the device's connection ended before it answered ({why})"
OFFLINE = "the device is not connected"
NO_TOOL = "the device offers no tool named {tool!r}"


class CallReply(BaseModel):
    """How a call to a device ended: its content, or why it failed."""

    ok: bool
    content: Any = None
    error: ErrorInfo | None = None

    @classmethod
    def failed(cls, code: str, message: str) -> CallReply:
        return cls(ok=False, error=ErrorInfo(code=code, message=message))

    @classmethod
    def of_result(cls, frame: ResultFrame) -> CallReply:
        if frame.ok:
            return cls(ok=True, content=frame.content)
        return cls.failed("device_failed", str(frame.error) if frame.error else FAILED)

    def text(self) -> str:
        """What the model reads: the content (summary first), or the error's sentence."""
        if not self.ok:
            return self.error.message if self.error else FAILED
        return content_text(self.content)


def refuse_call(hello: Hello | None, connected: bool, tool: str) -> CallReply | None:
    """Why a call cannot even be tried (offline, no such tool), or None."""
    if not connected or hello is None:
        return CallReply.failed("device_offline", OFFLINE)
    if not hello.offers(tool):
        return CallReply.failed("unknown_tool", NO_TOOL.format(tool=tool))
    return None


class CallTable:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, asyncio.Future[CallReply]] = {}

    def __len__(self) -> int:
        return len(self._open)

    def busy(self) -> CallReply:
        return CallReply.failed("device_busy", BUSY.format(n=self.limit))

    def open(self) -> tuple[str, asyncio.Future[CallReply]] | None:
        """A new call id and the future its result resolves; None when the device is busy."""
        if len(self._open) >= self.limit:
            return None
        call_id = secrets.token_hex(8)
        future: asyncio.Future[CallReply] = asyncio.get_running_loop().create_future()
        self._open[call_id] = future
        return call_id, future

    def resolve(self, call_id: str | None, frame: ResultFrame) -> bool:
        future = self._open.pop(call_id, None) if isinstance(call_id, str) else None
        if future is None or future.done():
            return False
        future.set_result(CallReply.of_result(frame))
        return True

    def drop(self, call_id: str) -> None:
        self._open.pop(call_id, None)

    def fail_all(self, why: str) -> int:
        failed = 0
        for future in self._open.values():
            if not future.done():
                future.set_result(CallReply.failed("device_disconnected", LOST.format(why=why)))
                failed += 1
        self._open.clear()
        return failed

    async def wait(self, call_id: str, future: asyncio.Future[CallReply], seconds: float) -> CallReply:
        try:
            return await asyncio.wait_for(future, seconds)
        except asyncio.TimeoutError:
            self.drop(call_id)
            return CallReply.failed("device_timeout", NO_ANSWER.format(s=seconds))
