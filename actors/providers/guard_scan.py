"""Pure readers of the text ``ToolCallGuard`` (actors.providers.guard) holds back.

Each one looks at a string and answers one question: does this brace open a bare call object,
what does this fence open, where does an object close, how long is a run of backticks, and what
a closed bare object or fenced block turns out to be (a ``Verdict``). None of them keeps stream
state, so they live apart from the guard's state machine, which only acts on the answers. A
``None`` answer means the text so far cannot tell yet.
"""

from __future__ import annotations

import re
from typing import Literal

from actors.common.jsonish import StringScan, loads_lenient
from actors.providers.call_markup import RecoveredCall, calls_from_value

# A bare call object opens like {"name": or, as some templates teach, {{"name":. Past this many
# characters without that opening, a brace is ordinary text.
BRACE_OPENINGS = ('{"name":', "{'name':", '{{"name":', "{{'name':")
BRACE_LOOKAHEAD = 40
# A fence's language tag longer than this is not one.
MAX_LANG = 32
JSON_LANGS = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code"})
NAME_HINT = re.compile(r"[\"']name[\"']\s*:")
ARGS_HINT = re.compile(r"[\"'](?:arguments|parameters)[\"']\s*:")

# What a closed block is: the calls it holds, or text to hide ("hide": a call, but one that
# must not run) or to show as it was ("show").
Verdict = list[RecoveredCall] | Literal["hide", "show"]


def opens_call_object(buf: str, final: bool) -> bool | None:
    """Whether the brace opening `buf` starts a bare call object; None while it may still."""
    head = re.sub(r"\s", "", buf[:BRACE_LOOKAHEAD])
    if any(head.startswith(o) for o in BRACE_OPENINGS):
        return True
    maybe = any(o.startswith(head) for o in BRACE_OPENINGS)
    if maybe and not final and len(buf) < BRACE_LOOKAHEAD:
        return None
    return False


def fence_opening(buf: str, run: int, final: bool) -> tuple[int, bool] | None:
    """For a fence of `run` backticks opening `buf`: where its language tag ends, and whether
    the block may be a call (a JSON-ish tag, then a body opening with `{` or `[`); None while
    the text so far cannot tell."""
    j = run
    while j < len(buf) and j - run <= MAX_LANG and (buf[j].isalnum() or buf[j] in "_+-."):
        j += 1
    if j == len(buf) and not final:
        return None
    if buf[run:j].lower() in JSON_LANGS:
        k = j
        while k < len(buf) and buf[k].isspace():
            k += 1
        if k == len(buf) and not final:
            return None
        if k < len(buf) and buf[k] in "{[":
            return j, True
    return j, False


def object_end(buf: str) -> int | None:
    """Where the object opening `buf` closes (string-aware), or None if it does not yet."""
    depth = 0
    scan = StringScan()
    for i, ch in enumerate(buf):
        if scan.inside(ch):
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def unwrap_double(text: str) -> str:
    """{{"name": ...}} -> {"name": ...}: one layer of doubled braces, as some models write."""
    if text.startswith("{") and text[1:].lstrip().startswith("{") and text.endswith("}}"):
        return text[1:-1].strip()
    return text


def run_length(buf: str, i: int) -> int:
    """How many backticks in a row start at `i`."""
    j = i
    while j < len(buf) and buf[j] == "`":
        j += 1
    return j - i


def bare_object_verdict(raw: str, known: frozenset[str] | None) -> Verdict:
    """A closed bare object, given the tools offered (None: any)."""
    try:
        calls = calls_from_value(loads_lenient(unwrap_double(raw)), strict=True)
    except ValueError:
        calls = None
    if calls is None:
        return "hide" if ARGS_HINT.search(raw) else "show"  # hidden: call-shaped but unreadable
    if known is not None and any(c.name not in known for c in calls):
        # A made-up tool: never run, never shown to the person as text.
        return "hide"
    return calls


def fence_verdict(body: str, known: frozenset[str] | None) -> Verdict:
    """A fenced block that may be a call, from its body, given the tools offered (None: any).
    Unlike a bare object, a fenced call to a tool not offered is shown: it is taken to be
    content the person asked for."""
    try:
        value = loads_lenient(unwrap_double(body.strip()))
    except ValueError:
        # Hidden: a call, but broken beyond repair.
        return "hide" if NAME_HINT.search(body) and ARGS_HINT.search(body) else "show"
    calls = calls_from_value(value, strict=True)
    if calls is None or (known is not None and any(c.name not in known for c in calls)):
        return "show"
    return calls
