"""Memory routes: the owner's view of what the agent remembers and how it learns.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import json
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from ray.exceptions import RayError

from actors.common.ids import over_cap
from actors.memory import repository as memory
from actors.memory import transfer
from actors.memory.embed import Encoder
from actors.memory.exchanges import iter_exchanges
from actors.memory.model import Kind
from serve_apps.http.deps import GatewayDep, Owner, StoreDep
from serve_apps.http.errors import ApiError, error_body, error_responses
from serve_apps.http.ids import RowId
from serve_apps.http.models import (
    Deleted,
    MemoryAdded,
    MemoryEventList,
    MemoryImported,
    MemoryList,
    MemoryPublic,
    MemorySearchList,
    PersonaPublic,
    PersonaWritten,
    page,
)
from serve_apps.http.openapi import EVENTS, JsonLines

log = logging.getLogger(__name__)
MAX_SEARCH = 100

router = APIRouter()


class MemoryCreate(BaseModel):
    kind: Kind = "fact"
    text: str = Field(min_length=1, max_length=2000)
    importance: float = Field(default=5.0, ge=1, le=10)
    # An item with its history (an import from elsewhere): seconds since 1970.
    created: float | None = None
    last_used: float | None = None


async def search_encoder(gw: GatewayDep) -> Encoder | None:
    """The cluster's shared sentence encoder (the one prompts use), or None to rank on words."""
    try:
        return await gw.encoder()
    except (RayError, RuntimeError, ValueError) as exc:
        log.warning("sentence encoder unavailable for memory search: %s", exc)
        return None


SearchEncoder = Annotated[Encoder | None, Depends(search_encoder)]


class PersonaRequest(BaseModel):
    revise: bool = False


@router.get("/memory")
async def memory_list(_owner: Owner, store: StoreDep, kind: str | None = None, active: bool | None = None,
                      search: str | None = None, limit: int = 200) -> MemoryList:
    return page(MemoryList, await memory.list_items(store, kind, active, search, max(1, min(limit, 2000))))


@router.post("/memory", status_code=201)
async def memory_add(body: MemoryCreate, _owner: Owner, store: StoreDep) -> MemoryAdded:
    """Tell the agent something to remember; a near-duplicate reinforces the existing item.
    `created` and `last_used` (optional) load an item with its age."""
    try:
        if body.created is None and body.last_used is None:
            item, created = await memory.remember(store, body.kind, body.text, body.importance)
        else:
            item, created = await memory.remember_at(store, _record(body))
    except memory.MemoryRefused as exc:
        raise ApiError(422, "secret_refused", str(exc)) from None
    # `created` here says whether the item is new (it replaces the timestamp, as it always has).
    return MemoryAdded.model_validate({**item.model_dump(), "created": created})


def _record(body: MemoryCreate) -> transfer.MemoryRecord:
    try:
        record = transfer.MemoryRecord(kind=body.kind, text=body.text, importance=body.importance,
                                       created=body.created, last_used=body.last_used)
    except ValidationError as exc:
        raise ApiError(422, "invalid", exc.errors()[0]["msg"]) from None
    if max(record.created or 0.0, record.last_used or 0.0) > time.time() + transfer.FUTURE_SLACK_S:
        raise ApiError(422, "invalid", "created and last_used cannot be in the future")
    return record


@router.get("/memory/search")
async def memory_search(_owner: Owner, store: StoreDep, encoder: SearchEncoder,
                        q: Annotated[str, Query(min_length=1, max_length=500)],
                        limit: Annotated[int, Query(ge=1, le=MAX_SEARCH)] = 20,
                        kind: Kind | None = None) -> MemorySearchList:
    """The active memories about `q`, best first, with the score the prompt gives each one and
    the terms it is made of (`why`: recency, importance, shared words, meaning)."""
    found = await memory.search(store, q, limit, kind, encoder=encoder, embeddings=encoder is not None)
    return page(MemorySearchList, [{"id": f.item.id, "kind": f.item.kind, "text": f.item.text,
                                    "importance": f.item.importance, "score": f.score,
                                    "why": f.why.model_dump()} for f in found])


@router.get("/memory/export", response_class=JsonLines)
async def memory_export(_owner: Owner, store: StoreDep) -> StreamingResponse:
    """Every memory item, active or retired, one JSON object per line with every field."""
    return StreamingResponse(memory.iter_export(store), media_type="application/x-ndjson",
                             headers={"Content-Disposition": 'attachment; filename="memory.jsonl"'})


