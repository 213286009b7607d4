"""LocalModel: the named actor ("local-model") that owns the local model, once per cluster.

It gets the runtime built and the weights in (in the background: the server answers with the
stand-in meanwhile), starts llama-cpp-python's server on a loopback port, restarts it if it
dies, and reports a LocalStatus that the adapter, GET /v1/providers and `iriis serve`'s
terminal read. Thin shell: the steps are in build.py, weights.py and llama_server.py.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel

from actors.common.names import LOCAL_MODEL, NAMESPACE
from actors.providers.local.build import BuildError, ensure_runtime
from actors.providers.local.catalog import choose
from actors.providers.local.llama_server import LlamaServer
from actors.providers.local.status import LocalStatus
from actors.providers.local.weights import WeightsError, ensure_weights

log = logging.getLogger(__name__)
MAX_RESTARTS = 3


class LocalConfig(BaseModel):
    model: str | None = None  # IRIIS_LOCAL_MODEL as given
    hosted: bool = False  # a hosted chat model is configured
    home: str
    models_dir: str | None = None
    threads: int | None = None
    n_ctx: int | None = None

    @property
    def models_path(self) -> Path:
        return Path(self.models_dir) if self.models_dir else Path(self.home) / "models"


async def prepare(config: LocalConfig, status: LocalStatus) -> LlamaServer | None:
    """Every step from nothing to a serving child, moving `status` along; None when off."""
    choice = choose(config.model, config.hosted)
    status.model = choice.name
    if not choice.enabled:
        status.state, status.detail = "off", choice.off_reason or ""
        return None
    status.state = "getting_ready"

    def progress(stage: str, detail: str) -> None:
        status.moved(stage, detail)

    try:
        status.moved("build", "checking llama-cpp-python")
        await asyncio.to_thread(ensure_runtime, Path(config.home) / "wheels", progress, sys.executable)
        status.moved("weights", "checking the model file")
        path = await asyncio.to_thread(ensure_weights, choice, config.models_path, progress, sys.executable)
        status.moved("load", f"loading {path.name}")
        n_ctx = config.n_ctx or (choice.source.n_ctx if choice.source else 4096)
        server = LlamaServer(path, choice.name, n_ctx, config.threads)
        await server.start()
    except (BuildError, WeightsError, RuntimeError, OSError) as exc:
        status.state, status.error = "failed", str(exc)
        log.warning("local model %s failed: %s", choice.name, exc)
        return None
    status.state, status.base_url, status.error = "ready", server.base_url, None
    status.moved("serve", "")
    return server


async def start_learning(server: LlamaServer, status: LocalStatus) -> LlamaServer | None:
    """The second server, for memory's learning calls, on the same weights (mapped, so shared);
    None when it cannot start (learning then shares the chat server)."""
    learning = LlamaServer(server.model, server.alias, server.n_ctx, server.threads)
    try:
        await learning.start()
    except (RuntimeError, OSError) as exc:
        log.warning("the learning server did not start (%s); learning shares the chat server", exc)
        return None
    status.learning_url = learning.base_url
    return learning


@ray.remote(num_cpus=0, max_restarts=-1)
class LocalModel:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = LocalConfig(**config)
        self.status = LocalStatus()
        self.server: LlamaServer | None = None
        self.learning: LlamaServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._held_until = 0.0
        self._release: asyncio.Task[None] | None = None

    def _ensure_started(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        self.server = await prepare(self.config, self.status)
        if self.server is not None:
            self.learning = await start_learning(self.server, self.status)
        while self.server is not None:
            await asyncio.sleep(2.0)
            if self.learning is not None and not self.learning.running():
                self.status.learning_url, self.learning = None, None  # learning shares the chat server
            if self.server.running():
                continue
            words = self.server.last_words()
            if self.status.restarts >= MAX_RESTARTS:
                self.status.state, self.status.base_url = "failed", None
                self.status.error = f"the llama.cpp server kept exiting ({words})"
                return
            self.status.restarts += 1
            self.status.state, self.status.base_url = "getting_ready", None
            self.status.moved("load", f"restarting after the server exited ({words})")
            try:
                await self.server.start()
            except RuntimeError as exc:
                self.status.state, self.status.error = "failed", str(exc)
                return
            self.status.state, self.status.base_url = "ready", self.server.base_url

    async def state(self) -> LocalStatus:
        self._ensure_started()
        return self.status.model_copy()

    async def hold_learning(self, seconds: float) -> None:
        """Pause the learning server while a chat turn runs, for at most `seconds` (a lease, so
        a lost release cannot leave it stopped); `release_learning` lets it go on."""
        if self.learning is None:
            return
        loop = asyncio.get_running_loop()
        self._held_until = loop.time() + seconds
        self.learning.pause(True)
        if self._release is None or self._release.done():
            self._release = loop.create_task(self._release_when_due())

    async def release_learning(self) -> None:
        self._held_until = 0.0
        if self.learning is not None:
            self.learning.pause(False)

    async def _release_when_due(self) -> None:
        loop = asyncio.get_running_loop()
        while (left := self._held_until - loop.time()) > 0:
            await asyncio.sleep(left)
        if self.learning is not None:
            self.learning.pause(False)

    async def stop(self) -> None:
        for server in (self.learning, self.server):
            if server:
                server.stop()


def local_model_actor(config: LocalConfig) -> Any:
    return LocalModel.options(name=LOCAL_MODEL, namespace=NAMESPACE, get_if_exists=True,
                              lifetime="detached").remote(config.model_dump())
