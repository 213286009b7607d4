"""Calls in flight to one device: ids, the per-device cap, timeouts, and failing them all when
the connection goes. Pure asyncio; the DeviceActor owns one."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

BUSY = "the device is busy: it already has {n} calls running; try again in a moment"
NO_ANSWER = "the device did not answer within {s:g} s; it may be asleep or offline"
LOST = "the device's connection ended before it answered ({why})"


class CallTable:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self) -> tuple[str, asyncio.Future[dict[str, Any]]] | None:
        """A new call id and the future its result resolves; None when the device is busy."""
        if len(self._open) >= self.limit:
            return None
        call_id = secrets.token_hex(8)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._open[call_id] = future
        return call_id, future

    def resolve(self, call_id: Any, frame: dict[str, Any]) -> bool:
        future = self._open.pop(call_id, None) if isinstance(call_id, str) else None
        if future is None or future.done():
            return False
        future.set_result(frame)
        return True

    def drop(self, call_id: str) -> None:
        self._open.pop(call_id, None)

    def fail_all(self, why: str) -> int:
        failed = 0
        for future in self._open.values():
            if not future.done():
                future.set_result({"ok": False, "error": LOST.format(why=why)})
                failed += 1
        self._open.clear()
        return failed

    async def wait(self, call_id: str, future: asyncio.Future[dict[str, Any]], seconds: float) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(future, seconds)
        except asyncio.TimeoutError:
            self.drop(call_id)
            return {"ok": False, "error": NO_ANSWER.format(s=seconds)}
