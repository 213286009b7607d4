"""Memory routes: the owner's view of what the agent remembers and how it learns."""

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from actors.memory import repository as memory
from actors.memory.exchanges import iter_exchanges
from actors.memory.model import Kind
from serve_apps.http.errors import ApiError, gateway_of

router = APIRouter()


class MemoryCreate(BaseModel):
    kind: Kind = "fact"
    text: str = Field(min_length=1, max_length=2000)
    importance: float = Field(default=5.0, ge=1, le=10)


class PersonaRequest(BaseModel):
    revise: bool = False


def owner(request: Request) -> Any:
    gw = gateway_of(request)
    gw.owner(request)
    return gw


@router.get("/v1/memory")
async def memory_list(request: Request, kind: str | None = None, active: bool | None = None,
                      search: str | None = None, limit: int = 200) -> dict[str, Any]:
    gw = owner(request)
    items = await memory.list_items(gw.store, kind, active, search, max(1, min(limit, 2000)))
    data = [i.model_dump() for i in items]
    return {"data": data, "count": len(data)}


@router.post("/v1/memory", status_code=201)
async def memory_add(body: MemoryCreate, request: Request) -> dict[str, Any]:
    """Tell the agent something to remember; a near-duplicate reinforces the existing item."""
    gw = owner(request)
    try:
        item, created = await memory.remember(gw.store, body.kind, body.text, body.importance)
    except memory.MemoryRefused as exc:
        raise ApiError(422, "secret_refused", str(exc)) from None
    return {**item.model_dump(), "created": created}


@router.get("/v1/memory/events")
async def memory_events(request: Request, event: str | None = None, limit: int = 200) -> dict[str, Any]:
    """What memory did: inserts, reinforcements, updates, retirements, selections, reflections."""
    gw = owner(request)
    data = await memory.list_events(gw.store, event, max(1, min(limit, 2000)))
    return {"data": data, "count": len(data)}


@router.get("/v1/memory/persona")
async def persona_get(request: Request) -> dict[str, Any]:
    gw = owner(request)
    record = await gw.store.get_kv(memory.PERSONA_KV)
    if not record:
        raise ApiError(404, "not_found", "No persona yet: it is written once memory knows a few things "
                                         "about you, or POST /v1/memory/persona to write one now.")
    return record


@router.post("/v1/memory/persona")
async def persona_write(request: Request, body: PersonaRequest | None = None) -> dict[str, Any]:
    """Write the persona now (or revise it slightly with {"revise": true})."""
    gw = owner(request)
    result = await gw.agent.author_persona.remote(bool(body and body.revise))
    if result == "no_model":
        raise ApiError(409, "no_model", "No model is configured, so the persona cannot be written; "
                                        "set OPENAI_API_KEY or IRIIS_PROVIDERS and restart.")
    return {"result": result, "persona": await gw.store.get_kv(memory.PERSONA_KV)}


@router.post("/v1/memory/consolidate")
async def consolidate(request: Request) -> Response:
    """The nightly consolidation, run now. With Accept: text/event-stream the steps stream as
    `progress` events before the `report`; otherwise the report comes back as JSON."""
    gw = owner(request)
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
async def export_exchanges(request: Request) -> StreamingResponse:
    """Every exchange, one JSON object per line, with `corrected` set when the owner's
    next message corrected the agent."""
    gw = owner(request)
    await gw.flush_live_sessions()

    async def lines():
        async for row in iter_exchanges(gw.store):
            yield row.model_dump_json() + "\n"
    return StreamingResponse(lines(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": 'attachment; filename="exchanges.jsonl"'})


@router.get("/v1/memory/{item_id}")
async def memory_get(item_id: int, request: Request) -> dict[str, Any]:
    gw = owner(request)
    item = await memory.get_item(gw.store, item_id)
    if item is None:
        raise ApiError(404, "not_found", "No memory item with that id.")
    return item.model_dump()


@router.delete("/v1/memory/{item_id}")
async def memory_delete(item_id: int, request: Request) -> dict[str, Any]:
    gw = owner(request)
    if not await memory.delete_item(gw.store, item_id):
        raise ApiError(404, "not_found", "No memory item with that id.")
    return {"id": item_id, "deleted": True}

