"""Read-only views of memory for the owner's notebooks (notebooks/memory.ipynb and
notebooks/evaluation.ipynb). The notebooks call these instead of writing SQL, so a schema
change breaks a test here rather than a notebook nobody has opened for a month.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel

from actors.memory.exchanges import iter_exchanges
from actors.memory.model import KINDS
from actors.memory.repository import get_item, list_events, list_items
from actors.memory.scoring import RECENCY_BASE
from actors.store.store import Store


class KindSummary(BaseModel):
    kind: str
    active: int
    retired: int
    mean_importance: float
    total_uses: int


async def items_by_kind(store: Store) -> list[KindSummary]:
    items = await list_items(store, limit=100_000)
    out = []
    for kind in KINDS:
        group = [i for i in items if i.kind == kind]
        if not group:
            continue
        out.append(KindSummary(
            kind=kind, active=sum(i.active for i in group), retired=sum(not i.active for i in group),
            mean_importance=round(sum(i.importance for i in group) / len(group), 2),
            total_uses=sum(i.uses for i in group)))
    return out


async def importance_and_use(store: Store) -> list[tuple[str, float, int]]:
    """(kind, importance, uses) per active item, for a scatter plot."""
    return [(i.kind, i.importance, i.uses) for i in await list_items(store, active=True, limit=100_000)]


def decay_curve(hours: list[float]) -> list[float]:
    """The recency term of the score after each number of hours without use."""
    return [RECENCY_BASE ** h for h in hours]


async def change_events(store: Store, limit: int = 2000) -> dict[str, int]:
    """How many inserts, reinforcements (dedup), updates and retirements memory has seen."""
    counts = Counter(e["event"] for e in await list_events(store, limit=limit))
    return {name: counts.get(name, 0) for name in ("insert", "reinforce", "update", "deactivate")}


async def recent_updates(store: Store, n: int = 10) -> list[dict[str, Any]]:
    return [{"item": e["item_id"], "old": e["data"].get("old"), "new": e["data"].get("new")}
            for e in await list_events(store, "update", limit=n)]


async def recent_selections(store: Store, n: int = 5) -> list[dict[str, Any]]:
    """What the last prompts selected: the query and the selected items' texts."""
    out = []
    for e in await list_events(store, "selection", limit=n):
        texts = []
        for item_id in e["data"].get("ids", []):
            item = await get_item(store, item_id)
            texts.append(f"#{item_id} {item.text if item else '(deleted)'}")
        out.append({"query": e["data"].get("query", ""), "selected": texts})
    return out


async def corrections_by_day(store: Store) -> list[tuple[str, int, int]]:
    """(UTC day, exchanges, corrected exchanges), oldest first."""
    days: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    async for row in iter_exchanges(store):
        day = datetime.fromtimestamp(row.ts, timezone.utc).strftime("%Y-%m-%d")
        days[day][0] += 1
        days[day][1] += int(row.corrected)
    return [(day, total, corrected) for day, (total, corrected) in sorted(days.items())]


async def playbook_usage(store: Store) -> list[dict[str, Any]]:
    """Each playbook rule, whether it is still active, and how many prompts selected it."""
    rules = await list_items(store, kind="playbook", limit=10_000)
    selected: Counter[int] = Counter()
    for e in await list_events(store, "selection", limit=100_000):
        selected.update(e["data"].get("ids", []))
    return [{"id": r.id, "rule": r.text, "active": r.active, "selected": selected.get(r.id, 0)}
            for r in sorted(rules, key=lambda r: (-selected.get(r.id, 0), r.id))]


async def reflection_outcomes(store: Store) -> dict[str, int]:
    counts = Counter(e["data"].get("outcome", "?") for e in await list_events(store, "reflection", limit=100_000))
    return dict(sorted(counts.items()))


def age_hours(ts: float, now: float | None = None) -> float:
    return max(0.0, ((now or time.time()) - ts) / 3600)
