"""Recover tool calls that a model wrote as text instead of structured calls.

Some models (or some chat templates served by some runtimes) emit their tool
calls as markup inside the ordinary text stream. Left alone, that markup is
read out by the speech engine and shown in the chat, and the call itself is
lost. ``ToolCallGuard`` sits on the text stream, lets ordinary text through as
early as possible, holds back only what might be the start of markup, and
turns recognised markup into ``RecoveredCall`` objects.

Recognised forms:

* ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the arguments
  may be a JSON string, the key may be ``parameters``; the body may hold
  several objects, a list, or ``<function=...>`` blocks as below);
* ``<function=NAME>{...json arguments...}</function>``, or with
  ``<parameter=KEY>value</parameter>`` children instead of JSON;
* ``<|python_tag|>{"name": ..., "parameters": {...}}`` (its body runs to the
  next ``<|...|>`` special token or the end of the stream); other ``<|...|>``
  special tokens are dropped;
* a fenced block (```json or a bare ```) whose JSON is a call object or a
  list of them. Any other fenced block is ordinary content and passes through.

Decisions worth knowing:

* Calls are only returned by ``finish()``; ``feed()`` is about text.
* A tag marker still open at ``finish()`` is parsed leniently: every complete
  JSON value in it counts; if none is complete it is dropped, never shown raw,
  because showing half a tool call helps nobody and a truncated call must not
  run with truncated arguments (no brace auto-closing is attempted).
* Lenient repair covers trailing commas, single-quoted strings and Python
  ``True/False/None``. A confirmed marker whose JSON is beyond repair is
  dropped; the raw text is kept in ``dropped`` for logging.
* A fenced block is only a call if its object has ``name`` plus
  ``arguments``/``parameters`` and no keys a call would not have (so a tool
  *definition* with a ``description`` still shows). An unclosed fenced block
  at ``finish()`` becomes a call if complete, is dropped if it merely looks
  like a broken call, and is otherwise shown as the text it was.
* Inside code (a non-call fenced block, or an inline `span` which here ends at
  its closing backticks or at the end of the line) text is passed through
  verbatim: a reply that explains the markup must be able to show it.
* At ``finish()`` a dangling partial marker (``<tool_ca``) of three or more
  characters, or any ``<|`` prefix, is dropped; shorter ones (``<t``) are
  shown, since they are more likely ordinary text cut short.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field


class RecoveredCall(BaseModel):
    """A tool call found in the text stream."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class _Mode(Enum):
    TEXT = "text"
    INLINE = "inline"  # inside `inline code`
    FENCE_PASS = "fence_pass"  # inside an ordinary fenced block
    FENCE_CAND = "fence_cand"  # fenced block that may be a call; held back
    TAG = "tag"  # inside <tool_call> or <function=...>; held back
    PY = "python"  # after <|python_tag|>; held back


_TOOL_CALL_OPEN = "<tool_call>"
_TOOL_CALL_CLOSE = "</tool_call>"
_FUNCTION_OPEN = "<function="
_FUNCTION_CLOSE = "</function>"
_SPECIAL_OPEN = "<|"
_PYTHON_TAG = "python_tag"
# Stray closers are markup too; they are dropped wherever they appear.
_LITERALS: tuple[tuple[str, str], ...] = (
    (_TOOL_CALL_OPEN, "tool_call"),
    (_TOOL_CALL_CLOSE, "close"),
    (_FUNCTION_CLOSE, "close"),
)
# Caps keep a lone "<function=" or "<|" in prose from holding text back for
# long: past these lengths it cannot be a marker.
_MAX_NAME = 64
_MAX_SPECIAL = 32
_MAX_LANG = 32

_JSON_LANGS = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code"})
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type", "function"})

_TEXT_SPECIAL = re.compile(r"[<`]")
_INLINE_STOP = re.compile(r"[`\n]")
_NAME_HINT = re.compile(r"[\"']name[\"']\s*:")
_ARGS_HINT = re.compile(r"[\"'](?:arguments|parameters)[\"']\s*:")
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)
_FUNCTION_BLOCK = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|(?=<function=)|$)", re.S)

