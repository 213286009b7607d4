"""The local model as a provider: the router sees one more `stream()` with its own health.

Under the hood it is the same OpenAI-compatible adapter pointed at the LocalModel actor's
loopback server, with three things a small CPU model needs:

* the compact offline profile (actors/providers/local/profile.py), stable prefix first;
* tool calls by JSON-schema choice (actors/providers/local/choice.py) instead of free tool
  calls, turned back into ordinary ToolCalls so the turn pipeline applies unchanged;
* lanes (actors/providers/local/lanes.py): memory's learning calls wait while a chat turn
  runs and give way to one that starts (the call is dropped and run again after it), so
  learning never delays a person. The lane is per process (one AgentLoop replica by default).

While the model is not ready, `stream()` fails with kind "not_ready" (no penalty in the
router) and the caller falls back to the stand-in, which says why.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

import httpx

from actors.common.background import spawn
from actors.common.text import last_user_messages
from actors.providers.local import choice as choosing
from actors.providers.local import chatml, cues, grounding, learning, profile, transcript
from actors.providers.local.catalog import renders_chatml, writes_asks
from actors.providers.local.lanes import Lanes
from actors.providers.local.rounds import rounds_this_turn
from actors.providers.local.status import LocalStatus
from actors.providers.local.transcript import Renderings
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
# After memory's calls, the last chat prompt is read again (llama.cpp keeps one cached prompt),
# once no other learning call has followed for this long.
PRIME_AFTER_SECONDS = 1.0
# On a learning server of its own (paused while chat runs), learning waits only this long after
# a turn, and a call may spend a while paused.
APART_QUIET_SECONDS = 1.0
LEARNING_TIMEOUT = 900.0
# GBNF for an answer's first token: it opens a JSON string.
OPEN_STRING = 'root ::= "\\"" [^"]*'

log = logging.getLogger(__name__)
StatusFn = Callable[[], Awaitable[LocalStatus]]
HoldFn = Callable[[bool], Awaitable[None]]


def _learning_request(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The body fields and the cut prompt of one of memory's calls."""
    extra: dict[str, Any] = {"max_tokens": LEARNING_TOKENS, "temperature": 0.0}
    fmt = learning.response_format(_wants_json(messages))
    if fmt:
        extra["response_format"] = fmt
    return extra, learning.cut(messages)


def _wants_json(messages: list[dict[str, Any]]) -> bool:
    return any("json" in str(m.get("content") or "").lower() for m in messages if m.get("role") == "system")


