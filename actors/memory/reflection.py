"""Per-turn reflection (spec section 8): parse what the model wrote, then plan the writes.

The model's answer is untrusted, often slightly malformed text. `parse_reflection` takes what
it can from it and never raises; `plan_reflection` turns it into explicit operations, checking
every id it names against the items that exist, so a hallucinated or mistyped id is dropped
rather than applied to the wrong row. Storage applies the operations; nothing here writes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, field_validator

from actors.memory.dedup import Insert, decide_insert, reinforced_importance
from actors.common.jsonish import find_object
from actors.memory.model import DEFAULT_IMPORTANCE, Kind, MindItem, Mood, clamp_importance, clamp_valence
from actors.memory.secrets import looks_secret

# A model asked for "a few observations" occasionally returns dozens; past this they are
# mostly noise, and each one costs a row and a dedup pass.
MAX_NOTES = 20
MAX_IDS = 50
LESSON_IMPORTANCE = 6.0
SKILL_IMPORTANCE = 6.0
OPEN_LOOP_IMPORTANCE = 5.0



# ---- lenient coercion ---------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_ID = re.compile(r"^\s*(?:id\s*)?#?\s*(\d+)\s*$", re.IGNORECASE)


def _number(value: Any) -> float | None:
    """A finite number from a number or a string holding one ("7", "7/10", "0.5")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and (match := _NUMBER.search(value)):
        number = float(match.group(0))
    else:
        return None
    return number if math.isfinite(number) else None


def _importance(value: Any) -> float:
    number = _number(value)
    return DEFAULT_IMPORTANCE if number is None else clamp_importance(number)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    # A single object or string where a list was asked for is still one entry.
    return [value]


def _item_id(value: Any) -> int | None:
    if isinstance(value, dict):
        value = value.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value > 0 else None
    if isinstance(value, str) and (match := _ID.match(value)):
        number = int(match.group(1))
        return number if number > 0 else None
    return None


def _ids(value: Any) -> list[int]:
    ids: dict[int, None] = {}
    for entry in _as_list(value)[:MAX_IDS]:
        item_id = _item_id(entry)
        if item_id is not None:
            ids.setdefault(item_id, None)
    return list(ids)


class Note(BaseModel):
    """An observation or a person: text plus importance 1-10."""

    text: str
    importance: float = DEFAULT_IMPORTANCE

    @field_validator("importance", mode="before")
    @classmethod
    def _coerce_importance(cls, value: Any) -> float:
        return _importance(value)


def _notes(value: Any) -> list[Note]:
    notes: list[Note] = []
    for entry in _as_list(value):
        if isinstance(entry, str):
            text, importance = entry.strip(), DEFAULT_IMPORTANCE
        elif isinstance(entry, dict):
            text, importance = _text(entry.get("text")), _importance(entry.get("importance"))
        else:
            continue
        if text:
            notes.append(Note(text=text, importance=importance))
        if len(notes) >= MAX_NOTES:
            break
    return notes


def _strings(value: Any) -> list[str]:
    texts: list[str] = []
    for entry in _as_list(value):
        text = _text(entry.get("text")) if isinstance(entry, dict) else _text(entry)
        if text:
            texts.append(text)
        if len(texts) >= MAX_NOTES:
            break
    return texts


class SkillNote(BaseModel):
    when: str
    how: str


class Update(BaseModel):
    id: int
    text: str


class MoodNote(BaseModel):
    feeling: str
    valence: float = 0.0
    why: str = ""

    @field_validator("valence", mode="before")
    @classmethod
    def _coerce_valence(cls, value: Any) -> float:
        number = _number(value)
        return 0.0 if number is None else clamp_valence(number)


def _lesson(value: Any) -> str:
    # Asked for one lesson, a model sometimes lists several; keep them rather than none.
    return "; ".join(_strings(value))


# Field types that read whatever the model wrote leniently, before pydantic checks them.
_Notes = Annotated[list[Note], BeforeValidator(_notes)]
_Strings = Annotated[list[str], BeforeValidator(_strings)]
_Ids = Annotated[list[int], BeforeValidator(_ids)]
_Lesson = Annotated[str, BeforeValidator(_lesson)]


