"""Memory routes: the owner's view of what the agent remembers and how it learns.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import json

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from actors.memory import repository as memory
from actors.memory.exchanges import iter_exchanges
from actors.memory.model import Kind
from serve_apps.http.deps import GatewayDep, Owner, StoreDep
from serve_apps.http.errors import ApiError
from serve_apps.http.models import (
    Deleted,
    MemoryAdded,
    MemoryEventList,
    MemoryList,
    MemoryPublic,
    PersonaPublic,
    PersonaWritten,
    page,
)

router = APIRouter()


class MemoryCreate(BaseModel):
    kind: Kind = "fact"
    text: str = Field(min_length=1, max_length=2000)
    importance: float = Field(default=5.0, ge=1, le=10)


class PersonaRequest(BaseModel):
    revise: bool = False


@router.get("/v1/memory")
async def memory_list(_owner: Owner, store: StoreDep, kind: str | None = None, active: bool | None = None,
                      search: str | None = None, limit: int = 200) -> MemoryList:
    return page(MemoryList, await memory.list_items(store, kind, active, search, max(1, min(limit, 2000))))


@router.post("/v1/memory", status_code=201)
async def memory_add(body: MemoryCreate, _owner: Owner, store: StoreDep) -> MemoryAdded:
    """Tell the agent something to remember; a near-duplicate reinforces the existing item."""
    try:
        item, created = await memory.remember(store, body.kind, body.text, body.importance)
    except memory.MemoryRefused as exc:
        raise ApiError(422, "secret_refused", str(exc)) from None
    # `created` here says whether the item is new (it replaces the timestamp, as it always has).
    return MemoryAdded.model_validate({**item.model_dump(), "created": created})


@router.get("/v1/memory/events")
async def memory_events(_owner: Owner, store: StoreDep, event: str | None = None, limit: int = 200) -> MemoryEventList:
    """What memory did: inserts, reinforcements, updates, retirements, selections, reflections."""
    return page(MemoryEventList, await memory.list_events(store, event, max(1, min(limit, 2000))))


@router.get("/v1/memory/persona")
async def persona_get(_owner: Owner, store: StoreDep) -> PersonaPublic:
    record = await store.get_kv(memory.PERSONA_KV)
    if not record:
        raise ApiError(404, "not_found", "No persona yet: it is written once memory knows a few things "
                                         "about you, or POST /v1/memory/persona to write one now.")
    return PersonaPublic.model_validate(record)


@router.post("/v1/memory/persona")
async def persona_write(_owner: Owner, gw: GatewayDep, body: PersonaRequest | None = None) -> PersonaWritten:
    """Write the persona now (or revise it slightly with {"revise": true})."""
    result = await gw.agent.author_persona.remote(bool(body and body.revise))
    if result == "no_model":
        raise ApiError(409, "no_model", "No model is configured, so the persona cannot be written; "
                                        "set OPENAI_API_KEY or IRIIS_PROVIDERS and restart.")
    return PersonaWritten(result=result, persona=await gw.store.get_kv(memory.PERSONA_KV))


@router.post("/v1/memory/consolidate", response_model=None)
async def consolidate(request: Request, _owner: Owner, gw: GatewayDep) -> Response:
    """The nightly consolidation, run now. With Accept: text/event-stream the steps stream as
    `progress` events before the `report`; otherwise the report comes back as JSON."""
    # The activity histogram counts stored messages: write what live sessions still buffer.
    await gw.flush_live_sessions()
    events = gw.agent.options(stream=True).consolidate.remote()
    if "text/event-stream" in request.headers.get("accept", ""):
        async def stream():
            async for event in events:
                kind = event.pop("type")
                yield f"event: {kind}\ndata: {json.dumps(event)}\n\n"
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    report_ = {}
    async for event in events:
        if event["type"] == "report":
            report_ = {k: v for k, v in event.items() if k != "type"}
    return JSONResponse(report_)


@router.get("/v1/export/exchanges.jsonl")
async def export_exchanges(_owner: Owner, gw: GatewayDep) -> StreamingResponse:
    """Every exchange, one JSON object per line, with `corrected` set when the owner's
    next message corrected the agent."""
    await gw.flush_live_sessions()

    async def lines():
        async for row in iter_exchanges(gw.store):
            yield row.model_dump_json() + "\n"
    return StreamingResponse(lines(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": 'attachment; filename="exchanges.jsonl"'})


@router.get("/v1/memory/{item_id}")
async def memory_get(item_id: int, _owner: Owner, store: StoreDep) -> MemoryPublic:
    item = await memory.get_item(store, item_id)
    if item is None:
        raise ApiError(404, "not_found", "No memory item with that id.")
    return MemoryPublic.model_validate(item.model_dump())


@router.delete("/v1/memory/{item_id}")
async def memory_delete(item_id: int, _owner: Owner, store: StoreDep) -> Deleted:
    if not await memory.delete_item(store, item_id):
        raise ApiError(404, "not_found", "No memory item with that id.")
    return Deleted(id=item_id, deleted=True)

