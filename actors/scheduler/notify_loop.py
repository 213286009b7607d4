"""The Ray side of delivery: the desktop announce (an event frame to each of the owner's
connected desktop devices) and the loop that drains the outbox (actors/notify/outbox.py) and
feeds the owner's device events to Telegram."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ray.exceptions import RayActorError

from actors.devices import repository as devices
from actors.devices.actor import live_devices_async
from actors.devices.frames import PushedEvent
from actors.devices.people import OWNER_ID
from actors.notify import outbox
from actors.notify.channels import Notice
from actors.notify.notifier import Announce, Notifier
from actors.store.store import Store

log = logging.getLogger(__name__)
DESKTOP_KINDS: tuple[str, ...] = ("mac", "windows", "linux")
TITLE_CHARS, TEXT_CHARS = 120, 1000


def desktop_announcer(store: Store) -> Announce:
    async def announce(notice: Notice) -> int:
        mine = {d.id for d in await devices.list_devices(store, person_id=OWNER_ID) if d.kind in DESKTOP_KINDS}
        if not mine:
            return 0
        frame = PushedEvent(event=notice.kind, title=notice.title[:TITLE_CHARS], text=notice.body[:TEXT_CHARS],
                            data={**notice.data, "url": notice.url, "priority": notice.priority})
        reached = 0
        for device_id, handle in (await live_devices_async()).items():
            if device_id in mine:
                try:
                    reached += bool(await handle.push.remote(frame))
                except RayActorError:
                    continue
        return reached
    return announce


class NotifyLoop:
    def __init__(self, store: Store, notifier: Notifier, interval: float,
                 clock: Callable[[], float]) -> None:
        self.store = store
        self.notifier = notifier
        self.interval = interval
        self.clock = clock
        self._wake = asyncio.Event()
        self.last: dict[str, int] = {}

    def wake(self) -> None:
        self._wake.set()

    async def once(self) -> dict[str, int]:
        await outbox.feed_device_events(self.store, self.notifier.config)
        self.last = await outbox.drain(self.store, self.notifier, self.clock())
        return self.last

    async def serve_forever(self) -> None:
        while True:
            try:
                await self.once()
            except Exception:  # the loop boundary: log and carry on at the next pass
                log.exception("notify loop failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
