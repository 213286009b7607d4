"""EventBus "device-events": hands each person's device events to their live streams and to
their other connected devices. Events are kept in the store first; this holds only the recent
ones in memory, so a restart loses nothing a stream could not read back from the store."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, TYPE_CHECKING

import ray

from actors.common.names import NAMESPACE
from actors.devices.frames import PushedEvent

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger(__name__)
BUS_NAME = "device-events"
RECENT = 200


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class EventBus:
    def __init__(self) -> None:
        self._events: dict[int, deque[dict[str, Any]]] = {}
        self._changed = asyncio.Event()
        self._devices: dict[int, dict[int, Any]] = {}

    def online(self, person_id: int, device_id: int, handle: ActorHandle) -> None:
        self._devices.setdefault(person_id, {})[device_id] = handle

    def offline(self, person_id: int, device_id: int) -> None:
        self._devices.get(person_id, {}).pop(device_id, None)

    def publish(self, person_id: int, event: dict[str, Any]) -> int:
        """Hand the event out; returns how many other devices it was sent to."""
        self._events.setdefault(person_id, deque(maxlen=RECENT)).append(event)
        self._changed.set()
        self._changed = asyncio.Event()
        frame = PushedEvent(event=event["event"], title=event["title"], text=event["text"],
                            data=event["data"], from_=event.get("device_id"))
        sent = 0
        for device_id, handle in list(self._devices.get(person_id, {}).items()):
            if device_id != event.get("device_id"):
                handle.push.remote(frame)
                sent += 1
        return sent

    async def take(self, person_id: int, after: int, timeout: float) -> list[dict[str, Any]]:
        """Events of the person newer than `after`, waiting up to `timeout` for the first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found = [e for e in self._events.get(person_id, ()) if e["id"] > after]
            left = deadline - loop.time()
            if found or left <= 0:
                return found
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                return []


def event_bus() -> Any:
    return EventBus.options(name=BUS_NAME, namespace=NAMESPACE, get_if_exists=True,
                            lifetime="detached").remote()
