"""Calls (spec section 11): make one, list them, and answer, decline or cancel.

A call due now rings at once (the scheduler's watcher is woken); answering returns what the
client needs to open the voice session: the prepared opening line, or the `[call answered]
<reason>` turn so the agent speaks first. Answering a call that already stopped ringing is a
call-back (mode `callback`), never an error. Answer, decline and cancel dismiss the ntfy alert
by its sequence id (the call id).

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import time
from datetime import datetime
from typing import Any

import httpx
from fastapi import APIRouter
from ray.actor import ActorHandle

from actors.common.names import SCHEDULER, find_actor_async
from actors.notify import call_store
from actors.notify.calls import Action, CallConflict
from actors.notify.notifier import Notifier
from actors.notify.watcher import act
from actors.scheduler import tasks
from serve_apps.http.deps import Owner, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.ids import RowId
from serve_apps.http.models import page
from serve_apps.http.notify_models import CallAnswer, CallCreate, CallList, CallPublic, call_public, route_config

router = APIRouter()


def _at(value: float | datetime | str | None, now: float) -> float:
    if value is None:
        return now
    if isinstance(value, float | int):
        return float(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=tasks.owner_timezone())
        return value.timestamp()
    if value.strip().lower() == "now":
        return now
    try:
        return tasks.parse_when(value, now, tasks.owner_timezone())
    except ValueError as exc:
        raise ApiError(422, "invalid_request", f"at: {exc}") from None


@router.post("/calls", status_code=201)
async def call_create(body: CallCreate, _owner: Owner, store: StoreDep) -> CallPublic:
    now = time.time()
    at = _at(body.at, now)
    if body.repeat:
        try:
            tasks.parse_repeat(body.repeat)
        except tasks.InvalidRepeat as exc:
            raise ApiError(422, "invalid_request", f"repeat: {exc}") from None
    call = await call_store.create_call(store, at, body.reason.strip(), now, opening=(body.opening or "").strip(),
                                        repeat=body.repeat, source="user")
    handle: ActorHandle = await find_actor_async(SCHEDULER)
    if handle is not None:
        # Not awaited: the row is durable; the watcher's next tick would find it anyway.
        handle.wake_calls.remote()
    return call_public(call, route_config().call_url(call.id))


@router.get("/calls")
async def call_list(_owner: Owner, store: StoreDep, status: str | None = None, limit: int = 100) -> CallList:
    config = route_config()
    found = await call_store.list_calls(store, status=status, limit=max(1, min(limit, 1000)))
    return page(CallList, [call_public(c, config.call_url(c.id)) for c in found])


@router.get("/calls/{call_id}")
async def call_get(call_id: RowId, _owner: Owner, store: StoreDep) -> CallPublic:
    call = await call_store.get_call(store, call_id)
    if call is None:
        raise ApiError(404, "not_found", f"No call {call_id}.")
    return call_public(call, route_config().call_url(call.id))


async def _act(store: Any, call_id: int, action: Action) -> CallAnswer:
    config = route_config()
    async with httpx.AsyncClient(timeout=config.timeout) as http:
        try:
            done = await act(store, Notifier(store, config, http=http), call_id, action, time.time())
        except CallConflict as exc:
            raise ApiError(409, "call_conflict", str(exc)) from None
    if done is None:
        raise ApiError(404, "not_found", f"No call {call_id}.")
    return CallAnswer(call=call_public(done.call, config.call_url(done.call.id)), mode=done.mode,
                      conversation_id=done.conversation_id, opening=done.opening, turn=done.turn)


@router.post("/calls/{call_id}/answer", responses=error_responses(409))
async def call_answer(call_id: RowId, _owner: Owner, store: StoreDep) -> CallAnswer:
    return await _act(store, call_id, "answer")


@router.post("/calls/{call_id}/decline", responses=error_responses(409))
async def call_decline(call_id: RowId, _owner: Owner, store: StoreDep) -> CallAnswer:
    return await _act(store, call_id, "decline")


@router.post("/calls/{call_id}/cancel", responses=error_responses(409))
async def call_cancel(call_id: RowId, _owner: Owner, store: StoreDep) -> CallAnswer:
    return await _act(store, call_id, "cancel")
