"""Who may use the vision model now: a person's question preempts any background look (coach,
notice), background looks run one at a time and never while a question is answered, and a
background look that cannot start now is dropped, not queued."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LookScheduler:
    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]]) -> None:
        self._spawn = spawn
        self._background: asyncio.Task[Any] | None = None
        self.asking = 0  # questions being answered now

    @property
    def background_running(self) -> bool:
        return self._background is not None and not self._background.done()

    async def question(self, answer: Callable[[], Awaitable[T]]) -> T:
        """Run a question's look, cancelling any background look first."""
        if self.background_running:
            self._background.cancel()  # type: ignore[union-attr]
        self.asking += 1
        try:
            return await answer()
        finally:
            self.asking -= 1

    def background(self, look: Callable[[], Coroutine[Any, Any, Any]]) -> bool:
        """Start a background look unless one runs or a question is being answered; False
        when it was dropped."""
        if self.background_running or self.asking:
            return False
        self._background = self._spawn(look())
        return True
