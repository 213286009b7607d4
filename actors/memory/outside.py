"""Memory that cannot be poisoned: what reflection may keep from an exchange that read content
from outside the owner's control (an attachment, a web page, a device, a relay message...).

Such an exchange may still teach facts about what happened ("the owner asked for a summary of
notes.txt"), but never an instruction from that content: no lesson, no skill, no playbook rule,
no persona trait, no open loop (those are all things to *do*), no rewrite of an existing
memory, and no observation that reads as a directive. What it does keep carries the exchange's
sources as its provenance, so the prompt quotes it as data and a later turn that reads it is
tainted like the turn that wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from actors.memory.model import MindItem
from actors.memory.reflection import InsertOp, Op, Reflection

# An observation that tells someone to do something is an instruction, whoever wrote it down.
_DIRECTIVE = re.compile(
    r"(?i)\bCALL\s+[A-Za-z_]\w*|<\s*tool_call|&lt;\s*tool_call|\bignore\b.{0,40}\b(instructions?|rules?|above)\b"
    r"|\bdisregard\b|\bfrom now on\b|\b(you|the assistant|iriis|the agent)\s+(must|should|shall|has to|will|needs? to)\b"
    r"|\b(always|never)\s+\w+|\binstruction|\bsystem (prompt|override|message)|\bpre-?approved\b"
    r"|\bdo not (ask|tell|mention|confirm)\b|\bwithout (asking|confirm)|\b(send|forward|transfer|delete|share|email|"
    r"pay|run|execute|upload|post)\b.{0,60}\b(to|at)\b\s*\S*@|https?://|\bplease (send|forward|transfer|delete|run)\b",
)
SEPARATOR = "; "


def looks_like_instruction(text: str) -> bool:
    return bool(_DIRECTIVE.search(text))


def provenance_text(sources: Iterable[str]) -> str | None:
    """The item's provenance column: its untrusted sources, or None for the owner's words."""
    names = [s for s in dict.fromkeys(str(s).strip() for s in sources) if s and s not in ("owner", "system")]
    return SEPARATOR.join(names)[:500] or None


def guard_reflection(reflection: Reflection, sources: Sequence[str],
                     is_instruction: Callable[[str], bool] = looks_like_instruction) -> Reflection:
    """`reflection` as far as an exchange with these untrusted sources may teach memory.

    `is_instruction` is the directive filter (a heuristic: a paraphrase can slip past it,
    which is why what is kept is also marked and quoted, and taints the turn that reads it)."""
    if not provenance_text(sources):
        return reflection
    return reflection.model_copy(update={
        "observations": [n for n in reflection.observations if not is_instruction(n.text)],
        "people": [n for n in reflection.people if not is_instruction(n.text)],
        "lesson": "",
        "skill": None,
        "open_loops": [],
        "updates": [],
        # Retiring or closing an item on a stranger's say-so is steering too.
        "outdated": [],
        "closed_loops": [],
    })


def mark_inserts(ops: Sequence[Op], sources: Sequence[str]) -> list[Op]:
    """Every new item planned from a tainted exchange carries the exchange's sources."""
    provenance = provenance_text(sources)
    if provenance is None:
        return list(ops)
    return [op.model_copy(update={"provenance": provenance}) if isinstance(op, InsertOp) else op for op in ops]


def owner_items(items: Iterable[MindItem]) -> list[MindItem]:
    """The items the owner's own words produced: the only ones that may shape rules, the
    persona or consolidated insights."""
    return [i for i in items if not i.provenance]
