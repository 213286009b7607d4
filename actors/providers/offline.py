"""The offline default: a deterministic stand-in for a model when no provider key is set.

It never pretends to be a language model. It recognises arithmetic and clock questions, calls
the same tools a real model would, phrases the tool result, and otherwise says plainly that no
model is configured and how to configure one.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from actors.providers.types import Delta, StreamEnd, TextDelta, ToolCall
from actors.common.arith import find_expression

NO_MODEL = (
    "No language model is configured on this server, so I can only do arithmetic and tell the time. "
    "To chat properly, set OPENAI_BASE_URL, OPENAI_API_KEY and IRIIS_CHAT_MODEL, or leave IRIIS_LOCAL_MODEL "
    "unset for the local model, then restart with make serve."
)
# While the local model is getting ready (or failed), the stand-in says so instead.
NOT_READY = (
    "I am the offline stand-in: {note}, so for now I can only do arithmetic and tell the time. "
    "Ask again in a few minutes."
)
_TIME_WORDS = re.compile(r"\b(time|date|day|today|clock|o'clock|weekday)\b", re.I)
_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|afternoon|evening))\b", re.I)


def _last(messages: list[dict[str, Any]], role: str) -> dict[str, Any] | None:
    return next((m for m in reversed(messages) if m.get("role") == role), None)


def _text(message: dict[str, Any] | None) -> str:
    if not message:
        return ""
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _tool_payload(content: str) -> str:
    """Undo wrap_untrusted: the text between the tool_output tags."""
    match = re.search(r"<tool_output[^>]*>\n(.*)\n</tool_output>", content, re.S)
    return (match.group(1) if match else content).replace("&lt;", "<").strip()


def compose_reply(messages: list[dict[str, Any]], no_model: str = NO_MODEL) -> tuple[str, ToolCall | None]:
    """What the offline model says next: a sentence, or a tool call to make first."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        call = _last(messages, "assistant") or {}
        names = [c["function"]["name"] for c in call.get("tool_calls") or []]
        payload = _tool_payload(_text(last))
        if payload.startswith("error:"):
            return f"I could not work that out: {payload[6:].strip()}.", None
        if names and names[-1] == "calculate":
            expr = json.loads(call["tool_calls"][-1]["function"]["arguments"]).get("expression", "")
            return f"{expr} = {payload}.", None
        if names and names[-1] == "current_time":
            try:
                human = json.loads(payload)["human"]
            except (json.JSONDecodeError, KeyError):
                human = payload
            return f"It is {human} (UTC).", None
        return f"The tool returned: {payload[:300]}", None
    question = _text(_last(messages, "user"))
    expression = find_expression(question)
    if expression:
        return "", ToolCall(id="offline_calc", name="calculate", arguments={"expression": expression})
    if _TIME_WORDS.search(question):
        return "", ToolCall(id="offline_time", name="current_time", arguments={})
    if _GREETING.match(question):
        return "Hello! " + no_model, None
    return no_model, None


class OfflineModel:
    name = "offline"

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
        local_note: str | None = None,
    ) -> AsyncIterator[Delta]:
        """`local_note`: what the local model is doing ("the local model is getting ready
        (...)"), said instead of "no model is configured" while it is on its way or failed."""
        no_model = NOT_READY.format(note=local_note) if local_note else NO_MODEL
        text, call = compose_reply(messages, no_model)
        tool_names = {t["function"]["name"] for t in tools or []}
        if call and call.name not in tool_names:
            text, call = no_model, None
        # Word by word, like a real stream, so the chunker and the page behave the same.
        for word in re.findall(r"\S+\s*", text):
            yield TextDelta(text=word)
        if call:
            yield call
        yield StreamEnd(finish_reason="tool_calls" if call else "stop", provider="offline", model="offline")
