"""MCP server "tasks": the agent's background tasks and reminders
(`python -m actors.scheduler.server`).

"Remind me at 5 to call the dentist" becomes a reminder row here, so the reply's claim is backed
by this tool's result; "look into X and write me a report" becomes a task the scheduler runs as
a background session. The store comes from IRIIS_DATABASE_URL, as for the memory server.

It lives beside the repository rather than in actors/tools/servers: the scheduler package runs
turns (it imports the session package, which imports tools), so a tools module importing it
would make a cycle.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from actors.notify import call_store
from actors.scheduler import tasks
from actors.common.when import looks_like_repeat
from actors.store.store import Store
from actors.tools.servers.files import store_lifespan

mcp: MCPServer[Store] = MCPServer(
    "tasks",
    instructions=("Background tasks, reminders and calls. remind queues a notification for the owner at a time; "
                  "create_task runs a goal later as a background session of yours (research, a report) and "
                  "tells the owner when it is done; schedule_call rings the owner to talk by voice; "
                  "list_tasks shows tasks; cancel_task stops one. Times may be written as a person says them "
                  "('in 20 minutes', '7pm', 'tomorrow at 9', 'next Monday morning', 'tonight at 8') or as ISO 8601 "
                  "in the owner's time zone; repeats as 'every weekday at 8', 'daily at 9', 'every 30 minutes' or "
                  "cron. A refusal says the time now and how to write it."),
    lifespan=store_lifespan,
)

_READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_CANCELS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

When = Annotated[str | None, Field(max_length=80, description=(
    "when, copied from the person's own words ('in 20 minutes', '7pm', 'tomorrow at 9', 'next Monday "
    "morning', '24 December at 18:00'); do not work out a date yourself. ISO 8601 also works"))]
Repeat = Annotated[str | None, Field(max_length=80, description=(
    "only when the person asks for a repeat: 'every weekday at 8', 'daily at 9', 'every Monday at 9', "
    "'every 30 minutes', or cron like '0 9 * * 1-5'; leave it out for a one-off"))]
# What a small model writes in `repeat` to say there is none.
NO_REPEAT = {"", "once", "one time", "none", "no", "never", "false", "null", "0", "n/a", "one-off", "single"}


class TaskLine(BaseModel):
    id: int
    kind: str
    title: str
    status: str
    next_run: str
    repeat: str | None
    runs: int
    result: str | None


def _store(ctx: Context) -> Store:
    return ctx.request_context.lifespan_context


def _repeat_in(text: str) -> tasks.Repeat | None:
    """The repeat a time field holds ("every weekday at 8", "daily"), or None."""
    if not looks_like_repeat(text):
        return None
    try:
        return tasks.parse_repeat(text)
    except tasks.InvalidRepeat:
        return None


def _schedule(at: str | None, repeat: str | None, now: float) -> tuple[float | None, tasks.Repeat | None]:
    """The first time and the repeat, read in the owner's time zone. A repeat written in `at`
    ("every weekday at 8") with no `repeat` is taken as the repeat: small models put it there.
    With a repeat and no time, the first run is the repeat's next time (a cron's next match)."""
    zone = tasks.owner_timezone()
    if repeat is not None and repeat.strip().lower().strip(".'\"") in NO_REPEAT:
        repeat = None   # "once", "none", "no": small models fill the field to say there is none
    try:
        schedule = tasks.parse_repeat(repeat) if repeat and repeat.strip() else None
    except tasks.InvalidRepeat as exc:
        raise ToolError(str(exc)) from None
    first: float | None = None
    if at and at.strip():
        try:
            first = tasks.parse_when(at, now, zone)
        except ValueError as exc:
            in_at = _repeat_in(at) if schedule is None else None
            if in_at is None:
                raise ToolError(str(exc)) from None
            schedule = in_at
    if first is None and schedule is not None and schedule.cron:
        first = schedule.next_after(now, zone)
    return first, schedule


async def _create(ctx: Context, kind: Literal["task", "reminder"], title: str, goal: str, at: str | None,
                  repeat: str | None) -> tasks.Task:
    now = time.time()
    run_at, schedule = _schedule(at, repeat, now)
    if kind == "reminder" and run_at is None and schedule is None:
        raise ToolError("say when: at ('in 20 minutes', '7pm', 'tomorrow at 9') or repeat ('every weekday at 8')")
    try:
        return await tasks.create_task(_store(ctx), title, goal, now, run_at=run_at,
                                       repeat=schedule.text if schedule else None, kind=kind,
                                       tz=tasks.owner_timezone())
    except tasks.InvalidRepeat as exc:
        raise ToolError(str(exc)) from None


@mcp.tool(annotations=_WRITES)
async def remind(
    text: Annotated[str, Field(min_length=1, max_length=500, description="what to remind the owner of")],
    ctx: Context,
    at: When = None,
    repeat: Repeat = None,
) -> str:
    """Remind the owner of something at a time, once or repeating (a notification; nothing else runs).
    Give at, repeat or both; with only repeat the first reminder is the repeat's next time."""
    row = await _create(ctx, "reminder", text[:80], text, at, repeat)
    every = f", repeating {row.repeat}" if row.repeat else ""
    return f"reminder #{row.id} set for {tasks.local_time(row.next_run, tasks.owner_timezone())}{every}"


