"""How an AgentLoop replica takes the local model in: the provider on both lanes, its route
entry (a fallback: tried after every hosted provider), and its line for /v1/providers.

Kept here so the deployment only makes a few calls; the named actor is created (or found)
once per cluster with get_if_exists.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from actors.providers.local.actor import LocalConfig, local_model_actor
from actors.providers.local.adapter import LocalModelProvider
from actors.providers.local.catalog import choose
from actors.providers.local.status import PROVIDER, LocalStatus
from actors.providers.router_state import RouteEntry

log = logging.getLogger(__name__)
# How long a new replica waits for the model to be ready before priming (the first start builds
# the runtime and fetches the weights: about five minutes).
PRIME_WAIT_SECONDS = 5.0
PRIME_WAIT_POLLS = 360
# The longest a chat turn keeps the learning server paused (a lease, renewed by the next turn).
HOLD_SECONDS = 90.0


class LocalWiring:
    def __init__(self, config: LocalConfig, client: httpx.AsyncClient) -> None:
        self.config = config
        self.name = choose(config.model, config.hosted).name
        self.handle = local_model_actor(config)
        self.chat = LocalModelProvider(self._state, client, hold=self._hold)
        self.learning = self.chat.learning()
        self.entry = RouteEntry(provider=PROVIDER, model=self.name, base_url="local", fallback=True)
        self._primer: asyncio.Task[None] | None = None

    @classmethod
    def attach(cls, config: LocalConfig | None, client: httpx.AsyncClient) -> "LocalWiring | None":
        """The wiring, or None when IRIIS_LOCAL_MODEL leaves the local model off."""
        if config is None or not choose(config.model, config.hosted).enabled:
            return None
        return cls(config, client)

    async def _state(self) -> LocalStatus:
        return await self.handle.state.remote()

    async def _hold(self, paused: bool) -> None:
        if paused:
            await self.handle.hold_learning.remote(HOLD_SECONDS)
        else:
            await self.handle.release_learning.remote()

    async def status(self) -> LocalStatus:
        try:
            return await self.chat.status()
        except Exception as exc:  # noqa: BLE001 - the actor restarting: say so, never fail the caller
            log.warning("local model status unavailable: %s", exc)
            return LocalStatus(state="getting_ready", model=self.name, stage="restarting", detail=str(exc)[:100])

    def prime_head_soon(self, tools: Callable[[], Awaitable[list[dict[str, Any]]]]) -> None:
        """Once per process: when the model is ready, have it read the stable head of every
        offline prompt, so the first conversation does not wait for it. Skipped when the local
        model is only a fallback behind a hosted one."""
        if self.config.hosted or self._primer is not None:
            return
        self._primer = asyncio.get_running_loop().create_task(self._prime_head(tools))

    async def _prime_head(self, tools: Callable[[], Awaitable[list[dict[str, Any]]]]) -> None:
        for _ in range(PRIME_WAIT_POLLS):
            status = await self.status()
            if status.state == "ready":
                try:
                    await self.chat.prime_head(self.name, await tools())
                except Exception as exc:  # noqa: BLE001 - only a head start; the first turn pays instead
                    log.info("local model head not primed: %s", exc)
                return
            if status.state in ("failed", "off"):
                return
            await asyncio.sleep(PRIME_WAIT_SECONDS)

    async def note(self) -> str | None:
        """What the stand-in says about the local model; None once it is ready."""
        status = await self.status()
        return None if status.state == "ready" else status.clause()

    async def row(self, snapshot: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """/v1/providers rows: the router's, with the local model's state and its line."""
        status = await self.status()
        rows = [r for r in snapshot if r.get("key") != self.entry.key]
        mine = next((r for r in snapshot if r.get("key") == self.entry.key),
                    {"key": self.entry.key, "ema": None, "resting_s": 0.0, "retired": False})
        return rows + [{**mine, "state": status.state, "status": status.line(), "error": status.error,
                        "fallback": True}]


def local_config(settings: Any, hosted: bool) -> LocalConfig:
    """The LocalConfig the deployment is bound with, from Settings."""
    return LocalConfig(model=settings.iriis_local_model, hosted=hosted, home=str(settings.iriis_home),
                       models_dir=str(settings.iriis_models_dir) if settings.iriis_models_dir else None,
                       threads=settings.iriis_local_threads)