_MarkerStatus = Literal["partial", "none", "match"]


class ToolCallGuard:
    """Filter a text stream, diverting tool-call markup into ``RecoveredCall``s."""

    def __init__(self, known_tools: set[str] | frozenset[str] | None = None) -> None:
        # With known names, a fenced JSON naming anything else is taken to be
        # content the user asked for rather than a call.
        self._known = frozenset(known_tools) if known_tools is not None else None
        self._buf = ""
        self._mode = _Mode.TEXT
        self._run = 0  # backtick run length that opened the current code span
        self._body_start = 0  # FENCE_CAND: where the JSON body starts in _buf
        self._tag_kind = ""
        self._tag_name = ""
        self._calls: list[RecoveredCall] = []
        self.dropped: list[str] = []
        """Raw markup that was hidden but could not be turned into a call."""

    def feed(self, delta: str) -> str:
        """Add a piece of the stream; return the text that is safe to show now."""
        self._buf += delta
        return self._drain(final=False)

    def finish(self) -> tuple[str, list[RecoveredCall]]:
        """End of stream: return the remaining clean text and all recovered calls."""
        text = self._drain(final=True)
        calls = list(self._calls)
        self._buf = ""
        self._mode = _Mode.TEXT
        self._calls = []
        return text, calls

    # -- state machine ------------------------------------------------------

    def _drain(self, final: bool) -> str:
        out: list[str] = []
        step = {
            _Mode.TEXT: self._step_text,
            _Mode.INLINE: self._step_inline,
            _Mode.FENCE_PASS: self._step_fence_pass,
            _Mode.FENCE_CAND: self._step_fence_cand,
            _Mode.TAG: self._step_tag,
            _Mode.PY: self._step_python,
        }
        # Each step either consumes input (True) or needs more of it (False).
        # With final=True every step consumes what it can decide, so the loop
        # always ends with an empty buffer.
        while step[self._mode](final, out):
            pass
        return "".join(out)

    def _step_text(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        if not buf:
            return False
        m = _TEXT_SPECIAL.search(buf)
        if m is None:
            out.append(buf)
            self._buf = ""
            return False
        if m.start():
            out.append(buf[: m.start()])
            self._buf = buf[m.start() :]
        if self._buf[0] == "<":
            return self._at_angle(final, out)
        return self._at_backtick(final, out)

    def _at_angle(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        status, length, kind, name = _match_marker(buf)
        if status == "partial":
            if not final:
                return False
            # The stream ended inside something that could still have been a
            # marker; see the module docstring for why the length matters.
            if len(buf) >= 3 or buf.startswith(_SPECIAL_OPEN):
                self.dropped.append(buf)
            else:
                out.append(buf)
            self._buf = ""
            return False
        if status == "none":
            out.append("<")
            self._buf = buf[1:]
            return True
        self._buf = buf[length:]
        if kind in ("tool_call", "function"):
            self._mode = _Mode.TAG
            self._tag_kind = kind
            self._tag_name = name
        elif kind == "special" and name.lower() == _PYTHON_TAG:
            self._mode = _Mode.PY
        # Closers and other special tokens are simply swallowed.
        return True

    def _at_backtick(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        run = _run_length(buf, 0)
        if run == len(buf) and not final:
            return False
        if run < 3:
            out.append(buf[:run])
            self._buf = buf[run:]
            self._mode = _Mode.INLINE
            self._run = run
            return True
        j = run
        while j < len(buf) and j - run <= _MAX_LANG and (buf[j].isalnum() or buf[j] in "_+-."):
            j += 1
        if j == len(buf) and not final:
            return False
        if buf[run:j].lower() in _JSON_LANGS:
            k = j
            while k < len(buf) and buf[k].isspace():
                k += 1
            if k == len(buf) and not final:
                return False
            if k < len(buf) and buf[k] in "{[":
                # Might be a call: hold the whole block until it closes.
                self._mode = _Mode.FENCE_CAND
                self._run = run
                self._body_start = j
                return True
        out.append(buf[:j])
        self._buf = buf[j:]
        self._mode = _Mode.FENCE_PASS
        self._run = run
        return True

    def _step_inline(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        m = _INLINE_STOP.search(buf)
        if m is None:
            out.append(buf)
            self._buf = ""
            return False
        out.append(buf[: m.start()])
        buf = self._buf = buf[m.start() :]
        if buf[0] == "\n":
            out.append("\n")
            self._buf = buf[1:]
            self._mode = _Mode.TEXT
            return True
        run = _run_length(buf, 0)
        if run == len(buf) and not final:
            return False
        out.append(buf[:run])
        self._buf = buf[run:]
        if run == self._run:
            self._mode = _Mode.TEXT
        return True

    def _step_fence_pass(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        i = buf.find("`")
        if i < 0:
            out.append(buf)
            self._buf = ""
            return False
        out.append(buf[:i])
        buf = self._buf = buf[i:]
        run = _run_length(buf, 0)
        if run == len(buf) and not final:
            return False
        out.append(buf[:run])
        self._buf = buf[run:]
        if run >= self._run:
            self._mode = _Mode.TEXT
        return True

    def _step_fence_cand(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        close = buf.find("`" * self._run, self._body_start)
        if close < 0:
            if not final:
                return False
            self._resolve_fence(buf, buf[self._body_start :], out)
            self._buf = ""
            self._mode = _Mode.TEXT
            return False
        end = close + _run_length(buf, close)
        if end == len(buf) and not final:
            return False  # the closing run may still grow
        self._resolve_fence(buf[:end], buf[self._body_start : close], out)
        self._buf = buf[end:]
        self._mode = _Mode.TEXT
        return True

    def _resolve_fence(self, raw: str, body: str, out: list[str]) -> None:
        try:
            value = _loads_lenient(body)
        except ValueError:
            if _NAME_HINT.search(body) and _ARGS_HINT.search(body):
                self.dropped.append(raw)  # a call, but broken beyond repair
            else:
                out.append(raw)
            return
        calls = _calls_from_value(value, strict=True)
        if calls is None or (self._known is not None and any(c.name not in self._known for c in calls)):
            out.append(raw)
            return
        self._calls.extend(calls)

    def _step_tag(self, final: bool, out: list[str]) -> bool:
        close = _TOOL_CALL_CLOSE if self._tag_kind == "tool_call" else _FUNCTION_CLOSE
        buf = self._buf
        idx = buf.lower().find(close)
        if idx < 0:
            if not final:
                return False
            body = _strip_partial_suffix(buf, close)
            self._buf = ""
        else:
            body = buf[:idx]
            self._buf = buf[idx + len(close) :]
        self._mode = _Mode.TEXT
        if self._tag_kind == "tool_call":
            calls = _parse_tool_call_body(body)
        else:
            calls = _parse_function_body(self._tag_name, body)
        if calls:
            self._calls.extend(calls)
        else:
            self.dropped.append(body)
        return idx >= 0

    def _step_python(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        idx = buf.find(_SPECIAL_OPEN)
        if idx < 0:
            if not final:
                return False
            body = buf.removesuffix("<")
            self._buf = ""
        else:
            body = buf[:idx]
            self._buf = buf[idx:]
        self._mode = _Mode.TEXT
        calls = [c for v in _parse_values(body) for c in (_calls_from_value(v, strict=False) or [])]
        if calls:
            self._calls.extend(calls)
        elif body.strip():
            self.dropped.append(body)
        return idx >= 0


# -- marker matching ----------------------------------------------------------


def _match_marker(buf: str) -> tuple[_MarkerStatus, int, str, str]:
    """Classify ``buf`` (which starts with '<') as a marker, a prefix of one, or neither.

    Returns ``(status, length, kind, name)``; length/kind/name only on a match.
    """
    head = buf[: _MAX_NAME + len(_FUNCTION_OPEN) + 2].lower()
    partial = False
    for literal, kind in _LITERALS:
        if head.startswith(literal):
            return "match", len(literal), kind, ""
        if literal.startswith(head):
            partial = True

    if head.startswith(_FUNCTION_OPEN):
        j = len(_FUNCTION_OPEN)
        while j < len(head) and (head[j].isalnum() or head[j] in "_-.") and j - len(_FUNCTION_OPEN) < _MAX_NAME:
            j += 1
        if j == len(head):
            return "partial", 0, "", ""
        if head[j] == ">" and j > len(_FUNCTION_OPEN):
            return "match", j + 1, "function", buf[len(_FUNCTION_OPEN) : j]
    elif _FUNCTION_OPEN.startswith(head):
        partial = True

    if head.startswith(_SPECIAL_OPEN):
        j = len(_SPECIAL_OPEN)
        while j < len(head) and (head[j].isalnum() or head[j] == "_") and j - len(_SPECIAL_OPEN) < _MAX_SPECIAL:
            j += 1
        if j == len(head) or (head[j] == "|" and j + 1 == len(head)):
            return "partial", 0, "", ""
        if head[j : j + 2] == "|>" and j > len(_SPECIAL_OPEN):
            return "match", j + 2, "special", buf[len(_SPECIAL_OPEN) : j]
    elif head == "<":
        partial = True

    return ("partial" if partial else "none"), 0, "", ""


def _run_length(buf: str, i: int) -> int:
    j = i
    while j < len(buf) and buf[j] == "`":
        j += 1
    return j - i


def _strip_partial_suffix(buf: str, close: str) -> str:
    """Drop a cut-off closing tag ("</tool_c") from the end of an unclosed body."""
    low = buf.lower()
    for k in range(len(close) - 1, 0, -1):
        if low.endswith(close[:k]):
            return buf[:-k]
    return buf


# -- body parsing -------------------------------------------------------------


def _parse_tool_call_body(body: str) -> list[RecoveredCall]:
    if _FUNCTION_OPEN in body.lower():
        # Qwen3-Coder style: <tool_call><function=x>...</function></tool_call>.
        calls: list[RecoveredCall] = []
        for m in _FUNCTION_BLOCK.finditer(body):
            calls.extend(_parse_function_body(m.group(1), m.group(2)))
        return calls
    calls = []
    # A missing </tool_call> between two calls shows up as a nested opener.
    for piece in re.split(re.escape(_TOOL_CALL_OPEN), body, flags=re.I):
        for value in _parse_values(piece):
            calls.extend(_calls_from_value(value, strict=False) or [])
    return calls


def _parse_function_body(name: str, body: str) -> list[RecoveredCall]:
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


def _calls_from_value(value: Any, strict: bool) -> list[RecoveredCall] | None:
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
            parsed = _loads_lenient(raw)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _parse_values(text: str) -> list[Any]:
    """Every complete JSON value in ``text``, read leniently, in order.

    Handles one value, several back to back ("{..}\\n{..}" or "{..}; {..}"),
    and a complete value followed by junk. An incomplete value yields nothing.
    """
    s = text.strip()
    if not s:
        return []
    try:
        return [_loads_lenient(s)]
    except ValueError:
        pass
    try:
        s = _repair(s)
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
        except ValueError:
            break
        values.append(value)
    return values


def _loads_lenient(text: str) -> Any:
    """json.loads, then once more after repairing common model slips."""
    # strict=False admits raw newlines inside strings, which models write
    # when an argument is multi-line text.
    try:
        return json.loads(text, strict=False)
    except ValueError:
        pass
    return json.loads(_repair(text), strict=False)


_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def _repair(text: str) -> str:
    """Rewrite single-quoted strings, trailing commas and Python literals as JSON.

    Works on tokens rather than with regexes so that quotes, commas and words
    inside string values are left alone. Raises ValueError on an unterminated
    string, since that means the value was cut off.
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
                    if c == "'" and text[j + 1] == "'":
                        piece.append("'")  # \' is not a JSON escape
                    else:
                        piece.append(text[j : j + 2])
                    j += 2
                    continue
                if c == "'" and text[j] == '"':
                    piece.append('\\"')
                else:
                    piece.append(text[j])
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
