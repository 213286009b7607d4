"""What the vision model is told besides the frame: the owner's profile, the memories and people
that fit the question, excerpts of the owner's documents, and the stream's own state. No Ray:
the sources are plain async callables, read from the store in the actor and faked in tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from actors.camera import knowledge
from actors.camera.state import CameraState
from actors.memory.model import MindItem
from actors.memory.repository import PERSONA_KV, list_items
from actors.memory.select import select
from actors.store.store import Store
from vision.vlm import VisionContext

PROFILE_KEYS = ("address", "purpose", "avoid")
MAX_ITEMS = 2000


def owner_profile(persona: dict[str, Any] | None) -> str:
    """The persona fields a camera look may use, as one line."""
    if not persona:
        return ""
    return "; ".join(f"{k}: {v}" for k, v in persona.items() if v and k in PROFILE_KEYS)


class ContextBuilder:
    """Builds each look's VisionContext; the owner's documents are read once per stream."""

    def __init__(self, state: CameraState, *,
                 persona: Callable[[], Awaitable[dict[str, Any] | None]],
                 items: Callable[[], Awaitable[Iterable[MindItem]]],
                 documents: Callable[[], Awaitable[list[tuple[str, str]]]],
                 clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self._persona, self._items, self._load_documents = persona, items, documents
        self._documents: list[tuple[str, str]] | None = None
        self._clock = clock

    @classmethod
    def from_store(cls, store: Store, state: CameraState) -> ContextBuilder:
        async def persona() -> dict[str, Any] | None:
            return await store.get_kv(PERSONA_KV)

        async def items() -> list[MindItem]:
            return await list_items(store, active=True, limit=MAX_ITEMS)

        async def documents() -> list[tuple[str, str]]:
            return await knowledge.load_documents(store)

        return cls(state, persona=persona, items=items, documents=documents)

    async def build(self, query: str) -> VisionContext:
        # Two store reads at once: this is on the way to every answer.
        persona, items = await asyncio.gather(self._persona(), self._items())
        profile = owner_profile(persona)
        chosen = select(items, query, self._clock())
        # Only what the owner's own words taught: an item learned from outside content is not a fact.
        facts = "; ".join(i.text for i in chosen.memories + chosen.people if not i.provenance)
        if self._documents is None:
            self._documents = await self._load_documents()
        step = self.state.context().step
        excerpts = knowledge.best_excerpts(self._documents, f"{query} {self.state.goal} {step}")
        return self.state.context(owner_profile=profile, facts=facts, excerpts=excerpts)
