"""The local model as a provider: the router sees one more `stream()` with its own health.

Under the hood it is the same OpenAI-compatible adapter pointed at the LocalModel actor's
loopback server, with three things a small CPU model needs:

* the compact offline profile (actors/providers/local/profile.py), stable prefix first;
* tool calls by JSON-schema choice (actors/providers/local/choice.py) instead of free tool
  calls, turned back into ordinary ToolCalls so the turn pipeline applies unchanged;
* lanes: memory's learning calls wait while a chat turn runs and give way to one that starts
  (the call is dropped and run again after it), so learning never delays a person. The lane
  is per process (one AgentLoop replica by default).

While the model is not ready, `stream()` fails with kind "not_ready" (no penalty in the
router) and the caller falls back to the stand-in, which says why.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from actors.providers.local import choice as choosing
from actors.providers.local import learning, profile
from actors.providers.local.catalog import writes_asks
from actors.providers.local.status import LocalStatus
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.types import Delta, ProviderError, StreamEnd, TextDelta, ToolCall

STATUS_TTL = 1.0
# Prompt reading is slow on CPU: the first byte of a long prompt may take this long.
MIN_TIMEOUT = 120.0
ANSWER_TOKENS = 300
LEARNING_TOKENS = 700
MAX_TOOL_ROUNDS = 3
LEARNING_TRIES = 4
# Learning starts only once chat has been quiet this long: a prompt being read cannot be
# interrupted, so a person's next message should not arrive while one is.
QUIET_SECONDS = 8.0

StatusFn = Callable[[], Awaitable[LocalStatus]]


class Lanes:
    """Chat first: learning calls wait for a quiet moment and step aside when chat arrives."""

    def __init__(self) -> None:
        self.chat = 0
        self.quiet = asyncio.Event()
        self.quiet.set()
        self.generation = 0  # bumped whenever a chat call starts
        self.last_chat = 0.0

    def chat_started(self) -> None:
        self.chat += 1
        self.generation += 1
        self.quiet.clear()

    async def wait_quiet(self, seconds: float = QUIET_SECONDS) -> None:
        while True:
            await self.quiet.wait()
            left = self.last_chat + seconds - time.monotonic()
            if left <= 0 and self.chat == 0:
                return
            await asyncio.sleep(max(0.05, left))

    def chat_ended(self) -> None:
        self.chat = max(0, self.chat - 1)
        self.last_chat = time.monotonic()
        if self.chat == 0:
            self.quiet.set()


def _rounds_this_turn(messages: list[dict[str, Any]]) -> tuple[int, set[str]]:
    """Tool rounds since the person's message, and the tools already called in them."""
    rounds, called = 0, set()
    for m in reversed(messages):
        if m.get("role") == "user":
            break
        if m.get("role") == "assistant" and m.get("tool_calls"):
            rounds += 1
            called |= {c["function"]["name"] for c in m["tool_calls"]}
    return rounds, called


def _wants_json(messages: list[dict[str, Any]]) -> bool:
    return any("json" in str(m.get("content") or "").lower() for m in messages if m.get("role") == "system")