@mcp.tool(annotations=_WRITES)
async def create_task(
    title: Annotated[str, Field(min_length=1, max_length=120)],
    goal: Annotated[str, Field(min_length=1, max_length=4000, description="what the finished deliverable is")],
    ctx: Context,
    at: Annotated[str | None, Field(max_length=80, description=(
        "when to start, as a person says it ('tonight at 8', 'tomorrow 09:00') or ISO 8601; now when "
        "omitted (or a repeat's next time)"))] = None,
    repeat: Repeat = None,
) -> str:
    """Run a goal as a background session of yours, now or later; the owner is told when it is done."""
    row = await _create(ctx, "task", title, goal, at, repeat)
    every = f", repeating {row.repeat}" if row.repeat else ""
    return f"task #{row.id} scheduled for {tasks.local_time(row.next_run, tasks.owner_timezone())}{every}"


@mcp.tool(annotations=_WRITES)
async def schedule_call(
    reason: Annotated[str, Field(min_length=1, max_length=300, description="why you are calling, in a few words")],
    ctx: Context,
    at: Annotated[str | None, Field(max_length=80, description=(
        "when to ring, as a person says it ('in 10 minutes', '7pm', 'tomorrow at 9') or ISO 8601; now when "
        "omitted (or a repeat's next time)"))] = None,
    opening: Annotated[str | None, Field(max_length=500, description="the first line you will say when "
                                                                      "the owner picks up")] = None,
    repeat: Repeat = None,
) -> str:
    """Ring the owner's phone yourself, only when they ask to be rung ("call me at 8"). Their phone
    and browser ring at the time (Web Push, ntfy, Telegram, the desktop), and answering opens a
    voice conversation with you; unanswered, it is a missed call."""
    # Its words are kept apart from remind's: the local model is offered a tool whose description
    # shares two words with the message (actors/providers/local/cues.py).
    now = time.time()
    first, schedule = _schedule(at, repeat, now)
    call = await call_store.create_call(_store(ctx), first or now, reason.strip(), now,
                                        opening=(opening or "").strip() or None,
                                        repeat=schedule.text if schedule else None, source="agent")
    every = f", repeating {call.repeat}" if call.repeat else ""
    return f"call #{call.id} will ring at {tasks.local_time(call.at, tasks.owner_timezone())}{every}"


@mcp.tool(annotations=_READS)
async def list_tasks(
    ctx: Context,
    status: Annotated[str | None, Field(description="scheduled, running, done, failed or cancelled")] = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 20,
) -> list[TaskLine]:
    """The owner's tasks and reminders, newest first."""
    zone = tasks.owner_timezone()
    return [TaskLine(id=t.id, kind=t.kind, title=t.title, status=t.status, next_run=tasks.local_time(t.next_run, zone),
                     repeat=t.repeat, runs=t.runs, result=(t.result or "")[:300] or None)
            for t in await tasks.list_tasks(_store(ctx), status=status, limit=limit)]


@mcp.tool(annotations=_CANCELS)
async def cancel_task(
    task_id: Annotated[int, Field(ge=1, description="the #id create_task, remind or list_tasks gave")],
    ctx: Context,
) -> str:
    """Cancel a task or reminder (a running task stops at its next step)."""
    store = _store(ctx)
    before = await tasks.get_task(store, task_id)
    if before is None:
        raise ToolError(f"no task #{task_id}; use list_tasks to find the right id")
    if before.status in tasks.FINAL:
        raise ToolError(f"task #{task_id} is already {before.status}")
    row = await tasks.cancel_task(store, task_id, time.time())
    if row is None or row.status != "cancelled":
        raise ToolError(f"task #{task_id} could not be cancelled: it is {row.status if row else 'gone'}")
    return f"cancelled #{task_id} ({row.title})"


def main() -> None:
    mcp.run("stdio")


if __name__ == "__main__":
    main()
