"""A background long-poll per joined relay session: urgent messages wake our agent, messages
marked for a human reach the owner. It holds one /wait open at a time and never polls in a loop
faster than the relay answers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from actors.relay.agent_view import triage

log = logging.getLogger(__name__)
Envelope = dict[str, Any]
Callback = Callable[[str, Envelope], Awaitable[None]]


class Watcher:
    def __init__(self, uid: str, url: str, key: str, own_name: str, on_urgent: Callback,
                 on_human: Callback, since: int = 0, timeout: float = 55.0,
                 client: httpx.AsyncClient | None = None) -> None:
        self.uid, self.url, self.key, self.own_name = uid, url.rstrip("/"), key, own_name
        self.on_urgent, self.on_human = on_urgent, on_human
        self.since = since
        self.timeout = timeout
        self.client = client or httpx.AsyncClient(timeout=timeout + 15)
        self.task: asyncio.Task[None] | None = None
        self.stopped = asyncio.Event()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def step(self) -> bool:
        """One long-poll; False once the session is over for good (purged or unreachable key)."""
        reply = await self.client.get(f"{self.url}/wait", params={"since": self.since, "timeout": self.timeout},
                                      headers={"Authorization": f"Bearer {self.key}"})
        if reply.status_code == 204:
            return True
        if reply.status_code in (401, 404, 410):
            return False
        reply.raise_for_status()
        messages: list[Envelope] = reply.json()["messages"]
        if not messages:
            return True
        self.since = max(e["seq"] for e in messages)
        wake, human = triage(messages, self.own_name)
        for e in human:
            await self.on_human(self.uid, e)
        if wake:
            # One turn for a burst: the agent reads everything new anyway.
            await self.on_urgent(self.uid, wake[-1])
        return not any((e.get("metadata") or {}).get("event") == "session_terminated" for e in messages)

    async def run(self) -> None:
        try:
            while await self._step_safely():
                pass
        finally:
            self.stopped.set()

    async def _step_safely(self) -> bool:
        try:
            return await self.step()
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            # The relay or the tunnel is down for a moment: try again shortly, bounded.
            log.warning("relay watcher %s: %s", self.uid, exc)
            await asyncio.sleep(2.0)
            return True
