"""The OCR lane: reading text takes several frames' time on a CPU, so it runs beside the frame
loop, one read at a time, on the newest frame once it is free and `every` frames have passed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class OcrLane:
    def __init__(self, read: Callable[[int, Any], Awaitable[None]]) -> None:
        self._read = read
        self.task: asyncio.Task[None] | None = None
        self.last_read = -10**9

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def offer(self, index: int, frame: Any, every: int) -> bool:
        """Start reading frame ``index`` when the lane is free and due; True when it started."""
        if self.busy or index - self.last_read < every:
            return False
        self.last_read = index
        self.task = asyncio.get_running_loop().create_task(self._read(index, frame))
        return True

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
