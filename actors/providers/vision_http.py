"""Plain (non-streaming) calls to OpenAI-compatible providers: which providers serve a kind,
one POST with its failures classified, failover across them, and a one-image vision question.

Speech-to-text (actors/providers/speech.py) rides on the same POST and failover. Every failure
is the one `ProviderError` of actors/providers/types.py, whose message is short and never holds
the key.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from actors.providers.failover import LocalRouter, RouterClient
from actors.providers.openai_compat import classify_status, parse_retry_after
from actors.providers.router_state import RouteEntry, RouterState
from actors.providers.types import ProviderError
from actors.settings import Kind, ProviderConfig

log = logging.getLogger(__name__)
T = TypeVar("T")

_PROVIDERS = TypeAdapter(list[ProviderConfig])


def configured_providers(kind: Kind, environ: Mapping[str, str] | None = None) -> list[ProviderConfig]:
    """The providers in IRIIS_PROVIDERS serving ``kind`` whose key is present, in order, each
    with its key resolved."""
    env = os.environ if environ is None else environ
    raw = (env.get("IRIIS_PROVIDERS") or "").strip()
    if not raw:
        return []
    try:
        providers = _PROVIDERS.validate_python(json.loads(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        # The server's own settings check reports this properly; here it only means "none".
        log.warning("IRIIS_PROVIDERS is not usable (%s)", type(exc).__name__)
        return []
    found: list[ProviderConfig] = []
    for provider in providers:
        if kind not in provider.kinds or (kind == "vision" and provider.max_images < 1):
            continue
        key = env.get(provider.api_key_env, "").strip() if provider.api_key_env else ""
        if provider.api_key_env and not key:
            continue  # a named key that is missing would only earn a 401
        found.append(provider.model_copy(update={"api_key": key or None}))
    return found


async def provider_post(
    provider: ProviderConfig,
    path: str,
    *,
    json_body: dict[str, Any] | None = None,
    files: dict[str, tuple[str, bytes, str]] | None = None,
    form: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """POST to an OpenAI-compatible provider and return the JSON body.

    Raises ProviderError, classified (timeout, network, rate_limit, server, ...) for failover.
    """
    headers = {"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {}
    url = provider.base_url.rstrip("/") + path
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))) as client:
            resp = await client.post(url, headers=headers, json=json_body, files=files, data=form)
    except httpx.TimeoutException:
        raise ProviderError("timeout", f"{provider.name} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ProviderError("network", f"{provider.name} could not be reached ({type(exc).__name__})") from None
    if resp.status_code >= 400:
        kind = classify_status(resp.status_code, resp.text, None)
        raise ProviderError(kind.kind, f"{provider.name} answered HTTP {resp.status_code}", resp.status_code,
                            parse_retry_after(resp.headers.get("retry-after")))
    try:
        body = resp.json()
    except ValueError:
        raise ProviderError("bad_request", f"{provider.name} answered with something that is not JSON") from None
    if not isinstance(body, dict):
        raise ProviderError("bad_request", f"{provider.name} answered with unexpected JSON")
    return body


def route_entries(providers: list[ProviderConfig]) -> list[RouteEntry]:
    return [RouteEntry(provider=p.name, model=m, base_url=p.base_url, api_key_env=p.api_key_env,
                       max_images=p.max_images) for p in providers for m in p.models]


async def first_answer(
    providers: list[ProviderConfig],
    call: Callable[[ProviderConfig, str], Awaitable[T]],
    *,
    router: RouterClient | None = None,
    images: int = 0,
) -> tuple[ProviderConfig, str, T]:
    """``call(provider, model)`` on each candidate in the router's order until one answers;
    returns (provider, model, answer). Without a router, a fresh one ranks the configured order.

    Raises the last ProviderError when every candidate failed (kind ``not_found`` when there
    was none to try).
    """
    by_name = {p.name: p for p in providers}
    router = router or LocalRouter(RouterState(route_entries(providers)))
    last: ProviderError | None = None
    for entry in await router.candidates(images):
        provider = by_name.get(entry.provider)
        if provider is None:
            continue
        started = time.monotonic()
        try:
            answer = await call(provider, entry.model)
        except ProviderError as exc:
            last = exc
            await router.record(entry.key, exc.kind, exc.retry_after)
            continue
        router.note_success(entry.key, time.monotonic() - started)
        return provider, entry.model, answer
    raise last or ProviderError("not_found", "No provider of that kind is configured.")


async def ask_vision(provider: ProviderConfig, model: str, image: bytes, mime: str, question: str,
                     timeout: float) -> str:
    """One image and one question to /chat/completions; the answer's text. Raises ProviderError."""
    data_url = f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
    body = await provider_post(provider, "/chat/completions", timeout=timeout, json_body={
        "model": model,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": question},
            {"type": "image_url", "image_url": {"url": data_url}},
        ]}],
        "max_tokens": 1024,
    })
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError("bad_request", f"{provider.name} sent no answer") from None
    if isinstance(content, list):  # some servers answer in content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "").strip()


async def ask_vision_any(providers: list[ProviderConfig], image: bytes, mime: str, question: str, timeout: float,
                         *, router: RouterClient | None = None) -> tuple[ProviderConfig, str, str]:
    """:func:`ask_vision` with failover; returns (provider, model, answer). Raises ProviderError."""
    async def call(provider: ProviderConfig, model: str) -> str:
        return await ask_vision(provider, model, image, mime, question, timeout)

    return await first_answer(providers, call, router=router, images=1)
