"""One turn of the agent: model steps, tool calls, sentences out as soon as they are complete.

Pure asyncio: the AgentLoop deployment wraps it, tests drive it with the scripted server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from actors.providers.chunker import SentenceChunker
from actors.providers.guard import ToolCallGuard
from actors.providers.types import Delta, TextDelta, ToolCall
from actors.session.events import TurnEvent
from actors.tools.builtin import ToolBox, wrap_untrusted

MAX_CHAT_STEPS = 10
MAX_BACKGROUND_STEPS = 20
STEP_CAP_SENTENCE = (
    "I stopped here because this request needed more than {n} steps; "
    "ask me to continue if you want me to keep going."
)
EMPTY_RETRY_INSTRUCTION = (
    "Your previous reply was empty. Answer the user's last message now in plain text, without tools."
)
APOLOGY = "Sorry, I could not come up with an answer to that. Could you rephrase it?"

ModelFn = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], AsyncIterator[Delta]]


class _Speaker:
    """Guard then chunker: markup never reaches the listener, sentences leave as they complete."""

    def __init__(self, known_tools: set[str], start_index: int) -> None:
        self.guard = ToolCallGuard(known_tools) if known_tools else ToolCallGuard()
        self.chunker = SentenceChunker()
        self.index = start_index
        self.text = ""

    def _events(self, sentences: list[str]) -> list[TurnEvent]:
        out = []
        for s in sentences:
            out.append(TurnEvent(type="sentence", data={"text": s, "index": self.index}))
            self.index += 1
        return out

    def feed(self, delta: str) -> list[TurnEvent]:
        clean = self.guard.feed(delta)
        self.text += clean
        return self._events(self.chunker.feed(clean)) if clean else []

    def finish(self) -> tuple[list[TurnEvent], list[ToolCall]]:
        tail, recovered = self.guard.finish()
        self.text += tail
        events = self._events(self.chunker.feed(tail) + self.chunker.flush())
        calls = [ToolCall(id=f"recovered_{i}", name=c.name, arguments=c.arguments)
                 for i, c in enumerate(recovered)]
        return events, calls


def _assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in calls
        ],
    }


async def run_turn(
    model: ModelFn,
    messages: list[dict[str, Any]],
    toolbox: ToolBox,
    max_steps: int = MAX_CHAT_STEPS,
) -> AsyncIterator[TurnEvent]:
    """Yield sentence and tool events, then one `result` event with the whole reply.

    `messages` is the full prompt (system, history, the user's message); it is extended in
    place with this turn's assistant and tool messages.
    """
    schemas = toolbox.schemas() or None
    known = set(toolbox.specs)
    reply_parts: list[str] = []
    tool_trace: list[dict[str, Any]] = []
    index = 0
    retried_empty = False
    offer_tools = True
    for _step in range(max_steps):
        speaker = _Speaker(known, index)
        calls: list[ToolCall] = []
        async for delta in model(messages, schemas if offer_tools else None):
            if isinstance(delta, TextDelta):
                for event in speaker.feed(delta.text):
                    yield event
            elif isinstance(delta, ToolCall):
                calls.append(delta)
        events, recovered = speaker.finish()
        for event in events:
            yield event
        calls += recovered
        index = speaker.index
        text = speaker.text.strip()
        if text:
            reply_parts.append(text)
        if not calls:
            if text or reply_parts:
                break
            if not retried_empty:
                # Neither text nor calls: once more, without tools and with a plain instruction.
                retried_empty, offer_tools = True, False
                messages.append({"role": "system", "content": EMPTY_RETRY_INSTRUCTION})
                continue
            yield TurnEvent(type="sentence", data={"text": APOLOGY, "index": index})
            reply_parts.append(APOLOGY)
            break
        messages.append(_assistant_message(text, calls))
        for call in calls:
            yield TurnEvent(type="tool", data={"name": call.name, "status": "start", "arguments": call.arguments})
            result = await toolbox.execute(call.name, call.arguments)
            tool_trace.append({"name": call.name, "arguments": call.arguments,
                               "ok": result.ok, "result": result.content[:500]})
            yield TurnEvent(type="tool", data={"name": call.name, "status": "done" if result.ok else "error",
                                               "result": result.content[:500]})
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": wrap_untrusted(call.name, result.content)})
    else:
        cap = STEP_CAP_SENTENCE.format(n=max_steps)
        yield TurnEvent(type="sentence", data={"text": cap, "index": index})
        reply_parts.append(cap)
    yield TurnEvent(type="result", data={"text": "\n\n".join(reply_parts), "tools": tool_trace})
