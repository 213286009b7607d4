"""Speech to text through OpenAI-compatible /audio/transcriptions endpoints, with failover
across the configured speech providers. Failures are the one ProviderError."""

from __future__ import annotations

from actors.providers.failover import RouterClient
from actors.providers.types import ProviderError
from actors.providers.vision_http import first_answer, provider_post
from actors.settings import ProviderConfig


async def transcribe(provider: ProviderConfig, audio: bytes, filename: str, mime: str, timeout: float,
                     model: str | None = None) -> str:
    """The transcript from one provider (its first model unless ``model``). Raises ProviderError."""
    body = await provider_post(
        provider, "/audio/transcriptions", timeout=timeout,
        files={"file": (filename, audio, mime)},
        form={"model": model or provider.models[0], "response_format": "json"},
    )
    text = body.get("text")
    if not isinstance(text, str):
        raise ProviderError("bad_request", f"{provider.name} sent no transcript")
    return text.strip()


async def transcribe_any(providers: list[ProviderConfig], audio: bytes, filename: str, mime: str, timeout: float,
                         *, router: RouterClient | None = None) -> tuple[ProviderConfig, str, str]:
    """:func:`transcribe` with failover; returns (provider, model, transcript). Raises ProviderError."""
    async def call(provider: ProviderConfig, model: str) -> str:
        return await transcribe(provider, audio, filename, mime, timeout, model)

    return await first_answer(providers, call, router=router)
