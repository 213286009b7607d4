"""The events of one running turn, readable by any number of followers while it runs.

The turn itself runs as its own task, so a background turn completes and is saved even if
every follower (an HTTP client) goes away; a reopened client can follow it again from the start.

Two hooks let the owner make the turn durable: `spoken` runs after each sentence goes out (the
partial reply is written), and `settle` runs before the event that ends the turn is published
(the reply is in the store before any follower reads `done`; it may swap the event for an
error when the write failed).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from actors.session.events import ENDS_TURN, Sentence, ToolActivity, TurnEvent

# A chat turn is at most 10 model steps; this bounds memory even for a runaway stream.
MAX_EVENTS = 5_000


class TurnLog:
    def __init__(self, turn_id: str, background: bool = False) -> None:
        self.turn_id = turn_id
        self.background = background
        self.events: list[TurnEvent] = []
        self.finished = False
        self.cancelled = False
        self.detached = False  # the client that started it has gone
        self.heard: tuple[str | None, int | None] = (None, None)
        # The finished exchange, for reflection after the reply is delivered.
        self.exchange: dict[str, Any] | None = None
        # The untrusted sources the turn has read so far (its prompt's, then what its tool calls
        # brought in): a reply cut short by barge-in is saved with them.
        self.sources: list[str] = []
        self.spoken: Callable[[], None] | None = None
        self.settle: Callable[[TurnEvent], Awaitable[TurnEvent]] | None = None
        self._changed = asyncio.Condition()

    async def push(self, event: TurnEvent) -> None:
        if isinstance(event, ENDS_TURN) and self.settle is not None and not self.finished:
            event = await _uncancellable(self.settle(event))
        if isinstance(event, ToolActivity) and event.sources:
            self.sources = list(dict.fromkeys([*self.sources, *event.sources]))
        async with self._changed:
            if len(self.events) < MAX_EVENTS or isinstance(event, ENDS_TURN):
                self.events.append(event)
            if isinstance(event, ENDS_TURN):
                self.finished = True
            self._changed.notify_all()
        if isinstance(event, Sentence) and self.spoken is not None:
            self.spoken()

    def sentences(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, Sentence)]

    def first_sentence(self) -> str | None:
        sentences = self.sentences()
        return sentences[0] if sentences else None

    def heard_text(self) -> str:
        """What the owner actually heard before interrupting: up to the sentence (or the
        fragment of one) they reported, else everything that was sent."""
        sentences = self.sentences()
        heard, index = self.heard
        if index is not None:
            return " ".join(sentences[: max(0, index + 1)])
        if heard and heard.strip():
            fragment = heard.strip()
            for k in range(len(sentences) - 1, -1, -1):
                at = sentences[k].find(fragment)
                if at >= 0:
                    return " ".join(sentences[:k] + [sentences[k][: at + len(fragment)]])
        return " ".join(sentences)

    def progress(self) -> dict[str, Any]:
        tools = [e.data for e in self.events if isinstance(e, ToolActivity)]
        return {"turn_id": self.turn_id, "background": self.background, "finished": self.finished,
                "sentences": self.sentences(), "tools": tools}

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


async def _uncancellable(work: Awaitable[TurnEvent]) -> TurnEvent:
    """Finish the turn's last write even if the turn is cancelled meanwhile (a barge-in that
    lands during it): a turn that never ends would leave its followers waiting."""
    job = asyncio.ensure_future(work)
    while True:
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            if job.done():
                return job.result()