class Reflection(BaseModel):
    """The reflection JSON, every field present and well-typed whatever the model wrote."""

    observations: _Notes = Field(default_factory=list)
    people: _Notes = Field(default_factory=list)
    lesson: _Lesson = ""
    skill: SkillNote | None = None
    open_loops: _Strings = Field(default_factory=list)
    closed_loops: _Ids = Field(default_factory=list)
    updates: list[Update] = Field(default_factory=list)
    outdated: _Ids = Field(default_factory=list)
    mood: MoodNote | None = None

    @field_validator("skill", mode="before")
    @classmethod
    def _coerce_skill(cls, value: Any) -> SkillNote | None:
        if not isinstance(value, dict):
            return None
        when, how = _text(value.get("when")), _text(value.get("how"))
        return SkillNote(when=when, how=how) if when and how else None

    @field_validator("updates", mode="before")
    @classmethod
    def _coerce_updates(cls, value: Any) -> list[Update]:
        updates: list[Update] = []
        for entry in _as_list(value)[:MAX_IDS]:
            if not isinstance(entry, dict):
                continue
            item_id, text = _item_id(entry.get("id")), _text(entry.get("text"))
            if item_id is not None and text:
                updates.append(Update(id=item_id, text=text))
        return updates

    @field_validator("mood", mode="before")
    @classmethod
    def _coerce_mood(cls, value: Any) -> MoodNote | None:
        if not isinstance(value, dict):
            return None
        feeling = _text(value.get("feeling"))
        if not feeling:
            return None
        return MoodNote(feeling=feeling, valence=value.get("valence"), why=_text(value.get("why")))


_FIELDS = frozenset(Reflection.model_fields)


def find_reflection(raw: str) -> Reflection | None:
    """The reflection in `raw` (JSON, possibly in prose or code fences, with the usual model
    slips), or None when the answer holds no reflection object at all. Never raises."""
    found = find_object(raw, _FIELDS)
    if found is None:
        return None
    try:
        return Reflection.model_validate(found)
    except Exception:  # noqa: BLE001 - the validators coerce everything; this is the last guard
        return Reflection()


def parse_reflection(raw: str) -> Reflection:
    """Like `find_reflection`, with an empty Reflection when nothing usable is there."""
    return find_reflection(raw) or Reflection()


# ---- planning the writes ------------------------------------------------------------------

class InsertOp(BaseModel):
    op: Literal["insert"] = "insert"
    kind: Kind
    text: str
    importance: float
    created: float
    # Untrusted sources the item was learned from (None: the owner's own words).
    provenance: str | None = None


class ReinforceOp(BaseModel):
    op: Literal["reinforce"] = "reinforce"
    item_id: int
    importance: float
    last_used: float


class UpdateOp(BaseModel):
    op: Literal["update"] = "update"
    item_id: int
    text: str
    last_used: float


class DeactivateOp(BaseModel):
    op: Literal["deactivate"] = "deactivate"
    item_id: int
    reason: Literal["outdated", "closed"]


class SetMoodOp(BaseModel):
    op: Literal["set_mood"] = "set_mood"
    mood: Mood


Op = Annotated[InsertOp | ReinforceOp | UpdateOp | DeactivateOp | SetMoodOp, Field(discriminator="op")]


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _writes(reflection: Reflection) -> list[tuple[Kind, str, float]]:
    writes: list[tuple[Kind, str, float]] = []
    writes += [("fact", n.text, n.importance) for n in reflection.observations]
    writes += [("person", n.text, n.importance) for n in reflection.people]
    if reflection.lesson:
        writes.append(("lesson", reflection.lesson, LESSON_IMPORTANCE))
    if reflection.skill:
        writes.append(("skill", f"When {reflection.skill.when}: {reflection.skill.how}", SKILL_IMPORTANCE))
    writes += [("open_loop", text, OPEN_LOOP_IMPORTANCE) for text in reflection.open_loops]
    return writes


