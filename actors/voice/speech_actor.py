"""SpeechActor "speech": the speech models, loaded once per cluster.

Whisper tiny.en and the piper voice take a few hundred MB and about a second to load; every
voice socket (on any gateway replica) uses this one actor instead of loading them per session.
A named actor rather than a Serve deployment: one copy is what a two-core box wants (a
deployment's replicas would each load their own models), it is found by name from any
process like the sentence encoder, and it restarts behind the same handle. Hosted providers
are tried first through the shared ProviderRouter actors "router:speech" and "router:tts".
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray

from actors.common.names import NAMESPACE, SPEECH
from actors.logmask import install_log_masking
from actors.providers.router_actor import RemoteRouter, router_actor
from actors.settings import ProviderConfig
from actors.voice.engines import Heard, Said, SpeechService


async def shared_router(kind: str, providers: list[ProviderConfig]) -> RemoteRouter:
    handle = await asyncio.to_thread(router_actor, kind, providers)
    return RemoteRouter(handle)


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class SpeechActor:
    def __init__(self, environ: dict[str, str] | None = None) -> None:
        install_log_masking()
        self.service = SpeechService(environ, routers=shared_router)

    async def warm(self) -> dict[str, Any]:
        return await self.service.warm()

    async def transcribe(self, pcm: bytes, rate: int) -> Heard:
        return await self.service.transcribe(pcm, rate)

    async def synthesize(self, text: str) -> Said:
        return await self.service.synthesize(text)


async def speech_actor(environ: dict[str, str] | None = None) -> Any:
    """The cluster's speech actor, started on first use (the lookup is kept off the loop)."""
    return await asyncio.to_thread(lambda: SpeechActor.options(
        name=SPEECH, namespace=NAMESPACE, get_if_exists=True, lifetime="detached").remote(environ))
