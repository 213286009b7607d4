"""Conversations: chat (streamed as SSE), following a running turn again, cancelling it, the
session list, a session's messages and state, renaming or deleting a conversation, and
deleting a message.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from ray.actor import ActorHandle

from actors.common.provenance import untrusted
from actors.common.trace import mark
from actors.devices.people import OWNER_ID
from actors.devices.privacy import for_reader
from actors.devices.repository import conversation_person
from actors.store.conversations import MAX_TITLE, clean_title, delete_conversation, rename_conversation
from actors.store.models import new_id
from serve_apps.http.bodies import SESSION_ID
from serve_apps.http.context import GatewayContext
from serve_apps.http.deps import GatewayDep, Owner, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.models import (
    Cancelled,
    Deleted,
    MessageDeleted,
    MessageList,
    SessionList,
    SessionRenamed,
    SessionState,
    SetAside,
    page,
)
from serve_apps.http.openapi import EventStream
from serve_apps.http.ids import SessionId

router = APIRouter()
MAX_MESSAGE_CHARS = 100_000
MESSAGE_FIELDS = ("id", "seq", "role", "content", "meta", "created")


class ChatRequest(BaseModel):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    session_id: str | None = Field(default=None, pattern=SESSION_ID.pattern)
    # The turn finishes (and a notification is queued) even if this connection drops.
    background: bool = False
    # False for callers with no way to answer a confirmation (scripts, bridges): confirm-tier
    # actions are then declined and the model is told so.
    confirmations: bool = True
    # A monitor's probe: a real turn in a health-check session, from which nothing is learned
    # and which stays out of the session list. Starts a new session, or continues one that
    # began as a health check.
    health_check: bool = False
    # What the message came from when it is not the owner typing it: `relay:<uid> from <name>`
    # (the relay watcher's wake-up), `task:<id>` (a scheduled task's run). The turn is tainted
    # from its start, so its actions need the owner's yes. Only untrusted sources are taken:
    # `owner` and `system` here are ignored.
    sources: list[Annotated[str, Field(min_length=1, max_length=160)]] = Field(default_factory=list, max_length=8)


class RenameRequest(BaseModel):
    title: str = Field(min_length=1, max_length=MAX_TITLE)


class CancelRequest(BaseModel):
    heard: str | None = Field(default=None, max_length=10_000)
    heard_index: int | None = Field(default=None, ge=-1)


async def reader_is_person(gw: GatewayContext, session_id: str) -> bool:
    """Owner routes read as the owner: is this conversation the owner's own?"""
    person, _device = await conversation_person(gw.store, session_id)
    return person == OWNER_ID


async def stored_messages(gw: GatewayContext, session_id: str, reader_is_person: bool) -> MessageList:
    """A conversation's messages as the API returns them, shaped for who is reading.
    Raises ApiError 404 `session_not_found`."""
    handle = await gw.conversations.open(session_id, create=False)
    rows: list[dict[str, Any]] = await handle.messages.remote()
    return page(MessageList, (for_reader({k: m[k] for k in MESSAGE_FIELDS}, reader_is_person) for m in rows),
                session_id=session_id)


@router.post("/chat", response_class=EventStream, responses=error_responses(404))
async def chat(body: ChatRequest, _owner: Owner, gw: GatewayDep) -> StreamingResponse:
    session_id = body.session_id or new_id()
    mark("gateway.in", session_id)
    handle = await gw.conversations.open(session_id, create=body.session_id is None, health_check=body.health_check,
                              cached=True)
    mark("gateway.session", session_id)
    sources = [str(p) for p in untrusted(body.sources)] or None

    def start(actor: ActorHandle) -> Any:
        return actor.chat.options(num_returns="streaming").remote(
            body.message, background=body.background, attended=body.confirmations, sources=sources)

    handle, events, first = await gw.conversations.begin(session_id, handle, start)
    return gw.conversations.stream(handle, session_id, events, first=first)


