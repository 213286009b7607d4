"""What the autonomy loop's model calls answer, read leniently and validated.

Three answers: the day's plan, the cheap triage ("is the full look worth it?") and the decision
of spec section 9 (`thought`, `action`, action fields, `close_loops`, `mood`,
`next_check_minutes`). Model text is untrusted and often slightly malformed: the one shared
repairer (actors/common/jsonish.py) finds the object, these models coerce its fields, and an
answer with no usable object becomes the safe default (do nothing, look again later).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from actors.common.jsonish import find_object
from actors.memory.reflection import MoodNote
from actors.scheduler.autonomy.clock import DEFAULT_CHECK_MINUTES, clamp_minutes

Action = Literal["none", "message", "call", "task", "work", "practice", "emergency"]
ACTIONS: tuple[str, ...] = ("none", "message", "call", "task", "work", "practice", "emergency")
# Actions that reach the owner right away (the feedback line counts these).
REACH_OUTS = frozenset({"message", "call", "emergency"})
# Actions that become a background row (a task the runner executes).
BACKGROUND = frozenset({"task", "work", "practice"})

TEXT_CAP = 1000
THOUGHT_CAP = 600
MAX_LOOPS = 8
MAX_CHECKPOINTS = 6

# Words models use for the same action.
_ACTION_ALIASES = {"nothing": "none", "wait": "none", "sleep": "none", "noop": "none", "": "none",
                   "notify": "message", "reach_out": "message", "ping": "message", "text": "message",
                   "ring": "call", "phone": "call", "research": "work", "project": "work",
                   "background": "task", "urgent": "emergency", "alert": "emergency"}


def estimate_tokens(text: str) -> int:
    """Tokens as characters / 4 (rounded up): the project has no tokeniser of its own, and
    the budget only needs to be proportional and conservative."""
    return (len(text) + 3) // 4


def messages_tokens(messages: list[dict[str, str]]) -> int:
    # A few tokens of framing per message, as chat APIs count them.
    return sum(estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)


def _text(value: Any, cap: int = TEXT_CAP) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        value = str(value)
    return " ".join(value.split())[:cap]


def _ids(value: Any) -> list[int]:
    entries = value if isinstance(value, list) else [value]
    out: list[int] = []
    for entry in entries:
        if isinstance(entry, bool) or entry is None:
            continue
        if isinstance(entry, str):
            entry = entry.strip().lstrip("#")
        try:
            number = int(entry)
        except (TypeError, ValueError):
            continue
        if number > 0 and number not in out:
            out.append(number)
    return out[:MAX_LOOPS]


class Decision(BaseModel):
    """One wake's decision. Action fields: `message` (what to tell the owner, for message,
    call and emergency), `title` and `goal` (for task, work and practice), `run_at` (optional
    ISO time for a task), `reason` (why a call)."""

    thought: str = ""
    action: Action = "none"
    message: str = ""
    title: str = ""
    goal: str = ""
    run_at: str = ""
    reason: str = ""
    close_loops: list[int] = Field(default_factory=list)
    mood: MoodNote | None = None
    next_check_minutes: int = DEFAULT_CHECK_MINUTES

    @field_validator("thought", mode="before")
    @classmethod
    def _thought(cls, value: Any) -> str:
        return _text(value, THOUGHT_CAP)

    @field_validator("message", "title", "goal", "run_at", "reason", mode="before")
    @classmethod
    def _fields(cls, value: Any) -> str:
        return _text(value)

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> str:
        word = _text(value, 40).lower().replace("-", "_").replace(" ", "_")
        word = _ACTION_ALIASES.get(word, word)
        return word if word in ACTIONS else "none"

    @field_validator("close_loops", mode="before")
    @classmethod
    def _loops(cls, value: Any) -> list[int]:
        return _ids(value)

    @field_validator("mood", mode="before")
    @classmethod
    def _mood(cls, value: Any) -> MoodNote | None:
        if not isinstance(value, dict) or not _text(value.get("feeling")):
            return None
        return MoodNote(feeling=_text(value.get("feeling"), 60), valence=value.get("valence"),
                        why=_text(value.get("why"), 200))

    @field_validator("next_check_minutes", mode="before")
    @classmethod
    def _minutes(cls, value: Any) -> int:
        return clamp_minutes(value)

    def effective(self) -> "Decision":
        """An action missing what it needs becomes "none" (a message with no text, a task
        with no goal), so nothing half-formed reaches the owner."""
        if self.action in REACH_OUTS and not self.message:
            return self.model_copy(update={"action": "none"})
        if self.action in BACKGROUND and not (self.goal or self.title):
            return self.model_copy(update={"action": "none"})
        return self


class Triage(BaseModel):
    escalate: bool = False
    why: str = ""
    next_check_minutes: int = DEFAULT_CHECK_MINUTES

    @field_validator("escalate", mode="before")
    @classmethod
    def _flag(cls, value: Any) -> bool:
        if isinstance(value, str):
            return value.strip().lower() in ("true", "yes", "1", "y")
        return bool(value)

    @field_validator("why", mode="before")
    @classmethod
    def _why(cls, value: Any) -> str:
        return _text(value, 300)

    @field_validator("next_check_minutes", mode="before")
    @classmethod
    def _minutes(cls, value: Any) -> int:
        return clamp_minutes(value)


class DayPlan(BaseModel):
    plan: str = ""
    # Local "HH:MM" times at which the loop should look properly even if nothing else changed.
    checkpoints: list[str] = Field(default_factory=list)

    @field_validator("plan", mode="before")
    @classmethod
    def _plan(cls, value: Any) -> str:
        if isinstance(value, list):
            value = "; ".join(_text(v, 200) for v in value)
        return _text(value, 800)

    @field_validator("checkpoints", mode="before")
    @classmethod
    def _times(cls, value: Any) -> list[str]:
        entries = value if isinstance(value, list) else [value]
        out: list[str] = []
        for entry in entries:
            hhmm = _hhmm(entry)
            if hhmm and hhmm not in out:
                out.append(hhmm)
        return sorted(out)[:MAX_CHECKPOINTS]


def _hhmm(value: Any) -> str | None:
    text = _text(value, 10)
    hour, _, minute = text.partition(":")
    try:
        h, m = int(hour), int(minute or 0)
    except ValueError:
        return None
    return f"{h:02d}:{m:02d}" if 0 <= h <= 23 and 0 <= m <= 59 else None


def _parse(model: type[BaseModel], raw: str | None) -> Any:
    data = find_object(raw or "", set(model.model_fields))
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def parse_decision(raw: str | None) -> Decision | None:
    """The decision in the model's answer, or None when it holds none (the caller then does
    nothing and keeps its previous interval)."""
    found = _parse(Decision, raw)
    return found.effective() if found is not None else None


def parse_triage(raw: str | None) -> Triage | None:
    return _parse(Triage, raw)


def parse_plan(raw: str | None) -> DayPlan | None:
    found = _parse(DayPlan, raw)
    return found if found is not None and found.plan else None
