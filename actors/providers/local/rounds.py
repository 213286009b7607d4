"""How far a turn has got with tools, read from the messages (used by actors/providers/local/adapter.py).

The adapter offers a small model fewer tools as a turn goes on: none after a few rounds, and
not again one that already answered. Both facts are read back from the message list alone
(assistant tool calls and tool results since the person's message), so this is pure logic.
"""

from __future__ import annotations

import re
from typing import Any

# A tool result that reports an error (possibly inside the untrusted-output wrapper).
_FAILED = re.compile(r"^(?:<tool_output[^>]*>\s*)?error:", re.I)


def rounds_this_turn(messages: list[dict[str, Any]]) -> tuple[int, set[str]]:
    """Tool rounds since the person's message, and the tools already called in them that
    answered. A tool whose call failed may be called again (within the adapter's
    MAX_TOOL_ROUNDS): its error says how to write the arguments, and a small model's second try
    usually follows it."""
    rounds, names, failed = 0, {}, set()
    for m in reversed(messages):
        if m.get("role") == "user":
            break
        if m.get("role") == "assistant" and m.get("tool_calls"):
            rounds += 1
            names.update({c.get("id", ""): c["function"]["name"] for c in m["tool_calls"]})
        elif m.get("role") == "tool" and _FAILED.match(str(m.get("content") or "")):
            failed.add(m.get("tool_call_id", ""))
    called = {name for call_id, name in names.items() if call_id not in failed}
    return rounds, called