# The body is read as it comes (to stop at the size limit), so FastAPI cannot see it: said here.
IMPORT_BODY = {"requestBody": {"required": True, "content": {"application/x-ndjson": {"schema": {
    "type": "string", "description": "Memory items, one JSON object per line (what /v1/memory/export writes)."}}}}}


@router.post("/memory/import", status_code=201, response_model=MemoryImported,
             responses=error_responses(413), openapi_extra=IMPORT_BODY)
async def memory_import(request: Request, _owner: Owner, store: StoreDep) -> MemoryImported | JSONResponse:
    """Items as JSON lines (what /v1/memory/export writes). All or nothing: one bad line and
    nothing is written; the answer lists each bad line's number. Limits: `transfer.MAX_IMPORT_BYTES`
    bytes, `transfer.MAX_IMPORT_LINES` items, texts of at most 2000 characters."""
    if over_cap(request.headers.get("content-length"), transfer.MAX_IMPORT_BYTES):
        raise ApiError(413, "too_large", f"An import is at most {transfer.MAX_IMPORT_BYTES} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > transfer.MAX_IMPORT_BYTES:
            raise ApiError(413, "too_large", f"An import is at most {transfer.MAX_IMPORT_BYTES} bytes.")
    try:
        records, errors = transfer.parse_lines(bytes(body), time.time())
    except transfer.ImportTooLarge as exc:
        raise ApiError(413, "too_large", f"Too large an import: {exc}.") from None
    if errors:
        content: dict[str, Any] = error_body("invalid_lines", f"{len(errors)} line(s) are not valid memory "
                                                              "items; nothing was imported.")
        content["error"]["lines"] = [e.model_dump() for e in errors]
        return JSONResponse(content, status_code=422)
    inserted, skipped = await memory.import_records(store, records)
    return MemoryImported(inserted=inserted, skipped=skipped)


@router.get("/memory/events")
async def memory_events(_owner: Owner, store: StoreDep, event: str | None = None, limit: int = 200) -> MemoryEventList:
    """What memory did: inserts, reinforcements, updates, retirements, selections, reflections."""
    return page(MemoryEventList, await memory.list_events(store, event, max(1, min(limit, 2000))))


@router.get("/memory/persona", responses=error_responses(404))
async def persona_get(_owner: Owner, store: StoreDep) -> PersonaPublic:
    record = await store.get_kv(memory.PERSONA_KV)
    if not record:
        raise ApiError(404, "not_found", "No persona yet: it is written once memory knows a few things "
                                         "about you, or POST /v1/memory/persona to write one now.")
    return PersonaPublic.model_validate(record)


@router.post("/memory/persona", responses=error_responses(409))
async def persona_write(_owner: Owner, gw: GatewayDep, body: PersonaRequest | None = None) -> PersonaWritten:
    """Write the persona now (or revise it slightly with {"revise": true})."""
    result = await gw.agent.author_persona.remote(bool(body and body.revise))
    if result == "no_model":
        raise ApiError(409, "no_model", "No model is configured, so the persona cannot be written; "
                                        "set OPENAI_API_KEY or IRIIS_PROVIDERS and restart.")
    return PersonaWritten(result=result, persona=await gw.store.get_kv(memory.PERSONA_KV))


CONSOLIDATED = {200: {"description": "The report as JSON; with Accept: text/event-stream, `progress` events "
                                     "then the `report` event.",
                      "content": {"application/json": {"schema": {"type": "object"}}, **EVENTS}}}


@router.post("/memory/consolidate", response_model=None, responses=CONSOLIDATED)
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


@router.get("/export/exchanges.jsonl", response_class=JsonLines)
async def export_exchanges(_owner: Owner, gw: GatewayDep) -> StreamingResponse:
    """Every exchange, one JSON object per line, with `corrected` set when the owner's
    next message corrected the agent."""
    await gw.flush_live_sessions()

    async def lines():
        async for row in iter_exchanges(gw.store):
            yield row.model_dump_json() + "\n"
    return StreamingResponse(lines(), media_type="application/x-ndjson",
                             headers={"Content-Disposition": 'attachment; filename="exchanges.jsonl"'})


@router.get("/memory/{item_id}")
async def memory_get(item_id: RowId, _owner: Owner, store: StoreDep) -> MemoryPublic:
    item = await memory.get_item(store, item_id)
    if item is None:
        raise ApiError(404, "not_found", "No memory item with that id.")
    return MemoryPublic.model_validate(item.model_dump())


@router.delete("/memory/{item_id}")
async def memory_delete(item_id: RowId, _owner: Owner, store: StoreDep) -> Deleted:
    if not await memory.delete_item(store, item_id):
        raise ApiError(404, "not_found", "No memory item with that id.")
    return Deleted(id=item_id, deleted=True)

