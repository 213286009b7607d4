"""Long-poll waiters: a /wait parks a future here and the next matching append resolves it.

No polling loop: `notify` runs inside the append, so a waiter learns of a message in the same
event-loop step that stored it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from actors.common.errors import IriisError

Envelope = dict[str, Any]


class Gone(IriisError):
    """The session was purged while a waiter was parked."""

    code = "gone"


class _Waiter:
    __slots__ = ("since", "match", "future")

    def __init__(self, since: int, match: Callable[[Envelope], bool], future: asyncio.Future[list[Envelope]]) -> None:
        self.since = since
        self.match = match
        self.future = future


class WaiterHub:
    def __init__(self, max_waiters: int = 10000) -> None:
        self._waiters: list[_Waiter] = []
        self.max_waiters = max_waiters

    def __len__(self) -> int:
        return len(self._waiters)

    async def wait(self, since: int, match: Callable[[Envelope], bool], timeout: float) -> list[Envelope] | None:
        """The first matching envelopes appended after `since`, or None after `timeout` seconds."""
        if len(self._waiters) >= self.max_waiters:
            # Bounded, like every queue here: the oldest parked poll is answered empty (a 204,
            # which every client already handles by polling again).
            oldest = self._waiters.pop(0)
            if not oldest.future.done():
                oldest.future.set_result([])
        waiter = _Waiter(since, match, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            # The future itself is awaited (no shield, no wait_for task), so a wake resumes the
            # waiter in the next step of the loop; at the timeout the future is cancelled.
            async with asyncio.timeout(timeout):
                found = await waiter.future
            return found or None
        except TimeoutError:
            return None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def notify(self, envelopes: list[Envelope]) -> int:
        """Resolve every waiter that one of `envelopes` satisfies; returns how many woke."""
        woke = 0
        keep: list[_Waiter] = []
        for waiter in self._waiters:
            if waiter.future.done():
                continue
            hits = [e for e in envelopes if e["seq"] > waiter.since and waiter.match(e)]
            if hits:
                waiter.future.set_result(hits)
                woke += 1
            else:
                keep.append(waiter)
        self._waiters = keep
        return woke

    def fail_all(self) -> None:
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_exception(Gone())
        self._waiters = []
