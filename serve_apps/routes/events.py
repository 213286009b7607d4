"""Device events for their person: the list (seven days, 200 at most) and the live stream.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from actors.common.ids import ascii_int
from actors.devices import repository as repo
from actors.devices.bus import event_bus
from serve_apps.http.deps import Person, StoreDep
from serve_apps.http.ids import Cursor
from serve_apps.http.models import DeviceEventList, page

router = APIRouter()
KEEPALIVE_SECONDS = 15.0


def _public(event: dict[str, Any]) -> dict[str, Any]:
    return {k: event.get(k) for k in ("id", "device_id", "event", "title", "text", "data", "ts")}


@router.get("/v1/me/events")
async def list_events(who: Person, store: StoreDep, after: Cursor = 0, limit: int = 200) -> DeviceEventList:
    return page(DeviceEventList, (_public(e) for e in await repo.list_events(store, who.person_id, after,
                                                                              max(1, min(limit, 200)))))


@router.get("/v1/me/events/stream")
async def stream_events(request: Request, who: Person, store: StoreDep) -> StreamingResponse:
    """Server-sent `device_event` events for the signed-in person only. Last-Event-ID (or
    ?after=) replays what was kept since; otherwise it starts from now. One that is not a plain
    number (ASCII digits, at most 2^63 - 1) is ignored, as a missing one is."""
    resume = ascii_int(request.headers.get("last-event-id") or request.query_params.get("after"))
    if resume is not None:
        after = resume
        backlog = await repo.list_events(store, who.person_id, after)
    else:
        latest = await repo.list_events(store, who.person_id, 0, 1)
        after, backlog = (latest[-1]["id"] if latest else 0), []
    bus = event_bus()

    async def stream():
        nonlocal after
        yield ": connected\n\n"
        for event in backlog:
            after = max(after, event["id"])
            yield f"id: {event['id']}\nevent: device_event\ndata: {json.dumps(_public(event))}\n\n"
        while True:
            events = await bus.take.remote(who.person_id, after, KEEPALIVE_SECONDS)
            if not events:
                yield ": keepalive\n\n"
            for event in events:
                after = max(after, event["id"])
                yield f"id: {event['id']}\nevent: device_event\ndata: {json.dumps(_public(event))}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
