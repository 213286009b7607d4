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
  list of them. Any other fenced block is ordinary content and passes through;
* a bare object in the text, ``{"name": ..., "arguments": {...}}`` or the doubled
  ``{{"name": ...}}`` some chat templates teach (a doubled fence body is read the same way).
  Only a strictly call-shaped object counts; one naming a tool that was not offered is a
  made-up call: it is dropped, neither run nor shown.

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

import re
from enum import Enum

from actors.common.jsonish import json_values
from actors.providers.call_markup import (
    FUNCTION_CLOSE, PYTHON_TAG, SPECIAL_OPEN, TOOL_CALL_CLOSE, RecoveredCall, calls_from_value,
    match_marker, parse_function_body, parse_tool_call_body, strip_partial_suffix)
from actors.providers.guard_scan import (
    ARGS_HINT, Verdict, bare_object_verdict, fence_opening, fence_verdict, object_end, opens_call_object,
    run_length)

__all__ = ["RecoveredCall", "ToolCallGuard"]


class _Mode(Enum):
    TEXT = "text"
    INLINE = "inline"  # inside `inline code`
    FENCE_PASS = "fence_pass"  # inside an ordinary fenced block
    FENCE_CAND = "fence_cand"  # fenced block that may be a call; held back
    TAG = "tag"  # inside <tool_call> or <function=...>; held back
    PY = "python"  # after <|python_tag|>; held back
    BRACE = "brace"  # a bare {"name": ...} object (maybe double-braced); held back


_TEXT_SPECIAL = re.compile(r"[<`{]")
# A bare object longer than this is not a call; it is shown as the text it was.
_MAX_BRACE = 20_000
_INLINE_STOP = re.compile(r"[`\n]")


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
            _Mode.BRACE: self._step_brace,
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
        if self._buf[0] == "{":
            return self._at_brace(final, out)
        return self._at_backtick(final, out)

    def _at_brace(self, final: bool, out: list[str]) -> bool:
        opens = opens_call_object(self._buf, final)
        if opens is None:
            return False
        if opens:
            self._mode = _Mode.BRACE
            return True
        out.append("{")
        self._buf = self._buf[1:]
        return True

    def _step_brace(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        end = object_end(buf)
        if end is None and not final and len(buf) < _MAX_BRACE:
            return False
        self._mode = _Mode.TEXT
        if end is None:
            # Cut off, or too long to be a call: a broken call is hidden, anything else shown.
            if len(buf) < _MAX_BRACE and ARGS_HINT.search(buf):
                self.dropped.append(buf)
            else:
                out.append(buf)
            self._buf = ""
            return False
        raw, self._buf = buf[:end], buf[end:]
        self._settle(bare_object_verdict(raw, self._known), raw, out)
        return True

    def _settle(self, verdict: Verdict, raw: str, out: list[str]) -> None:
        """Act on what a closed block turned out to be: its calls kept, or its text hidden or shown."""
        if verdict == "hide":
            self.dropped.append(raw)
        elif verdict == "show":
            out.append(raw)
        else:
            self._calls.extend(verdict)

    def _at_angle(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        status, length, kind, name = match_marker(buf)
        if status == "partial":
            if not final:
                return False
            # The stream ended inside something that could still have been a
            # marker; see the module docstring for why the length matters.
            if len(buf) >= 3 or buf.startswith(SPECIAL_OPEN):
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
        elif kind == "special" and name.lower() == PYTHON_TAG:
            self._mode = _Mode.PY
        # Closers and other special tokens are simply swallowed.
        return True

    def _at_backtick(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        run = run_length(buf, 0)
        if run == len(buf) and not final:
            return False
        if run < 3:
            out.append(buf[:run])
            self._buf = buf[run:]
            self._mode = _Mode.INLINE
            self._run = run
            return True
        opening = fence_opening(buf, run, final)
        if opening is None:
            return False
        j, maybe_call = opening
        if maybe_call:
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
        run = run_length(buf, 0)
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
        run = run_length(buf, 0)
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
            self._settle(fence_verdict(buf[self._body_start :], self._known), buf, out)
            self._buf = ""
            self._mode = _Mode.TEXT
            return False
        end = close + run_length(buf, close)
        if end == len(buf) and not final:
            return False  # the closing run may still grow
        self._settle(fence_verdict(buf[self._body_start : close], self._known), buf[:end], out)
        self._buf = buf[end:]
        self._mode = _Mode.TEXT
        return True

    def _step_tag(self, final: bool, out: list[str]) -> bool:
        close = TOOL_CALL_CLOSE if self._tag_kind == "tool_call" else FUNCTION_CLOSE
        buf = self._buf
        idx = buf.lower().find(close)
        if idx < 0:
            if not final:
                return False
            body = strip_partial_suffix(buf, close)
            self._buf = ""
        else:
            body = buf[:idx]
            self._buf = buf[idx + len(close) :]
        self._mode = _Mode.TEXT
        if self._tag_kind == "tool_call":
            calls = parse_tool_call_body(body)
        else:
            calls = parse_function_body(self._tag_name, body)
        if calls:
            self._calls.extend(calls)
        else:
            self.dropped.append(body)
        return idx >= 0

    def _step_python(self, final: bool, out: list[str]) -> bool:
        buf = self._buf
        idx = buf.find(SPECIAL_OPEN)
        if idx < 0:
            if not final:
                return False
            body = buf.removesuffix("<")
            self._buf = ""
        else:
            body = buf[:idx]
            self._buf = buf[idx:]
        self._mode = _Mode.TEXT
        calls = [c for v in json_values(body) for c in (calls_from_value(v, strict=False) or [])]
        if calls:
            self._calls.extend(calls)
        elif body.strip():
            self.dropped.append(body)
        return idx >= 0