class LocalModelProvider:
    name = "local"

    def __init__(self, status: StatusFn, client: httpx.AsyncClient, lanes: Lanes | None = None,
                 lane: str = "chat", renderings: Renderings | None = None, hold: HoldFn | None = None) -> None:
        self._status_fn = status
        self.client = client
        self.lanes = lanes or Lanes()
        self.lane = lane
        self._status: LocalStatus | None = None
        self._checked = 0.0
        # What the model read and wrote for each message, shared by both lanes' objects.
        self.renderings = renderings if renderings is not None else Renderings()
        self.hold = hold  # pauses the learning server while chat runs (the actor's lease)

    def learning(self) -> "LocalModelProvider":
        """The same model on the learning lane."""
        return LocalModelProvider(self._status_fn, self.client, self.lanes, lane="learning",
                                  renderings=self.renderings, hold=self.hold)

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
            status = await self.status()
            if status.learning_url:
                separate = OpenAICompatProvider("local", status.learning_url, None, self.client)
                async for delta in self._learning_apart(separate, model, messages):
                    yield delta
                return
            async for delta in self._learning(inner, model, messages, timeout):
                yield delta
            return
        self.lanes.chat_started()
        # Only a learning server of its own is paused (none: nothing to call the actor for).
        holding = bool((await self.status()).learning_url)
        if holding and self.lanes.chat == 1:
            self._hold(True)
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
            if holding and self.lanes.chat == 0:
                self._hold(False)

    def _hold(self, paused: bool) -> None:
        """Pause (or let go on) the learning server, without waiting for it."""
        if self.hold is None:
            return

        async def run() -> None:
            try:
                await self.hold(paused)
            except Exception as exc:  # noqa: BLE001 - the lease lets it go on by itself
                log.info("learning server %s failed: %s", "pause" if paused else "release", exc)

        spawn(run(), self.lanes.holds)

    async def _choose(self, inner: OpenAICompatProvider, model: str, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]], timeout: float) -> AsyncIterator[Delta]:
        """One step by schema choice: the answer's text streamed, or one ordinary ToolCall.
        Only the tools the message gives a reason for are offered; with none, the model
        answers straight away (a shorter object to write before the first word)."""
        message, previous = last_user_messages(messages)
        head, offered = choosing.select_tools(tools, message, previous=previous or "")
        rounds, called = rounds_this_turn(messages)
        # After a tool's result: another tool only if a different one is needed, and only a few.
        allowed = [] if rounds >= MAX_TOOL_ROUNDS else [t for t in offered if choosing.tool_name(t) not in called]
        # A later request of the message still owed its tool (cues.owed): this step calls it.
        due = cues.owed(message, called, tools) if allowed else None
        owed = [t for t in allowed if due is not None and choosing.tool_name(t) == due[0]]
        if owed:
            allowed = owed
        asks = writes_asks(model)
        built = profile.build_turn(messages, head + [t for t in offered if not choosing.is_core(t)], asks=asks,
                                   renderings=self.renderings, reuse_current=rounds > 0)
        if rounds > 0:
            # After a tool's result: the request still owed, or a reply that covers every one.
            asked = cues.requests(message)
            profile.after_result(built, due[1] if owed and due else None, asked if len(asked) > 1 else [])
        prompt = built.messages
        if os.environ.get("IRIIS_LOCAL_DEBUG"):
            with open(os.environ["IRIIS_LOCAL_DEBUG"], "a") as f:
                f.write(json.dumps({"prompt": prompt, "allowed": [choosing.tool_name(t) for t in allowed],
                                    "at": time.time()}) + "\n")
        # The prompt as text, for a model whose template is ChatML (rendered once, for the step
        # and for the read-ahead after it); None: the server renders it.
        rendered = chatml.render(prompt) if renders_chatml(model) and chatml.renderable(prompt) else None
        reader = choosing.ChoiceStream()
        end: StreamEnd | None = None
        said: list[str] = []
        async with aclosing(self._step(inner, model, prompt, rendered, allowed, asks, timeout,
                                       answer=not owed)) as deltas:
            async for delta in deltas:
                if isinstance(delta, TextDelta):
                    text = reader.feed(delta.text)
                    if text:
                        said.append(text)
                        yield TextDelta(text=text)
                    if reader.done:
                        break  # a bare answer has closed: what follows its quote is not read
                elif isinstance(delta, StreamEnd):
                    end = delta
        call = reader.finish({choosing.tool_name(t) for t in allowed})
        self._remember(model, built, reader.raw, call, "".join(said))
        if rendered is not None and call is None and (reader.done or (end is not None and end.finish_reason == "stop")):
            self._read_ahead(inner, model, rendered + reader.raw + chatml.NEXT_USER)
        if call is not None:
            # The person's own words for a time, not the date the model worked out (grounding.py).
            parameters = next(((t.get("function") or {}).get("parameters") or {} for t in allowed
                               if choosing.tool_name(t) == call.name), {})
            # An owed request's call reads its own request's words (the message may hold two times).
            arguments = grounding.ground(call.arguments, parameters, due[1] if owed and due else message)
            yield ToolCall(id=f"local_{rounds}_{call.name}", name=call.name, arguments=arguments)
        yield StreamEnd(finish_reason="tool_calls" if call else (end.finish_reason if end else "stop"),
                        provider="local", model=model)

    def _read_ahead(self, inner: OpenAICompatProvider, model: str, text: str) -> None:
        """Once a reply is written, have the server read what every next turn starts with (the
        reply's end and the opening of the person's message, `text`) while the person reads and
        answers: a continued turn then reads only the message itself, at ~30 ms a token here."""
        generation = self.lanes.generation

        async def run() -> None:
            await asyncio.sleep(0)  # after the step's stream has closed
            if self.lanes.generation != generation:
                return  # another step already started: it reads its own prompt
            try:
                async with aclosing(inner.complete(model, text, MIN_TIMEOUT,
                                                   extra={"max_tokens": 1, "temperature": 0.0})) as deltas:
                    async for _delta in deltas:
                        pass
            except Exception as exc:  # noqa: BLE001 - best effort (a closed client, a stopped server)
                log.info("local model read-ahead skipped: %s", exc)

        self.lanes.ahead = asyncio.get_running_loop().create_task(run())

    def _step(self, inner: OpenAICompatProvider, model: str, prompt: list[dict[str, str]], rendered: str | None,
              allowed: list[dict[str, Any]], asks: bool, timeout: float, answer: bool = True) -> AsyncIterator[Delta]:
        """The request for one step: held to the choice's JSON schema (a call of one of
        `allowed` or, with `answer`, an answer), or, with no tool to offer on a ChatML model, an
        answer whose grammar covers only its first token."""
        if not allowed and rendered is not None:
            return self._answer(inner, model, rendered, timeout)
        schema = choosing.choice_schema(allowed, asks, answer=answer) if allowed else choosing.ANSWER_ONLY
        extra = {"response_format": {"type": "json_object", "schema": schema},
                 "max_tokens": ANSWER_TOKENS, "temperature": 0.0}
        return inner.stream(model, prompt, None, timeout, extra=extra)

    async def _answer(self, inner: OpenAICompatProvider, model: str, text: str,
                      timeout: float) -> AsyncIterator[Delta]:
        """An answer-only step as two requests. The first writes one token under a grammar
        that makes it open a JSON string (the model picks `"The` as it would in a JSON
        reply); the second goes on from it with no grammar, since checking a 150k-token
        vocabulary against one costs ~30 ms a token here (measured 11 vs 16 tokens/s). Handing
        the model a bare `"` instead cuts a word from its token (`"` then `The`), and it then
        answers worse ("Who wrote Hamlet?" -> "Hamlet")."""
        first = ""
        async with aclosing(inner.complete(model, text, timeout, extra={
                "max_tokens": 1, "temperature": 0.0, "grammar": OPEN_STRING})) as deltas:
            async for delta in deltas:
                if isinstance(delta, TextDelta):
                    first += delta.text
        yield TextDelta(text=first)
        # The reader stops here if that token closed the string; otherwise the rest follows.
        async with aclosing(inner.complete(model, text + first, timeout, extra={
                "max_tokens": ANSWER_TOKENS - 1, "temperature": 0.0})) as deltas:
            async for delta in deltas:
                yield delta

    def _remember(self, model: str, built: profile.Built, raw: str, call: ToolCall | None, answer: str) -> None:
        """Keep what the model read and wrote, so the next step and the next turn render it
        the same way and the server's cached prefix covers it."""
        if built.user_key is None or built.user_rendered is None or not raw:
            return
        self.renderings.put(built.user_key, built.user_rendered)
        if call is not None:
            plain, role = profile.call_text(call.name, call.arguments), "call"
        else:
            plain, role = answer.strip(), "assistant"
        if plain:
            self.renderings.put(transcript.key(role, plain, built.after_user), raw)
        self.lanes.last_prompt = (model, [*built.messages, {"role": "assistant", "content": raw}])

    async def prime(self, inner: OpenAICompatProvider | None = None, model: str | None = None,
                    prompt: list[dict[str, str]] | None = None) -> bool:
        """Have the server read `prompt` (by default the last chat step's) and write one token,
        so a chat turn that follows finds it cached. Skipped while chat or learning runs."""
        if prompt is None:
            if self.lanes.last_prompt is None:
                return False
            model, prompt = self.lanes.last_prompt
        if self.lanes.chat or self.lanes.learning:
            return False
        try:
            inner = inner or await self._ready()
            async for _delta in inner.stream(model or "local", prompt, None, MIN_TIMEOUT, extra={"max_tokens": 1}):
                pass
        except (ProviderError, httpx.HTTPError) as exc:
            log.info("local model prime skipped: %s", exc)
            return False
        return True

    async def prime_head(self, model: str, tools: list[dict[str, Any]]) -> bool:
        """Read the prompt's stable head (instruction, core tools, examples) once the model is
        ready, before any conversation needs it."""
        head, _offered = choosing.select_tools(tools, "")
        return await self.prime(None, model, profile.build([{"role": "user", "content": "hello"}], head,
                                                           asks=writes_asks(model)))

    async def _prime_later(self, inner: OpenAICompatProvider) -> None:
        runs = self.lanes.learning_runs
        await asyncio.sleep(PRIME_AFTER_SECONDS)
        if runs == self.lanes.learning_runs:
            await self.prime(inner)

    async def _learning_apart(self, server: OpenAICompatProvider, model: str,
                              messages: list[dict[str, Any]]) -> AsyncIterator[Delta]:
        """A memory call on the learning server: it waits only for the turn in flight to end,
        since a turn that starts meanwhile pauses the server where it is (no work lost, and
        the chat server's cached prompt is never replaced)."""
        extra, messages = _learning_request(messages)
        await self.lanes.wait_quiet(APART_QUIET_SECONDS)
        parts: list[str] = []
        async for delta in server.stream(model, profile.build(messages, None), None, LEARNING_TIMEOUT, extra=extra):
            if isinstance(delta, TextDelta):
                parts.append(delta.text)
        yield TextDelta(text="".join(parts))
        yield StreamEnd(finish_reason="stop", provider="local", model=model)

    async def _learning(self, inner: OpenAICompatProvider, model: str, messages: list[dict[str, Any]],
                        timeout: float) -> AsyncIterator[Delta]:
        """A memory call on the chat server (the learning server is not up): JSON-constrained
        when it asks for JSON, run whole while chat is quiet, and started over if a chat turn
        begins meanwhile; the chat prompt is read back in after it."""
        extra, messages = _learning_request(messages)
        for _try in range(LEARNING_TRIES):
            await self.lanes.wait_quiet(QUIET_SECONDS)
            generation = self.lanes.generation
            parts: list[str] = []
            preempted = False
            self.lanes.learning += 1
            self.lanes.learning_runs += 1
            try:
                async for delta in inner.stream(model, profile.build(messages, None), None, timeout, extra=extra):
                    if self.lanes.generation != generation:
                        preempted = True
                        break  # closing the stream stops the server's generation
                    if isinstance(delta, TextDelta):
                        parts.append(delta.text)
            finally:
                self.lanes.learning -= 1
            # This call replaced the chat prompt in the server's cache: read that back in.
            self.lanes.primer = asyncio.get_running_loop().create_task(self._prime_later(inner))
            if not preempted:
                yield TextDelta(text="".join(parts))
                yield StreamEnd(finish_reason="stop", provider="local", model=model)
                return
        raise ProviderError("not_ready", "the local model stayed busy with chat turns")
