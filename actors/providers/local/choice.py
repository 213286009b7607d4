"""Tool calls for models that cannot be trusted to write them: a JSON-schema choice.

The model is asked for exactly one JSON object, its decoding constrained by a schema:
``{"asks": WHAT, "tool": NAME, "arguments": {...}}`` to call one of the offered tools, or
``{"asks": WHAT, "tool": "none", "answer": TEXT}`` to answer. A few words on what the message
asks come first, then the tool name, so the choice is made before any argument is written; each tool's own parameter schema constrains its
arguments. `ChoiceStream` reads the object as it streams: the answer's text goes out as it is
decoded, so the first sentence is not held until the object closes, and a call becomes an
ordinary ToolCall for the turn pipeline (tiers, confirmations, taint, claims). No Ray.
"""

from __future__ import annotations

import json
import re
from typing import Any

from actors.common.jsonish import loads_lenient
from actors.common.text import word_set
from actors.providers.local import cues
from actors.providers.types import ToolCall

NONE = "none"
MAX_ROUTED = 8
# Always offered first when present, in this order: what a person asks of an assistant most.
CORE_ORDER = ("calculate", "current_time", "remember", "recall", "date_add", "remind")
_ANSWER_OPEN = re.compile(r'"answer"\s*:\s*"')
_TOOL_NAME = re.compile(r'"tool"\s*:\s*"([^"]*)"')


def tool_name(tool: dict[str, Any]) -> str:
    return str((tool.get("function") or {}).get("name", ""))


def _words(text: str) -> set[str]:
    return set(word_set(text))


def select_tools(tools: list[dict[str, Any]], message: str, limit: int = MAX_ROUTED,
                 previous: str = "") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(head, offered): the core tools present, in a fixed order (they sit in the prompt's
    stable head, whatever the message), and the at most `limit` tools this message gives a
    reason to call (actors/providers/local/cues.py): cued core tools first, then the others
    it names, those sharing the most words with it first."""
    by_name = {tool_name(t): t for t in tools}
    head = [by_name[n] for n in CORE_ORDER if n in by_name][:limit]
    said = _words(message)
    rest = [t for t in tools if tool_name(t) not in CORE_ORDER]

    def score(t: dict[str, Any]) -> int:
        fn = t.get("function") or {}
        return len(said & _words(f"{fn.get('name', '').replace('_', ' ')} {fn.get('description', '')}"))

    offered = cues.gate(head + sorted(rest, key=lambda t: -score(t)), CORE_ORDER, message, previous)
    return head, offered[:limit]


def is_core(tool: dict[str, Any]) -> bool:
    return tool_name(tool) in CORE_ORDER


def _short_type(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any")
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"][:6])
    return {"string": "str", "integer": "int", "number": "num", "boolean": "bool"}.get(str(kind), str(kind))


def signature(tool: dict[str, Any], chars: int = 110) -> str:
    """One line a small model can read: `name {"arg": type, "opt?": type}: what it does`."""
    fn = tool.get("function") or {}
    params = fn.get("parameters") or {}
    required = set(params.get("required") or [])
    args = ", ".join(f'"{k}{"" if k in required else "?"}": {_short_type(v if isinstance(v, dict) else {})}'
                     for k, v in (params.get("properties") or {}).items())
    description = re.split(r"(?<=[.!?])\s", str(fn.get("description", "")).strip(), maxsplit=1)[0][:chars]
    return f"- {fn.get('name')} {{{args}}}: {description}"


def _arguments_schema(tool: dict[str, Any]) -> dict[str, Any]:
    params = (tool.get("function") or {}).get("parameters") or {}
    props = {k: _plain(v) for k, v in (params.get("properties") or {}).items() if isinstance(v, dict)}
    return {"type": "object", "properties": props,
            "required": [k for k in params.get("required") or [] if k in props]}


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """What llama.cpp's grammar converter reads reliably: type, enum, items; no formats."""
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in ("string", "integer", "number", "boolean", "array", "object"):
        out["type"] = kind
    if "enum" in schema:
        out["enum"] = schema["enum"]
    if kind == "array" and isinstance(schema.get("items"), dict):
        out["items"] = _plain(schema["items"])
    if kind == "object" and isinstance(schema.get("properties"), dict):
        out["properties"] = {k: _plain(v) for k, v in schema["properties"].items() if isinstance(v, dict)}
    return out or {"type": "string"}


