"""Try providers in the router's order, reacting to each failure the way the spec asks.

Pure asyncio, no Ray: the router behind `RouterClient` is a local RouterState in tests and the
ProviderRouter actor in the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from actors.providers.openai_compat import OpenAICompatProvider, count_images
from actors.providers.router_state import WAIT_FOR_FREE, RouteEntry, RouterState
from actors.providers.types import AllProvidersFailed, Delta, ProviderError, TextDelta


class RouterClient(Protocol):
    async def candidates(self, images: int = 0) -> list[RouteEntry]: ...
    async def record(self, key: str, outcome: str, value: float | None = None) -> float: ...
    def note_success(self, key: str, elapsed: float) -> None: ...
    async def seconds_until_ready(self, images: int = 0) -> float | None: ...


def apply_outcome(state: RouterState, key: str, outcome: str, value: float | None) -> float:
    """Feed one call's outcome to the state machine; returns seconds to wait before a retry."""
    if outcome == "success":
        state.record_success(key, value or 0.0)
    elif outcome == "timeout":
        state.record_timeout(key)
    elif outcome in ("server", "network", "auth"):
        state.record_server_error(key)
    elif outcome == "rate_limit":
        return state.record_rate_limit(key, value)
    elif outcome == "not_found":
        state.record_not_found(key)
    elif outcome == "too_many_images":
        state.record_too_many_images(key, int(value or 0))
    # bad_request: our payload, not the provider's health; no penalty.
    return 0.0


class LocalRouter:
    """RouterClient over an in-process RouterState (tests, and single-process tools)."""

    def __init__(self, state: RouterState) -> None:
        self.state = state

    async def candidates(self, images: int = 0) -> list[RouteEntry]:
        return self.state.candidates(images)

    async def record(self, key: str, outcome: str, value: float | None = None) -> float:
        return apply_outcome(self.state, key, outcome, value)

    def note_success(self, key: str, elapsed: float) -> None:
        self.state.record_success(key, elapsed)

    async def seconds_until_ready(self, images: int = 0) -> float | None:
        return self.state.seconds_until_ready(images)


async def stream_with_failover(
    router: RouterClient,
    providers: dict[str, OpenAICompatProvider],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    timeout: float,
    person_waiting: bool = True,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> AsyncIterator[Delta]:
    """Stream from the first provider that answers.

    Once a provider has produced output we cannot switch: the person has already heard it,
    so a failure mid-answer is raised, not retried elsewhere.
    """
    images = count_images(messages)
    failed: list[ProviderError] = []
    answered = [False]

    async def attempt(entry: RouteEntry) -> AsyncIterator[Delta]:
        """One entry, with one retry after a short rate-limit wait; sets answered[0]."""
        provider = providers.get(entry.provider)
        if provider is None:
            return
        for _retry in range(2):
            started = time.monotonic()
            produced = False
            try:
                async for delta in provider.stream(entry.model, messages, tools, timeout):
                    if not produced:
                        produced = True
                        # Latency is time to first output: what the listener waits for.
                        # Not awaited: the first words must not wait on bookkeeping.
                        router.note_success(entry.key, time.monotonic() - started)
                    yield delta
                if not produced:
                    router.note_success(entry.key, time.monotonic() - started)
                answered[0] = True
                return
            except ProviderError as exc:
                failed.append(exc)
                value = float(images) if exc.kind == "too_many_images" else exc.retry_after
                wait = await router.record(entry.key, exc.kind, value)
                if produced:
                    raise
                if exc.kind == "rate_limit" and wait > 0:
                    await sleep(wait)
                    continue
                return

    for round_ in range(2):
        for entry in [e for e in await router.candidates(images) if not e.fallback]:
            async for delta in attempt(entry):
                yield delta
            if answered[0]:
                return
        if round_ == 0 and person_waiting:
            delay = await router.seconds_until_ready(images)
            if delay is not None and delay <= WAIT_FOR_FREE:
                await sleep(delay)
                continue
        break
    # Else: the local model (spec section 13), once every hosted provider has had its go.
    for entry in [e for e in await router.candidates(images) if e.fallback]:
        async for delta in attempt(entry):
            yield delta
        if answered[0]:
            return
    # The most telling failure: a hosted provider's rather than "the local model is not ready".
    last = next((e for e in reversed(failed) if e.kind != "not_ready"), failed[-1] if failed else None)
    raise AllProvidersFailed(last)


async def complete_text(
    router: RouterClient,
    providers: dict[str, OpenAICompatProvider],
    messages: list[dict[str, Any]],
    timeout: float,
    *,
    person_waiting: bool,
    max_chars: int | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> str:
    """The whole text of one answer without tools, stopped once it passes `max_chars` (so a
    runaway answer cannot hold the caller). Raises AllProvidersFailed or ProviderError."""
    parts: list[str] = []
    size = 0
    async for delta in stream_with_failover(router, providers, messages, None, timeout,
                                            person_waiting=person_waiting, sleep=sleep):
        if isinstance(delta, TextDelta):
            parts.append(delta.text)
            size += len(delta.text)
            if max_chars is not None and size >= max_chars:
                break
    text = "".join(parts)
    return text if max_chars is None else text[:max_chars]
