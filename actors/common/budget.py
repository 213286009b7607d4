"""Keep one turn's tool results within the model's context.

A single tool can return megabytes (a web page, a log file) and a turn can
call tools many times. Each result is capped on arrival (``cap_result``) and,
when the turn's results together grow past ``TURN_TOOL_BUDGET``, the older
ones are shortened (``compact_tool_messages``) so the model keeps the most
recent results whole while still seeing the start of the earlier ones.
"""

from __future__ import annotations

import re
from typing import Any

RESULT_CAP = 4000
TURN_TOOL_BUDGET = 60000
OLD_RESULT_KEEP = 1500
KEEP_RECENT = 3

# Marks a result shortened by compact_tool_messages, so a second pass over
# the same turn never shortens (and re-annotates) it again.
_SHORTENED_NOTE = re.compile(r"\n\[shortened: \d+ characters dropped to keep the turn within budget\]\Z")


def cap_result(text: str, cap: int = RESULT_CAP) -> str:
    """``text`` cut to ``cap`` characters plus a note saying how much was cut.

    The note tells the model the result is incomplete, so it can ask for a
    narrower query instead of treating the fragment as the whole answer.
    """
    if cap < 0:
        raise ValueError("cap must not be negative")
    if len(text) <= cap:
        return text
    dropped = len(text) - cap
    return f"{text[:cap]}\n[cut: {dropped} more characters not shown]"


def _content_text(content: Any) -> str:
    # Tool content is usually a string; some clients send a list of
    # {"type": "text", "text": ...} parts, which count by their text.
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        )
    return str(content)


def _this_turn_tool_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last_user = -1
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            last_user = index
    return [m for m in messages[last_user + 1:] if m.get("role") == "tool"]


def is_shortened(text: str) -> bool:
    """True when ``text`` was already shortened by ``compact_tool_messages``."""
    return bool(_SHORTENED_NOTE.search(text))


def turn_tool_chars(messages: list[dict[str, Any]]) -> int:
    """Characters of tool results since the last user message."""
    return sum(len(_content_text(m.get("content"))) for m in _this_turn_tool_messages(messages))


def compact_tool_messages(messages: list[dict[str, Any]]) -> int:
    """Shorten this turn's older tool results when they exceed the budget.

    Only tool messages after the last user message count: earlier turns were
    already sent and are the history's business. When their total exceeds
    ``TURN_TOOL_BUDGET``, each except the ``KEEP_RECENT`` most recent is cut to
    its first ``OLD_RESULT_KEEP`` characters with a note. Mutates ``messages``
    in place and returns how many messages were shortened.
    """
    tool_messages = _this_turn_tool_messages(messages)
    total = sum(len(_content_text(m.get("content"))) for m in tool_messages)
    if total <= TURN_TOOL_BUDGET:
        return 0
    older = tool_messages[:-KEEP_RECENT] if KEEP_RECENT > 0 else tool_messages
    shortened = 0
    for message in older:
        text = _content_text(message.get("content"))
        if len(text) <= OLD_RESULT_KEEP or is_shortened(text):
            continue
        dropped = len(text) - OLD_RESULT_KEEP
        message["content"] = (
            f"{text[:OLD_RESULT_KEEP]}\n"
            f"[shortened: {dropped} characters dropped to keep the turn within budget]"
        )
        shortened += 1
    return shortened
