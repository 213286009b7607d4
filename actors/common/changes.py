"""A change stamp a caller can park on: `epoch:count`, where the epoch is new in every process
that keeps one (so a restarted actor never repeats a stamp its callers saw before its death)
and the count grows on every change. The provider router's state and the tool catalogue keep
one each; their callers hold a copy while a parked `newer_than` says nothing changed.
No Ray, nothing else of ours."""

from __future__ import annotations

import asyncio
import uuid


class ChangeStamp:
    def __init__(self) -> None:
        self.epoch = uuid.uuid4().hex[:8]
        self.count = 0
        self._changed: asyncio.Event | None = None

    @property
    def version(self) -> str:
        return f"{self.epoch}:{self.count}"

    def bump(self) -> None:
        """Something changed: every parked caller wakes."""
        self.count += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def newer_than(self, seen: str, wait: float) -> str:
        """The version once it differs from `seen` (at once when it already does), or after
        `wait` seconds."""
        if seen == self.version:
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                await asyncio.wait_for(self._changed.wait(), wait)
            except TimeoutError:
                pass
        return self.version