@router.get("/sessions/{session_id}/stream", response_class=EventStream)
async def resume(_owner: Owner, session_id: SessionId, gw: GatewayDep) -> StreamingResponse:
    """Follow the running turn again from its start (a reopened client)."""
    handle = await gw.conversations.open(session_id, create=False)
    return gw.conversations.stream(handle, session_id, handle.follow.options(num_returns="streaming").remote(),
                     await reader_is_person(gw, session_id))


@router.get("/sessions")
async def list_sessions(_owner: Owner, store: StoreDep) -> SessionList:
    return page(SessionList, (c.model_dump(exclude={"summary_upto"}) for c in await store.list_conversations()))


@router.get("/sessions/{session_id}/messages")
async def messages(_owner: Owner, session_id: SessionId, gw: GatewayDep) -> MessageList:
    return await stored_messages(gw, session_id, await reader_is_person(gw, session_id))


@router.get("/sessions/{session_id}/state")
async def session_state(_owner: Owner, session_id: SessionId, gw: GatewayDep) -> SessionState:
    handle = await gw.conversations.open(session_id, create=False)
    return SessionState.model_validate(await handle.state.remote())


@router.post("/sessions/{session_id}/cancel")
async def cancel(_owner: Owner, session_id: SessionId, gw: GatewayDep, body: CancelRequest | None = None) -> Cancelled:
    """Barge-in: stop the turn; history keeps only what the owner says they heard."""
    handle = await gw.conversations.open(session_id, create=False)
    body = body or CancelRequest()
    cancelled = await handle.cancel.remote(body.heard, body.heard_index)
    return Cancelled(session_id=session_id, cancelled=cancelled)


@router.post("/sessions/{session_id}/set-aside")
async def set_aside(_owner: Owner, session_id: SessionId, gw: GatewayDep) -> SetAside:
    """The owner sets aside the outside content this conversation has seen (a relay peer's
    words, replies written while reading files or pages, a summary folded from them): it stays
    in the history but no longer reaches the model, so later turns are not tainted by it."""
    handle = await gw.conversations.open(session_id, create=False)
    return SetAside(session_id=session_id, set_aside=await handle.set_aside_outside.remote())


@router.delete("/messages/{message_id}")
async def delete_message(message_id: str, _owner: Owner, gw: GatewayDep) -> MessageDeleted:
    """Delete for good: from storage and from the live conversation the model sees."""
    session_id = await gw.store.message_conversation(message_id)
    if session_id is None:
        session_id = await gw.live_session_holding(message_id)
    if session_id is None:
        raise ApiError(404, "not_found", "No message with that id.")
    handle = await gw.conversations.open(session_id, create=False)
    if not await handle.delete_message.remote(message_id):
        # Stored but older than what the actor keeps in memory: delete it in the store alone.
        await gw.store.write_batch([], [], deleted_ids=[message_id])
    return MessageDeleted(id=message_id, deleted=True)


async def _retired(gw: GatewayContext, session_id: str) -> None:
    """Raises ApiError 409 `turn_running` while the conversation has a turn in progress."""
    if not await gw.retire_session(session_id):
        raise ApiError(409, "turn_running", "A reply is still being written; stop it or wait, then try again.")


@router.patch("/sessions/{session_id}", responses=error_responses(409))
async def rename_session(_owner: Owner, session_id: SessionId, body: RenameRequest, gw: GatewayDep) -> SessionRenamed:
    title = clean_title(body.title)
    if not title:
        raise ApiError(422, "invalid_request", "title: give the conversation a name")
    await _retired(gw, session_id)
    if not await rename_conversation(gw.store, session_id, title):
        raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
    return SessionRenamed(id=session_id, title=title)


@router.delete("/sessions/{session_id}", responses=error_responses(409))
async def delete_session(_owner: Owner, session_id: SessionId, gw: GatewayDep) -> Deleted:
    """The conversation and its messages, for good (what memory learned from it stays)."""
    await _retired(gw, session_id)
    if not await delete_conversation(gw.store, session_id):
        raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
    return Deleted(id=session_id, deleted=True)