def plan_reflection(reflection: Reflection, existing: dict[int, MindItem], now: float) -> list[Op]:
    """The operations that apply `reflection` to memory, in the order to apply them:
    deactivations, rewrites, reinforcements, inserts, mood.

    Ids must name an existing active item (and, to close a loop, an open_loop item); others
    are ignored. Rewrites happen before inserts are deduplicated so that a correction that
    also restates the corrected fact reinforces the rewritten item instead of adding a copy.
    Secret-looking text is dropped wherever it appears.
    """
    # Keyed by each item's own id, so a caller's mis-keyed dict cannot redirect a write.
    working: dict[int, MindItem] = {item.id: item for item in existing.values()}
    ops: list[Op] = []

    for item_id in reflection.outdated:
        item = working.get(item_id)
        if item is not None and item.active:
            ops.append(DeactivateOp(item_id=item_id, reason="outdated"))
            working[item_id] = item.model_copy(update={"active": False})
    for item_id in reflection.closed_loops:
        item = working.get(item_id)
        if item is not None and item.active and item.kind == "open_loop":
            ops.append(DeactivateOp(item_id=item_id, reason="closed"))
            working[item_id] = item.model_copy(update={"active": False})

    rewrites: dict[int, str] = {}
    for update in reflection.updates:
        item = working.get(update.id)
        if item is None or not item.active or looks_secret(update.text):
            continue
        rewrites[update.id] = update.text  # a later rewrite of the same item wins
    for item_id, text in rewrites.items():
        if _same_text(working[item_id].text, text):
            continue
        ops.append(UpdateOp(item_id=item_id, text=text, last_used=now))
        working[item_id] = working[item_id].model_copy(update={"text": text, "last_used": now})

    # Inserts planned in this pass take part in dedup under negative ids, so two observations
    # saying the same thing become one insert.
    pending: dict[int, MindItem] = {}
    reinforced: dict[int, float] = {}
    for kind, text, importance in _writes(reflection):
        if looks_secret(text):
            continue
        pool = [*working.values(), *pending.values()]
        decision = decide_insert(kind, text, importance, pool)
        if isinstance(decision, Insert):
            placeholder = -(len(pending) + 1)
            pending[placeholder] = MindItem(id=placeholder, kind=kind, text=decision.text,
                                            importance=decision.importance, created=now)
        elif decision.item_id < 0:
            merged = pending[decision.item_id]
            pending[decision.item_id] = merged.model_copy(
                update={"importance": reinforced_importance(merged.importance, importance)})
        else:
            reinforced[decision.item_id] = decision.new_importance
            working[decision.item_id] = working[decision.item_id].model_copy(
                update={"importance": decision.new_importance, "last_used": now})

    ops += [ReinforceOp(item_id=i, importance=imp, last_used=now) for i, imp in reinforced.items()]
    ops += [InsertOp(kind=item.kind, text=item.text, importance=item.importance, created=now)
            for item in pending.values()]

    if reflection.mood and not looks_secret(reflection.mood.feeling):
        why = "" if looks_secret(reflection.mood.why) else reflection.mood.why
        ops.append(SetMoodOp(mood=Mood(feeling=reflection.mood.feeling, valence=reflection.mood.valence,
                                       why=why, ts=now)))
    return ops


# ---- which turns are worth reflecting on --------------------------------------------------

TRIVIAL_MAX_CHARS = 40

# The owner pushing back: exactly the turns reflection exists to learn from.
_CORRECTION = re.compile(
    r"(?i)(?:^\s*no\s*$|\bno[,.!]|\bnope\b|\bwrong\b|\bactually\b|\bthat['’]?s\s+not\b|\bthat\s+is\s+not\b|"
    r"\bthat\s+isn['’]?t\b|\bi\s+said\b|\bcorrection\b|\bi\s+meant\b|\bincorrect\b|\bnot\s+what\s+i\b)")
# A short message can still tell something about the owner ("my sister is Hannah").
_SELF_DISCLOSURE = re.compile(
    r"(?i)\b(?:my|mine|i['’]m|i\s+am|i['’]ve|i\s+have|i\s+was|i\s+like|i\s+love|i\s+hate|i\s+prefer|"
    r"i\s+need|i\s+want|i\s+live|i\s+work|remember)\b")
# A short "ok, do it" can still leave the agent with a promise to keep.
_COMMITMENT = re.compile(r"(?i)\b(?:i['’]ll|i\s+will|i['’]m\s+going\s+to|i\s+shall|remind\s+you)\b")


def is_trivial(user_text: str, reply: str, tool_calls: Sequence[object] | None) -> bool:
    """True for a turn not worth a reflection call: a short message, no tools, nothing the
    owner corrected or disclosed, and no promise in the reply."""
    if tool_calls:
        return False
    text = user_text.strip()
    if len(text) > TRIVIAL_MAX_CHARS:
        return False
    if _CORRECTION.search(text) or _SELF_DISCLOSURE.search(text):
        return False
    return not _COMMITMENT.search(reply or "")


def parse_id(value: Any) -> int | None:
    """An item id from what a model wrote for one ("12", "#12", {"id": 12}); None if none."""
    return _item_id(value)


def is_correction(text: str) -> bool:
    """True when the owner's message pushes back on what the agent said or did."""
    return bool(_CORRECTION.search(text or ""))
