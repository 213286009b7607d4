"""Finding the JSON object in a model's answer: in code fences or prose, with single quotes,
Python literals, trailing commas or a truncated end. Model-written text is untrusted and often
slightly malformed; this takes what it can and never raises.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Set
from typing import Any

# Bigger answers are not what was asked for; refusing them bounds parsing time.
MAX_RAW_CHARS = 200_000
# Deeper nesting is never a real answer, and literal_eval can exhaust the C stack on it.
MAX_DEPTH = 32

_FENCE = "```"
_FENCE_LANGUAGE = re.compile(r"^[ \t]*(?:json5?|javascript|js|python)?[ \t]*\n?", re.IGNORECASE)
_MAX_FENCES = 10
_CLOSERS = {"{": "}", "[": "]"}
_MAX_STARTS = 20


def _object_at(text: str, start: int) -> str | None:
    """The bracketed object starting at `start`, aware of strings in either quote; a
    truncated answer (the model ran out of tokens) is closed off so its start still parses."""
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
            if len(stack) > MAX_DEPTH:
                return None
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start:i + 1]
    tail = text[start:]
    if quote:
        tail += quote
    return tail + "".join(reversed(stack))


def _pythonish(text: str) -> str:
    """JSON-ish text rewritten for `ast.literal_eval`, which already accepts single quotes:
    true/false/null become Python literals and trailing commas go."""
    out: list[str] = []
    quote: str | None = None
    escaped = False
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            i += 1
            continue
        if ch in "\"'":
            quote = ch
        elif ch == ",":
            j = i + 1
            while j < len(text) and text[j].isspace():
                j += 1
            if j < len(text) and text[j] in "}]":
                i += 1
                continue
        elif ch.isalpha():
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append({"true": "True", "false": "False", "null": "None"}.get(word, word))
            i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _load(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(_pythonish(candidate))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _fenced(raw: str) -> Iterator[str]:
    # Paired by position rather than by one regex, which would rescan to the end of the text
    # from every unmatched fence.
    start = raw.find(_FENCE)
    for _ in range(_MAX_FENCES):
        if start < 0:
            return
        end = raw.find(_FENCE, start + len(_FENCE))
        if end < 0:
            return
        body = raw[start + len(_FENCE):end]
        yield body[_FENCE_LANGUAGE.match(body).end():]  # type: ignore[union-attr]
        start = raw.find(_FENCE, end + len(_FENCE))


def _candidates(raw: str) -> Iterator[str]:
    yield from _fenced(raw)
    starts = 0
    for match in re.finditer(r"\{", raw):
        if starts >= _MAX_STARTS:
            return
        starts += 1
        found = _object_at(raw, match.start())
        if found:
            yield found


_CAMEL = re.compile(r"(?<=[a-z])([A-Z])")


def _normalise_keys(data: dict[Any, Any]) -> dict[str, Any]:
    # "closedLoops", "Open loops" and "open-loops" all mean the field the spec names.
    return {re.sub(r"[\s-]+", "_", _CAMEL.sub(r"_\1", str(key)).strip()).lower(): value
            for key, value in data.items()}




def find_object(raw: str, fields: Set[str]) -> dict[str, Any] | None:
    """The first JSON-ish object in `raw` with at least one of `fields` (keys normalised to
    snake_case), or None."""
    if not isinstance(raw, str) or len(raw) > MAX_RAW_CHARS:
        return None
    for candidate in _candidates(raw):
        data = _load(candidate.strip())
        if not isinstance(data, dict):
            continue
        data = _normalise_keys(data)
        if fields & data.keys():
            return data
    return None
