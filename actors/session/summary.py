"""The rolling summary: messages that leave the verbatim window are folded into it.

A long conversation keeps its start this way instead of losing it.
"""

from __future__ import annotations

from typing import Any

SUMMARY_CAP = 6000
SUMMARY_INSTRUCTION = (
    "You keep the running summary of a conversation between the owner and their assistant, "
    "Iriis. Rewrite the summary so it also covers the new messages below. Keep every fact, "
    "name, number, decision, request and open question; drop pleasantries. Write plain "
    "sentences, at most 250 words. Reply with the summary only."
)


def _render(messages: list[dict[str, Any]]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def summary_prompt(previous: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SUMMARY_INSTRUCTION},
        {"role": "user", "content": f"Summary so far:\n{previous or '(none yet)'}\n\n"
                                    f"New messages:\n{_render(messages)}"},
    ]


def fallback_summary(previous: str, messages: list[dict[str, Any]]) -> str:
    """Without a model: keep the first line of each message, start first, within the cap."""
    lines = [previous] if previous else []
    for m in messages:
        first = m["content"].strip().splitlines()[0] if m["content"].strip() else ""
        lines.append(f"- {m['role']}: {first[:200]}")
    text = "\n".join(lines)
    if len(text) <= SUMMARY_CAP:
        return text
    # Over the cap: the start of the conversation matters most, then the most recent part.
    head = text[: SUMMARY_CAP // 2]
    tail = text[-(SUMMARY_CAP // 2) + 20:]
    return head + "\n[...]\n" + tail
