"""The call watcher's loop in the scheduler: every IRIIS_CALLS_INTERVAL seconds (10 by default),
or at once when a call was just made, `CallWatcher.tick` does what is due."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from actors.notify.notifier import Notifier
from actors.notify.watcher import CallWatcher
from actors.scheduler import tasks
from actors.store.store import Store

log = logging.getLogger(__name__)


def repeat_after(repeat: str, after: float) -> float:
    """A call's repeat reads like a task's: cron in the owner's time zone, or an interval."""
    return tasks.next_run_after(repeat, after, tasks.owner_timezone())


class CallsLoop:
    def __init__(self, store: Store, notifier: Notifier, interval: float, clock: Callable[[], float]) -> None:
        self.watcher = CallWatcher(store, notifier, repeat_after, clock)
        self.interval = interval
        self._wake = asyncio.Event()
        self.last: list[tuple[int, str]] = []

    def wake(self) -> None:
        self._wake.set()

    async def serve_forever(self) -> None:
        while True:
            try:
                self.last = await self.watcher.tick() or self.last
            except Exception:  # the loop boundary: log and carry on at the next tick
                log.exception("call watcher failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
