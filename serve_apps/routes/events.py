"""Device events for their person: the list (seven days, 200 at most) and the live stream.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import json
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from actors.common.ids import ascii_int
from actors.devices import repository as repo
from actors.devices.bus import event_bus
from serve_apps.http.deps import Person, StoreDep
from serve_apps.http.ids import Cursor
from serve_apps.http.models import DeviceEventList, page
from serve_apps.http.openapi import EventStream

router = APIRouter()
KEEPALIVE_SECONDS = 15.0
# Either resume point is read as text: one that is not a plain number is ignored, never a 422.
RESUME = "Replay the events kept after this id (ASCII digits, at most 2^31 - 1); anything else is ignored."
ResumeHeader = Annotated[str | None, Header(alias="Last-Event-ID", description=RESUME)]
ResumeQuery = Annotated[str | None, Query(description=f"{RESUME} Last-Event-ID, when sent, wins.")]


def _public(event: dict[str, Any]) -> dict[str, Any]:
    return {k: event.get(k) for k in ("id", "device_id", "event", "title", "text", "data", "ts")}


@router.get("/me/events")
async def list_events(who: Person, store: StoreDep, after: Cursor = 0, limit: int = 200) -> DeviceEventList:
    return page(DeviceEventList, (_public(e) for e in await repo.list_events(store, who.person_id, after,
                                                                              max(1, min(limit, 200)))))


@router.get("/me/events/stream", response_class=EventStream)
async def stream_events(who: Person, store: StoreDep, last_event_id: ResumeHeader = None,
                        after: ResumeQuery = None) -> StreamingResponse:
    """Server-sent `device_event` events for the signed-in person only. Last-Event-ID (or
    ?after=) replays what was kept since; otherwise it starts from now. One that is not a plain
    number (ASCII digits, at most 2^31 - 1) is ignored, as a missing one is."""
    resume = ascii_int(last_event_id or after)
    if resume is not None:
        since = resume
        backlog = await repo.list_events(store, who.person_id, since)
    else:
        latest = await repo.list_events(store, who.person_id, 0, 1)
        since, backlog = (latest[-1]["id"] if latest else 0), []
    bus = event_bus()

    async def stream():
        nonlocal since
        yield ": connected\n\n"
        for event in backlog:
            since = max(since, event["id"])
            yield f"id: {event['id']}\nevent: device_event\ndata: {json.dumps(_public(event))}\n\n"
        while True:
            events = await bus.take.remote(who.person_id, since, KEEPALIVE_SECONDS)
            if not events:
                yield ": keepalive\n\n"
            for event in events:
                since = max(since, event["id"])
                yield f"id: {event['id']}\nevent: device_event\ndata: {json.dumps(_public(event))}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
