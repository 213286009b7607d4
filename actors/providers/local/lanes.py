"""Lanes: chat first, memory's learning calls in the gaps (used by actors/providers/local/adapter.py).

One small CPU model serves both a person's turns and memory's learning calls. ``Lanes`` is the
bookkeeping both sides of that share: how many chat calls are in flight, when chat last ended,
a generation bumped at every chat start (a learning call that sees it change steps aside), and
the tasks the adapter keeps alive. It is per process (one AgentLoop replica by default) and holds
no policy of its own: how long "quiet" must last is the caller's to say.
"""

from __future__ import annotations

import asyncio
import time


class Lanes:
    """Chat first: learning calls wait for a quiet moment and step aside when chat arrives."""

    def __init__(self) -> None:
        self.chat = 0
        self.quiet = asyncio.Event()
        self.quiet.set()
        self.generation = 0  # bumped whenever a chat call starts
        self.last_chat = 0.0
        self.learning = 0  # learning calls in flight
        self.learning_runs = 0
        self.primer: asyncio.Task[None] | None = None  # held so it is not collected mid-run
        self.ahead: asyncio.Task[None] | None = None
        self.holds: set[asyncio.Task[None]] = set()
        # The last chat step's prompt and what the model wrote: what the server had cached
        # before memory's calls replaced it.
        self.last_prompt: tuple[str, list[dict[str, str]]] | None = None

    def chat_started(self) -> None:
        self.chat += 1
        self.generation += 1
        self.quiet.clear()

    async def wait_quiet(self, seconds: float) -> None:
        """Return once no chat call runs and the last one ended `seconds` ago."""
        while True:
            await self.quiet.wait()
            left = self.last_chat + seconds - time.monotonic()
            if left <= 0 and self.chat == 0:
                return
            await asyncio.sleep(max(0.05, left))

    def chat_ended(self) -> None:
        self.chat = max(0, self.chat - 1)
        self.last_chat = time.monotonic()
        if self.chat == 0:
            self.quiet.set()
