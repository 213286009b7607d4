"""EmbedderActor "embedder": the sentence encoder loaded once per cluster.

The model takes about 150 MB; loading it in every session actor would multiply that by the
number of live conversations. Session actors reach it through RemoteEncoder instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TYPE_CHECKING

import numpy as np
import ray
from ray.exceptions import RayActorError

from actors.common.names import EMBEDDER, NAMESPACE
from actors.common.restart import through_restart
from actors.memory.embed import Embedder, load_embedder

if TYPE_CHECKING:
    from ray.actor import ActorHandle


@ray.remote(num_cpus=0, max_restarts=-1)
class EmbedderActor:
    def __init__(self) -> None:
        self.embedder: Embedder | None = None
        self._loaded = False

    async def info(self) -> dict[str, Any] | None:
        """The model's id and width, or None when no encoder is installed or configured."""
        if not self._loaded:
            self.embedder = await load_embedder()
            self._loaded = True
        if self.embedder is None:
            return None
        return {"model_id": self.embedder.model_id, "dim": self.embedder.dim}

    async def encode(self, texts: list[str]) -> np.ndarray:
        if not self._loaded:
            await self.info()  # restarted in place: load the model again before the first encode
        if self.embedder is None:
            raise RuntimeError("no sentence encoder is loaded")
        return await asyncio.to_thread(self.embedder.encode, texts)


class RemoteEncoder:
    """The Encoder protocol over the actor; memory's vector code awaits `encode_async`."""

    def __init__(self, handle: ActorHandle, model_id: str, dim: int) -> None:
        self.handle, self.model_id, self.dim = handle, model_id, dim

    async def encode_async(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return await self.handle.encode.remote(list(texts))
        except RayActorError:
            # It restarts in place when it dies (max_restarts): once more, after it is back.
            return await through_restart(lambda: self.handle.encode.remote(list(texts)))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("RemoteEncoder is asynchronous: use encode_async")


async def remote_encoder() -> RemoteEncoder | None:
    # `get_if_exists` is a blocking GCS lookup: kept off the event loop.
    handle = await asyncio.to_thread(lambda: EmbedderActor.options(
        name=EMBEDDER, namespace=NAMESPACE, get_if_exists=True, lifetime="detached").remote())
    info = await handle.info.remote()
    return RemoteEncoder(handle, info["model_id"], info["dim"]) if info else None
