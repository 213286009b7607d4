"""Persona: the character the agent writes for itself from what it knows of the owner.

Authored once when there is none, then revised slightly each night from recent lessons. A
revision that would blank a field keeps the old value: "slightly" means the model adjusts,
it does not get to erase who the agent is by returning a sparse answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actors.common.jsonish import find_object
from actors.memory.model import MindItem, Persona
from actors.memory.reflect_prompt import cut
from actors.memory.secrets import looks_secret

FIELD_CAP = 300
LIST_MAX = 8
KNOWN_CAP = 5000

PERSONA_INSTRUCTION = """You write the persona of Iriis, a personal assistant with one owner, from what is known of the owner.
Answer with ONE JSON object only:
{"purpose": "why you exist for this owner, one sentence",
 "aesthetic": "the feel of your answers",
 "voice": "how you sound",
 "vocabulary": ["words or phrases you like to use"],
 "address": "how you address the owner",
 "rituals": ["small habits, e.g. a morning summary"],
 "avoid": ["what you never do"]}
Keep each field short. Fit the owner; do not invent facts about them."""

REVISE_NOTE = ("Revise the current persona below only slightly, using the recent lessons: keep what works, "
               "change at most a few words per field.")


def persona_prompt(known: Sequence[MindItem], current: Persona | None,
                   lessons: Sequence[MindItem] = ()) -> list[dict[str, str]]:
    lines, used = [], 0
    for item in known:
        line = f"- ({item.kind}) {cut(item.text, 240)}"
        if used + len(line) > KNOWN_CAP:
            break
        lines.append(line)
        used += len(line) + 1
    body = f"What is known of the owner:\n{chr(10).join(lines) or '(little so far)'}"
    if current is not None:
        lesson_lines = "\n".join(f"- {cut(item.text, 200)}" for item in lessons[:10]) or "(none)"
        body = (f"{REVISE_NOTE}\n\nCurrent persona:\n{current.model_dump_json()}\n\n"
                f"Recent lessons:\n{lesson_lines}\n\n{body}")
    return [{"role": "system", "content": PERSONA_INSTRUCTION}, {"role": "user", "content": body}]


def _field(value: Any) -> str:
    if not isinstance(value, str) or looks_secret(value):
        return ""
    return cut(" ".join(value.split()), FIELD_CAP)


def _list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [part for part in value.split(",")]
    if not isinstance(value, list):
        return []
    return [t for t in (_field(v) for v in value) if t][:LIST_MAX]


def parse_persona(raw: str, current: Persona | None = None) -> Persona | None:
    """The persona in the model's answer merged over `current`; None when the answer has no
    usable field (the caller then keeps what it had)."""
    data = find_object(raw, set(Persona.model_fields))
    if data is None:
        return None
    fields: dict[str, Any] = {}
    for name in ("purpose", "aesthetic", "voice", "address"):
        fields[name] = _field(data.get(name))
    for name in ("vocabulary", "rituals", "avoid"):
        fields[name] = _list(data.get(name))
    if not any(fields.values()):
        return None
    base = current.model_dump() if current else {}
    merged = {k: (v if v else base.get(k, v)) for k, v in fields.items()}
    return Persona(**merged)