# A few words on what the message asks, written before the choice: without it a 1.5B model
# copies the first example's tool for a question that needs none (measured: "What is the
# capital of France?" -> calculate 3+4; with it -> "a geography fact", an answer).
ASKS = {"type": "string", "maxLength": 60}


def choice_schema(tools: list[dict[str, Any]], asks: bool = True, answer: bool = True) -> dict[str, Any]:
    """The schema of one step's answer: a call of one of `tools`, or (with `answer`) an answer."""
    if not asks:
        return _without_asks(choice_schema(tools, answer=answer))
    options: list[dict[str, Any]] = [
        {"type": "object", "properties": {"asks": ASKS, "tool": {"const": tool_name(t)},
                                          "arguments": _arguments_schema(t)},
         "required": ["asks", "tool", "arguments"]}
        for t in tools
    ]
    if answer:
        options.append({"type": "object", "properties": {"asks": ASKS, "tool": {"const": NONE},
                                                         "answer": {"type": "string"}},
                        "required": ["asks", "tool", "answer"]})
    return {"anyOf": options} if len(options) > 1 else options[0]


# A step with no tool to offer: the answer as one JSON string (one token before its first word).
ANSWER_ONLY: dict[str, Any] = {"type": "string"}


def _without_asks(schema: dict[str, Any]) -> dict[str, Any]:
    options = schema.get("anyOf", [schema])
    for option in options:
        option["properties"].pop("asks", None)
        option["required"] = [k for k in option["required"] if k != "asks"]
    return schema


class ChoiceStream:
    """Feed the streamed JSON text; get the answer's text as it is decoded; `finish()` gives
    the call, if the object named a tool."""

    def __init__(self) -> None:
        self.raw = ""
        self._pos: int | None = None  # where the answer string's unread text starts in raw
        self._done = False
        self._bare = False  # the whole output is the answer's string

    def feed(self, chunk: str) -> str:
        self.raw += chunk
        if self._pos is None:
            bare = self.raw.lstrip()
            if bare.startswith('"'):  # ANSWER_ONLY: the whole object is the answer's string
                self._pos = len(self.raw) - len(bare) + 1
                self._bare = True
            else:
                match = _ANSWER_OPEN.search(self.raw)
                if match is None:
                    return ""
                self._pos = match.end()
        if self._done:
            return ""
        return self._decode()

    def _decode(self) -> str:
        out: list[str] = []
        i, raw = self._pos or 0, self.raw
        while i < len(raw):
            ch = raw[i]
            if ch == '"':
                self._done = True
                i += 1
                if self._bare:  # nothing after a bare string's closing quote is the answer's
                    self.raw = raw[:i]
                break
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            if i + 1 >= len(raw):
                break  # the escape is cut off: wait for the rest
            code = raw[i + 1]
            if code == "u":
                if i + 6 > len(raw):
                    break
                try:
                    out.append(chr(int(raw[i + 2:i + 6], 16)))
                except ValueError:
                    pass
                i += 6
                continue
            out.append({"n": "\n", "t": "\t", "r": "", "b": "", "f": ""}.get(code, code))
            i += 2
        self._pos = i
        return "".join(out)

    def finish(self, offered: set[str]) -> ToolCall | None:
        """The tool call the object asked for, or None (an answer, or nothing usable)."""
        if self._pos is not None:
            return None
        try:
            value = loads_lenient(self.raw)
        except ValueError:
            match = _TOOL_NAME.search(self.raw)
            value = {"tool": match.group(1)} if match else {}
        if not isinstance(value, dict):
            return None
        name = str(value.get("tool") or "")
        if not name or name == NONE or name not in offered:
            return None
        arguments = value.get("arguments")
        return ToolCall(id="", name=name, arguments=arguments if isinstance(arguments, dict) else {})

    @property
    def done(self) -> bool:
        """The answer's string has closed: nothing more of it will come."""
        return self._done

    @property
    def answered(self) -> bool:
        return self._pos is not None