class LocalModelProvider:
    name = "local"

    def __init__(self, status: StatusFn, client: httpx.AsyncClient, lanes: Lanes | None = None,
                 lane: str = "chat") -> None:
        self._status_fn = status
        self.client = client
        self.lanes = lanes or Lanes()
        self.lane = lane
        self._status: LocalStatus | None = None
        self._checked = 0.0

    def learning(self) -> "LocalModelProvider":
        """The same model on the learning lane."""
        return LocalModelProvider(self._status_fn, self.client, self.lanes, lane="learning")

    async def status(self) -> LocalStatus:
        now = time.monotonic()
        if self._status is None or now - self._checked > STATUS_TTL:
            self._status, self._checked = await self._status_fn(), now
        return self._status

    async def _ready(self) -> OpenAICompatProvider:
        status = await self.status()
        if status.state != "ready" or not status.base_url:
            raise ProviderError("not_ready", status.line())
        return OpenAICompatProvider("local", status.base_url, None, self.client)

    async def stream(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                     timeout: float = 30.0, temperature: float | None = None) -> AsyncIterator[Delta]:
        inner = await self._ready()
        timeout = max(timeout, MIN_TIMEOUT)
        if self.lane == "learning":
            async for delta in self._learning(inner, model, messages, timeout):
                yield delta
            return
        self.lanes.chat_started()
        try:
            if tools:
                async for delta in self._choose(inner, model, messages, tools, timeout):
                    yield delta
            else:
                async for delta in inner.stream(model, profile.build(messages, None), None, timeout, temperature,
                                                extra={"max_tokens": ANSWER_TOKENS}):
                    yield delta
        finally:
            self.lanes.chat_ended()

    async def _choose(self, inner: OpenAICompatProvider, model: str, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]], timeout: float) -> AsyncIterator[Delta]:
        """One step by schema choice: the answer's text streamed, or one ordinary ToolCall."""
        last_user = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
        routed = choosing.select_tools(tools, last_user)
        rounds, called = _rounds_this_turn(messages)
        # After a tool's result: another tool only if a different one is needed, and only a few.
        allowed = [] if rounds >= MAX_TOOL_ROUNDS else [t for t in routed if choosing.tool_name(t) not in called]
        asks = writes_asks(model)
        prompt = profile.build(messages, routed, asks=asks)
        if os.environ.get("IRIIS_LOCAL_DEBUG"):
            with open(os.environ["IRIIS_LOCAL_DEBUG"], "a") as f:
                f.write(json.dumps({"prompt": prompt, "allowed": [choosing.tool_name(t) for t in allowed]}) + "\n")
        extra = {"response_format": {"type": "json_object", "schema": choosing.choice_schema(allowed, asks)},
                 "max_tokens": ANSWER_TOKENS, "temperature": 0.0}
        reader = choosing.ChoiceStream()
        end: StreamEnd | None = None
        async for delta in inner.stream(model, prompt, None, timeout, extra=extra):
            if isinstance(delta, TextDelta):
                text = reader.feed(delta.text)
                if text:
                    yield TextDelta(text=text)
            elif isinstance(delta, StreamEnd):
                end = delta
        call = reader.finish({choosing.tool_name(t) for t in allowed})
        if call is not None:
            yield ToolCall(id=f"local_{rounds}_{call.name}", name=call.name, arguments=call.arguments)
        yield StreamEnd(finish_reason="tool_calls" if call else (end.finish_reason if end else "stop"),
                        provider="local", model=model)

    async def _learning(self, inner: OpenAICompatProvider, model: str, messages: list[dict[str, Any]],
                        timeout: float) -> AsyncIterator[Delta]:
        """A memory call: JSON-constrained when it asks for JSON, run whole while chat is
        quiet, and started over if a chat turn begins meanwhile."""
        extra: dict[str, Any] = {"max_tokens": LEARNING_TOKENS, "temperature": 0.0}
        fmt = learning.response_format(_wants_json(messages))
        if fmt:
            extra["response_format"] = fmt
        messages = learning.cut(messages)
        for _try in range(LEARNING_TRIES):
            await self.lanes.wait_quiet()
            generation = self.lanes.generation
            parts: list[str] = []
            preempted = False
            async for delta in inner.stream(model, profile.build(messages, None), None, timeout, extra=extra):
                if self.lanes.generation != generation:
                    preempted = True
                    break  # closing the stream stops the server's generation
                if isinstance(delta, TextDelta):
                    parts.append(delta.text)
            if not preempted:
                yield TextDelta(text="".join(parts))
                yield StreamEnd(finish_reason="stop", provider="local", model=model)
                return
        raise ProviderError("not_ready", "the local model stayed busy with chat turns")
