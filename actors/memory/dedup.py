"""Insert or reinforce: a memory written twice should grow stronger, not appear twice.

An active item of the same kind whose words overlap the new text by Jaccard above 0.75 is
reinforced instead (importance raised; the caller also refreshes its last_used). Exactly 0.75
is not a duplicate: "above" in the spec, and three shared words out of four is often a real
difference ("sister Anna" vs "sister Hannah").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel

from actors.memory.model import MAX_IMPORTANCE, Kind, MindItem, clamp_importance
from actors.memory.scoring import jaccard
from actors.common.text import word_set

DUPLICATE_OVERLAP = 0.75
REINFORCE_STEP = 1.0


class Insert(BaseModel):
    action: Literal["insert"] = "insert"
    kind: Kind
    text: str
    importance: float


class Reinforce(BaseModel):
    action: Literal["reinforce"] = "reinforce"
    item_id: int
    new_importance: float


def reinforced_importance(old: float, new: float) -> float:
    """Saying something again makes it matter more than either mention alone, up to the cap."""
    return min(MAX_IMPORTANCE, max(old, new) + REINFORCE_STEP)


def find_duplicate(kind: Kind, text: str, existing: Iterable[MindItem]) -> MindItem | None:
    """The active same-kind item `text` duplicates: the closest one, the oldest id on a tie so
    the answer does not depend on the order the caller listed items in."""
    new_words = word_set(text)
    best: tuple[float, int] | None = None
    match: MindItem | None = None
    for item in existing:
        if not item.active or item.kind != kind:
            continue
        overlap = jaccard(new_words, word_set(item.text))
        if overlap <= DUPLICATE_OVERLAP:
            continue
        key = (-overlap, item.id)
        if best is None or key < best:
            best, match = key, item
    return match


def decide_insert(new_kind: Kind, new_text: str, importance: float,
                  existing: list[MindItem]) -> Insert | Reinforce:
    """Whether writing (`new_kind`, `new_text`) should insert a row or reinforce one."""
    importance = clamp_importance(float(importance))
    duplicate = find_duplicate(new_kind, new_text, existing)
    if duplicate is None:
        return Insert(kind=new_kind, text=new_text.strip(), importance=importance)
    return Reinforce(item_id=duplicate.id,
                     new_importance=reinforced_importance(duplicate.importance, importance))
