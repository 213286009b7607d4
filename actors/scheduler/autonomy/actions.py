"""What a decision does, each addressed to the owner and no one else.

- `message` / `emergency`: a notification in the owner's outbox (the notifications issue
  delivers it; an emergency carries priority 5).
- `task` / `work` / `practice`: a row in `tasks` (actors/scheduler/tasks.py), run by the task
  runner; its id is remembered so the runner gives it only the owner-only work tools.
- `call`: a call due now in the `calls` table (actors/notify), as the `tasks` server's
  schedule_call makes one: the call watcher rings the owner on every channel. The scheduler
  passes its own `place_call`; without one the call is made here.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from actors.notify import call_store
from actors.scheduler import tasks
from actors.scheduler.autonomy.decision import Decision
from actors.store.models import OutboxItem
from actors.store.store import Store

log = logging.getLogger(__name__)

AUTONOMY_TASKS_KV = "autonomy_task_ids"
KEEP_TASK_IDS = 200

# (reason, opening line) -> the call's id.
PlaceCall = Callable[[str, str], Awaitable[str]]


class ActionSink(Protocol):
    """Where decisions land. Every method addresses the owner."""

    async def notify_owner(self, kind: str, title: str, body: str, data: dict[str, Any]) -> str: ...

    async def start_background(self, kind: str, title: str, goal: str, run_at: float | None, now: float) -> str: ...

    async def call_owner(self, reason: str, opening: str, now: float) -> str: ...


def parse_run_at(text: str, now: float) -> float | None:
    """An ISO time from the model, in the future, else None (run now)."""
    if not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    at = moment.timestamp()
    return at if at > now else None


class StoreActions:
    """The production sink: the store's outbox, the tasks table and the call hook."""

    def __init__(self, store: Store, place_call: PlaceCall | None = None) -> None:
        self.store = store
        self.place_call = place_call

    async def notify_owner(self, kind: str, title: str, body: str, data: dict[str, Any]) -> str:
        item_id = await self.store.add_outbox(OutboxItem(kind=kind, title=title, body=body, data=data))
        return f"outbox {item_id}"

    async def start_background(self, kind: str, title: str, goal: str, run_at: float | None, now: float) -> str:
        row = await tasks.create_task(self.store, title, goal, now, run_at=run_at)
        ids = list(await self.store.get_kv(AUTONOMY_TASKS_KV, []) or [])
        await self.store.set_kv(AUTONOMY_TASKS_KV, [*ids, row.id][-KEEP_TASK_IDS:])
        return f"task {row.id}"

    async def call_owner(self, reason: str, opening: str, now: float) -> str:
        if self.place_call is not None:
            return f"call {await self.place_call(reason, opening)}"
        call = await call_store.create_call(self.store, now, reason or "Iriis wants to talk", now,
                                            opening=opening or None, source="autonomy")
        return f"call {call.id}"


async def is_autonomy_task(store: Store, task_id: int) -> bool:
    """Whether the autonomy loop made this row: the runner then gives it only the owner-only
    work tools (actors/scheduler/owner_tools.py)."""
    return task_id in (await store.get_kv(AUTONOMY_TASKS_KV, []) or [])


async def carry_out(sink: ActionSink, decision: Decision, now: float) -> str:
    """Do what the decision says; returns what was done, for the record."""
    action = decision.action
    if action == "none":
        return ""
    if action in ("message", "emergency"):
        data = {"source": "autonomy", "action": action, **({"priority": 5} if action == "emergency" else {})}
        title = "Iriis" if action == "message" else "Iriis: urgent"
        return await sink.notify_owner(f"autonomy_{action}", title, decision.message, data)
    if action == "call":
        return await sink.call_owner(decision.reason or decision.thought, decision.message, now)
    title = decision.title or decision.goal[:80]
    if action == "practice" and not title.lower().startswith("practice"):
        title = f"Practice: {title}"
    return await sink.start_background(action, title, decision.goal or decision.title,
                                       parse_run_at(decision.run_at, now), now)
