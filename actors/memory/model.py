"""The shapes memory is made of: typed items plus the mood and persona records.

These are the boundary models between the pure memory logic and whatever stores it, so they
accept what a row or a model-written JSON record gives them (0/1 for booleans, missing fields)
and keep numbers within the ranges the rest of the logic relies on.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator

Kind = Literal["fact", "insight", "pattern", "person", "lesson", "playbook", "skill", "open_loop", "goal"]
KINDS: tuple[str, ...] = get_args(Kind)

# The two key-value records beside the mind table.
MOOD_KV = "mind_mood"
PERSONA_KV = "mind_persona"

MIN_IMPORTANCE = 1.0
MAX_IMPORTANCE = 10.0
DEFAULT_IMPORTANCE = 5.0


def clamp_importance(value: float) -> float:
    """Importance within 1..10; NaN (a model can write it) becomes the default, not a crash."""
    if math.isnan(value):
        return DEFAULT_IMPORTANCE
    return min(MAX_IMPORTANCE, max(MIN_IMPORTANCE, value))


def clamp_valence(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(-1.0, value))


class MindItem(BaseModel):
    """One row of the `mind` table."""

    model_config = ConfigDict(frozen=True)

    id: int
    kind: Kind
    text: str
    importance: float = DEFAULT_IMPORTANCE
    uses: int = 0
    active: bool = True
    created: float
    # None (or 0) means never used; recency then counts from `created`.
    last_used: float | None = None
    # What produced it: None for the owner's own words, else the untrusted sources it was
    # learned from ("file:12 notes.txt; web:example.com"). Such an item is quoted as data in
    # the prompt, never becomes a playbook rule, and taints the turn that reads it.
    provenance: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def from_outside(self) -> bool:
        """Learned from content that was not the owner's own words (the owner sees this mark)."""
        return bool(self.provenance)


NEUTRAL_FEELING = "neutral"


class Mood(BaseModel):
    """kv('mind_mood'); `ts` is when it was set, since it fades back to neutral with age."""

    model_config = ConfigDict(frozen=True)

    feeling: str = NEUTRAL_FEELING
    valence: float = 0.0
    why: str = ""
    ts: float = 0.0

    @field_validator("valence", mode="after")
    @classmethod
    def _clamp(cls, value: float) -> float:
        return clamp_valence(value)

    @property
    def is_neutral(self) -> bool:
        return self.feeling.strip().lower() in ("", NEUTRAL_FEELING)


class Persona(BaseModel):
    """kv('mind_persona'): the character the agent wrote for itself."""

    model_config = ConfigDict(frozen=True)

    purpose: str = ""
    aesthetic: str = ""
    voice: str = ""
    vocabulary: list[str] = Field(default_factory=list)
    address: str = ""
    rituals: list[str] = Field(default_factory=list)
    avoid: list[str] = Field(default_factory=list)
