"""The events of one running turn, readable by any number of followers while it runs.

The turn itself runs as its own task, so it completes and is saved even if every follower
(an HTTP client) goes away; a reopened client can follow it again from the start.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from actors.session.events import TurnEvent

# A chat turn is at most 10 model steps; this bounds memory even for a runaway stream.
MAX_EVENTS = 5_000


class TurnLog:
    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.events: list[TurnEvent] = []
        self.finished = False
        self.cancelled = False
        self._changed = asyncio.Condition()

    async def push(self, event: TurnEvent) -> None:
        async with self._changed:
            if len(self.events) < MAX_EVENTS or event.type in ("done", "error"):
                self.events.append(event)
            if event.type in ("done", "error"):
                self.finished = True
            self._changed.notify_all()

    def spoken(self) -> str:
        return " ".join(e.data["text"] for e in self.events if e.type == "sentence")

    async def follow(self, start: int = 0) -> AsyncIterator[TurnEvent]:
        i = start
        while True:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.events) > i or self.finished)
                batch = self.events[i:]
                done = self.finished
            for event in batch:
                yield event
            i += len(batch)
            if done and i >= len(self.events):
                return
