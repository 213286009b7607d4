"""Speech through OpenAI-compatible endpoints, with failover across the configured providers
(the same router rules as chat and vision: EMA order, rests, 429, retirement): speech to text
with /audio/transcriptions (kind "speech"), text to speech with /audio/speech (kind "tts").
Failures are the one ProviderError. The offline engines that follow them are actors/voice."""

from __future__ import annotations

import httpx

from actors.providers.failover import RouterClient
from actors.providers.openai_compat import classify_status, parse_retry_after
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


# -- text to speech ---------------------------------------------------------------------------

DEFAULT_VOICE = "alloy"


async def synthesize(provider: ProviderConfig, text: str, timeout: float, model: str | None = None,
                     voice: str = DEFAULT_VOICE) -> bytes:
    """Speech for ``text`` from one provider's /audio/speech, as the WAV file it answers
    (its first model unless ``model``). Raises ProviderError, classified for failover."""
    headers = {"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {}
    url = provider.base_url.rstrip("/") + "/audio/speech"
    body = {"model": model or provider.models[0], "input": text, "voice": voice, "response_format": "wav"}
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))) as client:
            resp = await client.post(url, headers=headers, json=body)
    except httpx.TimeoutException:
        raise ProviderError("timeout", f"{provider.name} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ProviderError("network", f"{provider.name} could not be reached ({type(exc).__name__})") from None
    if resp.status_code >= 400:
        kind = classify_status(resp.status_code, resp.text, None)
        raise ProviderError(kind.kind, f"{provider.name} answered HTTP {resp.status_code}", resp.status_code,
                            parse_retry_after(resp.headers.get("retry-after")))
    if resp.content[:4] != b"RIFF" or resp.content[8:12] != b"WAVE":
        raise ProviderError("bad_request", f"{provider.name} sent speech that is not a WAV file")
    return resp.content


async def synthesize_any(providers: list[ProviderConfig], text: str, timeout: float,
                         *, router: RouterClient | None = None) -> tuple[ProviderConfig, str, bytes]:
    """:func:`synthesize` with failover; returns (provider, model, wav). Raises ProviderError."""
    async def call(provider: ProviderConfig, model: str) -> bytes:
        return await synthesize(provider, text, timeout, model)

    return await first_answer(providers, call, router=router)
