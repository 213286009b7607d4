"""Reading the JSON a model wrote: in code fences or prose, with single quotes, Python
literals, trailing commas or a truncated end. Model-written text is untrusted and often slightly
malformed. One repairer (`repair`) serves every reader here:

* `find_object`: the first object in an answer with one of the expected fields; a truncated
  answer is closed off so its start still counts. Never raises.
* `loads_lenient`: one value, as json.loads would read it after the repair; raises ValueError.
* `json_values`: every complete value in a text, in order; an incomplete one yields nothing
  (a tool call cut off must not run with cut-off arguments, so nothing is closed off here).
"""

from __future__ import annotations

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


class StringScan:
    """Feeds through a text one character at a time, saying which are inside a quoted string
    (either quote, backslash escapes), so a bracket counter skips brackets written in strings."""

    def __init__(self) -> None:
        self.quote: str | None = None   # the quote of the string still open, if any
        self._escaped = False

    def inside(self, ch: str) -> bool:
        """Whether `ch` belongs to a string (its quotes included)."""
        if self.quote:
            if self._escaped:
                self._escaped = False
            elif ch == "\\":
                self._escaped = True
            elif ch == self.quote:
                self.quote = None
            return True
        if ch in "\"'":
            self.quote = ch
            return True
        return False


def _object_at(text: str, start: int) -> str | None:
    """The bracketed object starting at `start`, aware of strings in either quote; a
    truncated answer (the model ran out of tokens) is closed off so its start still parses."""
    stack: list[str] = []
    scan = StringScan()
    for i in range(start, len(text)):
        ch = text[i]
        if scan.inside(ch):
            continue
        if ch in _CLOSERS:
            stack.append(_CLOSERS[ch])
            if len(stack) > MAX_DEPTH:
                return None
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return text[start:i + 1]
    tail = text[start:]
    if scan.quote:
        tail += scan.quote
    return tail + "".join(reversed(stack))


_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def repair(text: str) -> str:
    """Rewrite single-quoted strings, trailing commas and Python literals as JSON.

    Works on tokens rather than with regexes so that quotes, commas and words inside string
    values are left alone. Raises ValueError on an unterminated string, since that means the
    value was cut off.
    """
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            piece: list[str] = []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    # \' is Python's, not a JSON escape.
                    piece.append("'" if text[j + 1] == "'" else text[j:j + 2])
                    j += 2
                    continue
                piece.append('\\"' if c == "'" and text[j] == '"' else text[j])
                j += 1
            if j >= n:
                raise ValueError("unterminated string")
            out.append('"' + "".join(piece) + '"')
            i = j + 1
        elif c == ",":
            k = i + 1
            while k < n and text[k].isspace():
                k += 1
            if k < n and text[k] in "}]":
                i += 1  # trailing comma
                continue
            out.append(c)
            i += 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(_PY_LITERALS.get(word, word))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def loads_lenient(text: str) -> Any:
    """json.loads, then once more after `repair`. Raises ValueError (RecursionError on absurd
    nesting) when neither reads it."""
    # strict=False admits raw newlines inside strings, which models write when a value is
    # multi-line text.
    try:
        return json.loads(text, strict=False)
    except ValueError:
        pass
    return json.loads(repair(text), strict=False)


def json_values(text: str) -> list[Any]:
    """Every complete JSON value in ``text``, read leniently, in order.

    Handles one value, several back to back ("{..}\\n{..}" or "{..}; {..}"), and a complete
    value followed by junk. An incomplete value yields nothing.
    """
    s = text.strip()
    if not s:
        return []
    try:
        return [loads_lenient(s)]
    except (ValueError, RecursionError):
        pass
    try:
        s = repair(s)
    except ValueError:
        pass
    decoder = json.JSONDecoder(strict=False)
    values: list[Any] = []
    i = 0
    while i < len(s):
        while i < len(s) and (s[i].isspace() or s[i] in ";,"):
            i += 1
        if i >= len(s):
            break
        try:
            value, i = decoder.raw_decode(s, i)
        except (ValueError, RecursionError):
            break
        values.append(value)
    return values


def _load(candidate: str) -> Any:
    try:
        return loads_lenient(candidate)
    except (ValueError, RecursionError):
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
