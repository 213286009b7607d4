"""Background tasks (spec section 10) and what the scheduler is doing.

`POST /v1/tasks` makes a row the scheduler's runner claims when due; the runner is woken at
once, so a task due now starts without waiting for the next poll. `DELETE` cancels (a running
task stops at its next step).

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import logging
import time
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field
from ray.exceptions import RayActorError

from actors.common.names import SCHEDULER, find_actor_async
from actors.scheduler import tasks
from serve_apps.http.deps import Owner, StoreDep
from serve_apps.http.errors import ApiError
from serve_apps.http.ids import RowId
from serve_apps.http.models import Open, Page, page

log = logging.getLogger(__name__)
router = APIRouter()


class TaskCreate(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    goal: str = Field(min_length=1, max_length=8000)
    # Epoch seconds or ISO 8601 (without an offset: the owner's IRIIS_TIMEZONE); now when omitted.
    run_at: float | datetime | None = None
    # A cron expression ("0 9 * * 1-5") or an interval ("every 30m", "2 hours", seconds).
    repeat: str | None = Field(default=None, max_length=120)


class TaskPublic(tasks.Task):
    pass


class TaskList(Page[TaskPublic]):
    pass


class SchedulerStatus(Open):
    """The scheduler's loops and what its task runner is doing (next wakes, running, last errors)."""

    running: bool


def _epoch(value: float | datetime | None) -> float | None:
    if value is None or isinstance(value, float | int):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=tasks.owner_timezone())
    return value.timestamp()


async def _scheduler() -> Any | None:
    return await find_actor_async(SCHEDULER)


@router.post("/tasks", status_code=201)
async def task_create(body: TaskCreate, _owner: Owner, store: StoreDep) -> TaskPublic:
    try:
        row = await tasks.create_task(store, body.title, body.goal, time.time(), run_at=_epoch(body.run_at),
                                      repeat=body.repeat or None, tz=tasks.owner_timezone())
    except tasks.InvalidRepeat as exc:
        raise ApiError(422, "invalid_request", f"repeat: {exc}") from None
    handle = await _scheduler()
    if handle is not None:
        # Not awaited: the row is durable already, and the runner's next poll would find it anyway.
        handle.wake.remote()
    return TaskPublic.model_validate(row.model_dump())


@router.get("/tasks")
async def task_list(_owner: Owner, store: StoreDep, status: str | None = None, kind: str | None = None,
                    limit: int = 100) -> TaskList:
    return page(TaskList, await tasks.list_tasks(store, status=status, kind=kind, limit=max(1, min(limit, 1000))))


@router.get("/tasks/{task_id}")
async def task_get(task_id: RowId, _owner: Owner, store: StoreDep) -> TaskPublic:
    row = await tasks.get_task(store, task_id)
    if row is None:
        raise ApiError(404, "not_found", f"No task {task_id}.")
    return TaskPublic.model_validate(row.model_dump())


@router.delete("/tasks/{task_id}")
async def task_cancel(task_id: RowId, _owner: Owner, store: StoreDep) -> TaskPublic:
    """Cancel a scheduled or running task; a finished one is answered as it is."""
    row = await tasks.cancel_task(store, task_id, time.time())
    if row is None:
        raise ApiError(404, "not_found", f"No task {task_id}.")
    return TaskPublic.model_validate(row.model_dump())


@router.get("/scheduler")
async def scheduler_status(_owner: Owner) -> SchedulerStatus:
    handle = await _scheduler()
    if handle is None:
        return SchedulerStatus(running=False)
    try:
        return SchedulerStatus(running=True, **await handle.status.remote())
    except RayActorError as exc:
        raise ApiError(503, "scheduler_unavailable", f"The scheduler is restarting ({type(exc).__name__}); "
                                                     "try again in a moment.") from None
