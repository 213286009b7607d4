"""The markup some models write tool calls in, instead of structured calls.

`ToolCallGuard` (actors.providers.guard) watches the text stream for these markers and hands
each marker's body here to be read: ``<tool_call>`` JSON bodies (one object, several, a list, or
``<function=...>`` blocks), ``<function=NAME>`` bodies of JSON arguments or
``<parameter=KEY>value</parameter>`` children, and JSON values found elsewhere (fenced blocks,
``<|python_tag|>``). The JSON itself is read by actors.common.jsonish.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from actors.common.jsonish import json_values, loads_lenient

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
SPECIAL_OPEN = "<|"
PYTHON_TAG = "python_tag"
# Stray closers are markup too; they are dropped wherever they appear.
_LITERALS: tuple[tuple[str, str], ...] = (
    (TOOL_CALL_OPEN, "tool_call"),
    (TOOL_CALL_CLOSE, "close"),
    (FUNCTION_CLOSE, "close"),
)
# Caps keep a lone "<function=" or "<|" in prose from holding text back for
# long: past these lengths it cannot be a marker.
_MAX_NAME = 64
_MAX_SPECIAL = 32

_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type", "function"})
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)
_FUNCTION_BLOCK = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|(?=<function=)|$)", re.S)

MarkerStatus = Literal["partial", "none", "match"]


class RecoveredCall(BaseModel):
    """A tool call found in the text stream."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


# -- marker matching ----------------------------------------------------------


def match_marker(buf: str) -> tuple[MarkerStatus, int, str, str]:
    """Classify ``buf`` (which starts with '<') as a marker, a prefix of one, or neither.

    Returns ``(status, length, kind, name)``; length/kind/name only on a match.
    """
    head = buf[: _MAX_NAME + len(FUNCTION_OPEN) + 2].lower()
    partial = False
    for literal, kind in _LITERALS:
        if head.startswith(literal):
            return "match", len(literal), kind, ""
        if literal.startswith(head):
            partial = True

    if head.startswith(FUNCTION_OPEN):
        j = len(FUNCTION_OPEN)
        while j < len(head) and (head[j].isalnum() or head[j] in "_-.") and j - len(FUNCTION_OPEN) < _MAX_NAME:
            j += 1
        if j == len(head):
            return "partial", 0, "", ""
        if head[j] == ">" and j > len(FUNCTION_OPEN):
            return "match", j + 1, "function", buf[len(FUNCTION_OPEN) : j]
    elif FUNCTION_OPEN.startswith(head):
        partial = True

    if head.startswith(SPECIAL_OPEN):
        j = len(SPECIAL_OPEN)
        while j < len(head) and (head[j].isalnum() or head[j] == "_") and j - len(SPECIAL_OPEN) < _MAX_SPECIAL:
            j += 1
        if j == len(head) or (head[j] == "|" and j + 1 == len(head)):
            return "partial", 0, "", ""
        if head[j : j + 2] == "|>" and j > len(SPECIAL_OPEN):
            return "match", j + 2, "special", buf[len(SPECIAL_OPEN) : j]
    elif head == "<":
        partial = True

    return ("partial" if partial else "none"), 0, "", ""


def strip_partial_suffix(buf: str, close: str) -> str:
    """Drop a cut-off closing tag ("</tool_c") from the end of an unclosed body."""
    low = buf.lower()
    for k in range(len(close) - 1, 0, -1):
        if low.endswith(close[:k]):
            return buf[:-k]
    return buf


# -- body parsing -------------------------------------------------------------


def parse_tool_call_body(body: str) -> list[RecoveredCall]:
    if FUNCTION_OPEN in body.lower():
        # Qwen3-Coder style: <tool_call><function=x>...</function></tool_call>.
        calls: list[RecoveredCall] = []
        for m in _FUNCTION_BLOCK.finditer(body):
            calls.extend(parse_function_body(m.group(1), m.group(2)))
        return calls
    calls = []
    # A missing </tool_call> between two calls shows up as a nested opener.
    for piece in re.split(re.escape(TOOL_CALL_OPEN), body, flags=re.I):
        for value in json_values(piece):
            calls.extend(calls_from_value(value, strict=False) or [])
    return calls


def parse_function_body(name: str, body: str) -> list[RecoveredCall]:
    if "<parameter=" in body:
        args: dict[str, Any] = {}
        for m in _PARAMETER.finditer(body):
            raw = m.group(2).strip()
            try:
                value = json.loads(raw)
            except ValueError:
                value = raw
            # Parameters are written bare, so only take JSON's reading when it
            # says something a plain string cannot (numbers, lists, objects).
            args[m.group(1)] = raw if isinstance(value, str) else value
        return [RecoveredCall(name=name, arguments=args)]
    coerced = _coerce_args(body)
    if coerced is None:
        return []
    return [RecoveredCall(name=name, arguments=coerced)]


def calls_from_value(value: Any, strict: bool) -> list[RecoveredCall] | None:
    """Turn a parsed JSON value into calls; None if it is not (only) calls.

    ``strict`` is for fenced blocks, where the JSON might just be content: it
    requires an arguments key and forbids keys a call would not carry.
    """
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls: list[RecoveredCall] = []
    for item in items:
        call = _to_call(item, strict)
        if call is None:
            return None
        calls.append(call)
    return calls


def _to_call(obj: Any, strict: bool) -> RecoveredCall | None:
    if not isinstance(obj, dict):
        return None
    if strict and not set(obj) <= _CALL_KEYS:
        return None
    # OpenAI-shaped {"type": "function", "function": {"name": ..., ...}}.
    if "name" not in obj and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    if "arguments" in obj:
        args = _coerce_args(obj["arguments"])
    elif "parameters" in obj:
        args = _coerce_args(obj["parameters"])
    elif strict:
        return None
    else:
        args = {}
    if args is None:
        return None
    return RecoveredCall(name=name.strip(), arguments=args)


def _coerce_args(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            parsed = loads_lenient(raw)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None
