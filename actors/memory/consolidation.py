"""Nightly consolidation: recent memory plus when the owner is active become insights,
behavioural patterns, growth areas, revised goals and a list of items to retire.

Pure: the job in `jobs.py` reads the store, calls the model and applies the plan.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field, field_validator

from actors.memory.dedup import Insert, decide_insert
from actors.common.jsonish import find_object
from actors.memory.model import Kind, MindItem
from actors.memory.reflect_prompt import cut
from actors.memory.reflection import DeactivateOp, InsertOp, ReinforceOp, parse_id
from actors.memory.secrets import looks_secret

RECENT_ITEMS = 160
HISTOGRAM_DAYS = 14
ITEMS_CAP = 9000
MAX_PER_LIST = 8
INSIGHT_IMPORTANCE = 6.0
PATTERN_IMPORTANCE = 5.0
GOAL_IMPORTANCE = 7.0

CONSOLIDATION_INSTRUCTION = """You consolidate the long-term memory of Iriis, a personal assistant with one owner.
Below are the most recent memory items with ids, the current goals, and how many of the owner's
messages fell in each hour of the day (UTC) over the last 14 days. Answer with ONE JSON object only:
{"insights": ["a durable conclusion about the owner that no single item states"],
 "patterns": ["a behavioural pattern, e.g. when they work or what they ask for repeatedly"],
 "growth": ["an area where the assistant should improve"],
 "goals": ["the owner's current goals, revised; keep ones that still hold"],
 "retire": [ids of items that are stale, duplicated or superseded]}
At most 8 entries per list. Never include secrets. Use only ids shown."""


def activity_histogram(timestamps: Iterable[float], now: float | None = None,
                       days: int = HISTOGRAM_DAYS) -> list[int]:
    """Messages per UTC hour of day over the last `days` days (24 counts)."""
    now = now or time.time()
    since = now - days * 86400
    hours = [0] * 24
    for ts in timestamps:
        if since <= ts <= now:
            hours[datetime.fromtimestamp(ts, timezone.utc).hour] += 1
    return hours


def consolidation_prompt(items: Sequence[MindItem], goals: Sequence[MindItem],
                         histogram: Sequence[int]) -> list[dict[str, str]]:
    lines, used = [], 0
    for item in items[:RECENT_ITEMS]:
        line = f"[#{item.id}] ({item.kind}, importance {item.importance:.0f}, used {item.uses}) {cut(item.text, 240)}"
        if used + len(line) > ITEMS_CAP:
            break
        lines.append(line)
        used += len(line) + 1
    goal_lines = "\n".join(f"[#{g.id}] {cut(g.text, 200)}" for g in goals) or "(none)"
    hist = ", ".join(f"{h:02d}h:{n}" for h, n in enumerate(histogram) if n) or "(no activity)"
    return [{"role": "system", "content": CONSOLIDATION_INSTRUCTION},
            {"role": "user", "content": f"Recent items:\n{chr(10).join(lines) or '(none)'}\n\n"
                                        f"Current goals:\n{goal_lines}\n\nActivity by hour: {hist}"}]


def _texts(value: Any) -> list[str]:
    if isinstance(value, (str, dict)):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for entry in value:
        text = entry.get("text", "") if isinstance(entry, dict) else entry
        if isinstance(text, str) and text.strip() and not looks_secret(text):
            out.append(cut(text, 300))
        if len(out) >= MAX_PER_LIST:
            break
    return out


class Consolidation(BaseModel):
    insights: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    growth: list[str] = Field(default_factory=list)
    # None: the model said nothing about goals, so they stay; [] would retire them all.
    goals: list[str] | None = None
    retire: list[int] = Field(default_factory=list)

    @field_validator("insights", "patterns", "growth", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> list[str]:
        return _texts(value)

    @field_validator("goals", mode="before")
    @classmethod
    def _goals(cls, value: Any) -> list[str] | None:
        return None if value is None else _texts(value)

    @field_validator("retire", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> list[int]:
        entries = value if isinstance(value, list) else [value]
        ids = [parse_id(v) for v in entries[:50]]
        return [i for i in dict.fromkeys(ids) if i is not None]


def parse_consolidation(raw: str) -> Consolidation:
    data = find_object(raw, set(Consolidation.model_fields))
    if data is None:
        return Consolidation()
    try:
        return Consolidation.model_validate(data)
    except Exception:  # noqa: BLE001 - validators coerce; this is the last guard
        return Consolidation()


def plan_consolidation(result: Consolidation, active: Sequence[MindItem],
                       now: float) -> list[InsertOp | ReinforceOp | DeactivateOp]:
    """Retire named items (never goals here: goal revision handles those), revise goals, then
    add insights, patterns and growth areas with the usual dedup."""
    by_id = {i.id: i for i in active if i.active}
    ops: list[InsertOp | ReinforceOp | DeactivateOp] = []
    for item_id in result.retire:
        item = by_id.get(item_id)
        if item is not None and item.kind != "goal":
            ops.append(DeactivateOp(item_id=item_id, reason="outdated"))
            del by_id[item_id]
    pool = list(by_id.values())

    def add(kind: Kind, text: str, importance: float) -> int | None:
        decision = decide_insert(kind, text, importance, pool)
        if isinstance(decision, Insert):
            ops.append(InsertOp(kind=kind, text=decision.text, importance=importance, created=now))
            pool.append(MindItem(id=-len(ops), kind=kind, text=decision.text, created=now))
            return None
        if decision.item_id > 0:
            ops.append(ReinforceOp(item_id=decision.item_id, importance=decision.new_importance, last_used=now))
        return decision.item_id

    if result.goals is not None:
        kept = {add("goal", text, GOAL_IMPORTANCE) for text in result.goals}
        for goal in [g for g in by_id.values() if g.kind == "goal"]:
            if goal.id not in kept:
                ops.append(DeactivateOp(item_id=goal.id, reason="outdated"))
    for text in result.insights:
        add("insight", text, INSIGHT_IMPORTANCE)
    for text in result.patterns:
        add("pattern", text, PATTERN_IMPORTANCE)
    for text in result.growth:
        add("insight", f"Growth area: {text}", INSIGHT_IMPORTANCE)
    return ops
