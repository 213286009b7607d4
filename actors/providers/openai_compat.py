"""The OpenAI-compatible chat adapter over httpx: streaming text, tool calls and images.

It covers hosted providers and self-hosted servers alike; failures come out as ProviderError
with a kind the router understands.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from actors.common.trace import mark
from actors.providers.types import Delta, ProviderError, StreamEnd, TextDelta, ToolCall

log = logging.getLogger(__name__)


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def classify_status(status: int, body: str, retry_after: float | None) -> ProviderError:
    snippet = body[:300]
    lowered = snippet.lower()
    if status == 429:
        return ProviderError("rate_limit", f"429: {snippet}", status, retry_after)
    if status == 404:
        return ProviderError("not_found", f"404: {snippet}", status)
    if status in (401, 403):
        return ProviderError("auth", f"{status}: {snippet}", status)
    if status in (400, 413) and "image" in lowered and ("many" in lowered or "limit" in lowered):
        return ProviderError("too_many_images", f"{status}: {snippet}", status)
    if status >= 500:
        return ProviderError("server", f"{status}: {snippet}", status, retry_after)
    return ProviderError("bad_request", f"{status}: {snippet}", status)


def count_images(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for part in content if isinstance(part, dict) and part.get("type") == "image_url")
    return n


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as strict servers accept them: an assistant message that only calls tools
    carries "" rather than a null content (llama.cpp's server answers null with a 422)."""
    out = []
    for m in messages:
        if m.get("content") is None and m.get("role") in ("assistant", "system", "user", "tool"):
            m = {**m, "content": ""}
        out.append(m)
    return out


class _ToolCallAccumulator:
    """Streamed tool calls arrive as fragments keyed by index; join them."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}

    def add(self, fragment: dict[str, Any]) -> None:
        slot = self.calls.setdefault(int(fragment.get("index", len(self.calls))),
                                     {"id": "", "name": "", "arguments": ""})
        if fragment.get("id"):
            slot["id"] = fragment["id"]
        fn = fragment.get("function") or {}
        if fn.get("name"):
            slot["name"] += fn["name"]
        if fn.get("arguments"):
            slot["arguments"] += fn["arguments"]

    def finish(self) -> list[ToolCall]:
        out: list[ToolCall] = []
        for index in sorted(self.calls):
            slot = self.calls[index]
            try:
                args = json.loads(slot["arguments"]) if slot["arguments"].strip() else {}
            except json.JSONDecodeError:
                args = {"_raw": slot["arguments"]}
            if not isinstance(args, dict):
                args = {"value": args}
            out.append(ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"], arguments=args))
        return out


class OpenAICompatProvider:
    """One provider base URL + key; `stream()` talks to one of its models."""

    def __init__(self, name: str, base_url: str, api_key: str | None, client: httpx.AsyncClient) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key.strip() if api_key else None
        self.client = client

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def list_models(self, timeout: float = 10.0) -> list[str]:
        try:
            resp = await self.client.get(f"{self.base_url}/models", headers=self._headers(), timeout=timeout)
        except httpx.HTTPError as exc:
            raise ProviderError("network", f"model discovery failed: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise classify_status(resp.status_code, resp.text, None)
        data = resp.json().get("data", [])
        return [m["id"] for m in data if isinstance(m, dict) and "id" in m]

    async def _events(self, path: str, body: dict[str, Any], model: str, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """POST a streaming request and yield each decoded `data:` chunk until `[DONE]`.

        `timeout` bounds the wait for the first byte and every gap between chunks, so a
        provider that hangs is detected without capping a long, steadily streaming answer.
        """
        request_timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        mark("provider.request")
        first = True
        try:
            async with self.client.stream(
                "POST", f"{self.base_url}{path}", json=body, headers=self._headers(), timeout=request_timeout,
            ) as resp:
                if resp.status_code != 200:
                    text = (await resp.aread()).decode("utf-8", "replace")
                    raise classify_status(resp.status_code, text, parse_retry_after(resp.headers.get("retry-after")))
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except json.JSONDecodeError:
                        log.warning("provider %s sent a malformed stream line", self.name)
                        continue
                    if "error" in chunk:
                        err = chunk["error"]
                        message = err.get("message", str(err)) if isinstance(err, dict) else str(err)
                        raise ProviderError("server", f"stream error: {message[:200]}")
                    if first:
                        mark("provider.first")
                        first = False
                    yield chunk
        except httpx.TimeoutException:
            raise ProviderError("timeout", f"{self.name}/{model} timed out after {timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise ProviderError("network", f"{self.name}: {type(exc).__name__}") from None

    async def stream(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        timeout: float = 30.0,
        temperature: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> AsyncIterator[Delta]:
        """Yield text deltas as they arrive, then any tool calls, then StreamEnd.
        `extra` adds request fields (`response_format`, `max_tokens`, ...)."""
        body: dict[str, Any] = {**(extra or {}), "model": model, "messages": wire_messages(messages),
                                "stream": True}
        if tools:
            body["tools"] = tools
        if temperature is not None:
            body["temperature"] = temperature
        calls = _ToolCallAccumulator()
        finish: str | None = None
        async with aclosing(self._events("/chat/completions", body, model, timeout)) as chunks:
            async for chunk in chunks:
                for choice in chunk.get("choices", []):
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        yield TextDelta(text=delta["content"])
                    for fragment in delta.get("tool_calls") or []:
                        calls.add(fragment)
                    finish = choice.get("finish_reason") or finish
        for call in calls.finish():
            yield call
        yield StreamEnd(finish_reason=finish, provider=self.name, model=model)

    async def complete(self, model: str, prompt: str, timeout: float = 30.0,
                       extra: dict[str, Any] | None = None) -> AsyncIterator[Delta]:
        """A raw text completion (`/completions`), streamed: for a server whose prompt the
        caller renders itself (a local model continuing text it was given)."""
        body: dict[str, Any] = {**(extra or {}), "model": model, "prompt": prompt, "stream": True}
        finish: str | None = None
        async with aclosing(self._events("/completions", body, model, timeout)) as chunks:
            async for chunk in chunks:
                for choice in chunk.get("choices", []):
                    if choice.get("text"):
                        yield TextDelta(text=choice["text"])
                    finish = choice.get("finish_reason") or finish
        yield StreamEnd(finish_reason=finish, provider=self.name, model=model)
