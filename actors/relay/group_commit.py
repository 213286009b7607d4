"""Group commit: requests that arrive while a write is in flight are stored together by the next.

`submit` queues a request and waits for its own result; one drain task at a time hands the
queue, in arrival order and at most `most` at once, to `commit`, which stores the batch in one
transaction (for the relay: one call to the session's actor) and returns a result or an
exception per request. Nothing is answered before its batch has committed, and a batch that
fails fails only its own requests: the next batch starts afresh. Ray-free, so tested alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

I = TypeVar("I")
R = TypeVar("R")

Commit = Callable[[list[I]], Awaitable[list[R | Exception]]]


class GroupCommit(Generic[I, R]):
    def __init__(self, commit: Commit[I, R], most: int = 100) -> None:
        self._commit = commit
        self.most = most
        self._queue: list[tuple[I, asyncio.Future[R]]] = []
        self._drain_task: asyncio.Task[None] | None = None

    @property
    def idle(self) -> bool:
        """Nothing queued and no batch on its way."""
        return self._drain_task is None and not self._queue

    async def submit(self, item: I) -> R:
        """The request's result once its batch has committed, or its exception raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append((item, future))
        if self._drain_task is None:
            self._drain_task = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        batch: list[tuple[I, asyncio.Future[R]]] = []
        try:
            while self._queue:
                batch, self._queue = self._queue[:self.most], self._queue[self.most:]
                try:
                    results = await self._commit([item for item, _ in batch])
                    if len(results) != len(batch):
                        raise RuntimeError(f"commit answered {len(results)} of {len(batch)} requests")
                except Exception as exc:  # noqa: BLE001 - the batch's requests get the failure
                    results = [exc] * len(batch)
                for (_, future), result in zip(batch, results):
                    if future.done():  # its caller went away; the write stands
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
                batch = []
        finally:
            self._drain_task = None
            # Only when the drain itself is cancelled (the loop is shutting down): nobody is left
            # waiting forever, and whether the batch in flight committed is unknown.
            for _, future in batch + self._queue:
                future.cancel()
            self._queue = []
