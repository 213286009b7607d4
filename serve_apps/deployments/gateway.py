"""Gateway: the FastAPI ingress deployment. Stateless: it authenticates, validates and relays
to the owning actors, and streams their events to the client as SSE.

No `from __future__ import annotations` here: Serve rewrites the route signatures and FastAPI
must see real types, not strings, to tell bodies and requests from query parameters.
"""


import logging
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from fastapi import File, Request, UploadFile
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from ray import serve
from ray.exceptions import RayActorError
from starlette.routing import Route

from actors.errors import error_log, report
from actors.logmask import install_log_masking
from actors.session.actor import SessionConfig, SessionNotFound, live_sessions_async, session_actor
from actors.session.events import TurnEvent
from actors.store.models import HEALTH_CHANNEL, new_id
from actors.store.store import Store
from actors.common.ssrf import FetchError, SsrfError, link_preview, safe_fetch
from serve_apps.http.agent_mcp import AgentMcpApp
from serve_apps.http.errors import ApiError, app
from serve_apps.http.auth import COOKIE_NAME, key_matches, presented_key
from actors.camera.actor import CameraConfig
from actors.devices.people import OWNER_ID
from actors.devices.privacy import event_for_reader, for_reader
from actors.devices.repository import conversation_person
from serve_apps.sockets.camera import router as camera_router
from serve_apps.routes.memory import router as memory_router
from serve_apps.sockets.devices import router as device_socket_router
from serve_apps.routes.devices import router as devices_router
from serve_apps.routes.events import router as events_router
from serve_apps.routes.people import router as people_router

log = logging.getLogger(__name__)

app.include_router(memory_router)
app.include_router(camera_router)
app.include_router(people_router)
app.include_router(devices_router)
app.include_router(device_socket_router)
app.include_router(events_router)

SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Handles are cheap, but a long-running gateway should not remember every conversation ever.
HANDLE_CACHE = 1024
MAX_MESSAGE_CHARS = 100_000


class GatewayConfig(BaseModel):
    owner_key_hashes: list[str]
    database_url: str
    web_dir: str
    session: SessionConfig
    camera: CameraConfig
    max_upload_bytes: int = 50 * 1024 * 1024
    # Host header values accepted at /mcp (DNS-rebinding guard).
    hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1:8000", "localhost:8000"])


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


class CancelRequest(BaseModel):
    heard: str | None = Field(default=None, max_length=10_000)
    heard_index: int | None = Field(default=None, ge=-1)


class ConfirmationAnswer(BaseModel):
    approve: bool
    pin: str | None = Field(default=None, max_length=32)


def byte_range_response(data: bytes, mime: str, name: str, range_header: str | None) -> Response:
    """Serve bytes whole (200) or one `bytes=` range (206); an unsatisfiable range is 416."""
    headers = {"Accept-Ranges": "bytes", "Content-Disposition": f'inline; filename="{name}"'}
    size = len(data)
    if not range_header:
        return Response(data, media_type=mime, headers=headers)
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", range_header)
    if not match or match.groups() == ("", ""):
        return Response(status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"})
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    if start >= size or start > end:
        return Response(status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"})
    headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    return Response(data[start:end + 1], status_code=206, media_type=mime, headers=headers)


@serve.deployment(
    ray_actor_options={"num_cpus": 0},
    max_ongoing_requests=200,
    max_queued_requests=500,
)
@serve.ingress(app)
class Gateway:
    def __init__(self, agent: Any, config: GatewayConfig, perception: Any = None) -> None:
        install_log_masking()
        self.agent = agent
        self.perception = perception
        self.config = config
        self.hashes = frozenset(config.owner_key_hashes)
        self.store = Store.open(config.database_url)
        self.web_dir = Path(config.web_dir)
        # Route modules (APIRouter, one resource each) find this replica through app.state.
        app.state.gateway = self
        self._sessions: OrderedDict[str, Any] = OrderedDict()
        app.mount("/static", StaticFiles(directory=self.web_dir), name="static")
        self.mcp = AgentMcpApp(self._mcp_chat, lambda key: key_matches(key, self.hashes), config.hosts)
        # A Route (not a Mount) so /mcp itself answers, without a redirect to /mcp/.
        app.router.routes.append(Route("/mcp", endpoint=self.mcp, name="mcp"))

    async def _mcp_chat(self, message: str, session_id: str | None) -> dict[str, Any]:
        """One unattended turn for an MCP caller: no confirmations, the whole reply at once."""
        sid = session_id or new_id()
        try:
            handle = await self._session(sid, create=session_id is None)
        except ApiError as exc:
            return {"session_id": sid, "error": exc.message}
        reply: dict[str, Any] = {"session_id": sid}
        async for ref in handle.chat.options(num_returns="streaming").remote(message, attended=False):
            event = await ref
            if event["type"] == "done":
                reply["reply"] = event["data"]["text"]
            elif event["type"] == "error":
                reply["error"] = event["data"]["message"]
        return reply

    # -- helpers --------------------------------------------------------------------------

    def owner(self, request: Request) -> None:
        key = presented_key(request)
        if key and key.startswith("irad_") and not key_matches(key, self.hashes):
            # A device token talks to the agent only through /v1/ask*; nothing signed-in.
            raise ApiError(403, "forbidden", "A device token cannot use this route.")
        if not key_matches(key, self.hashes):
            raise ApiError(401, "unauthorized", "Send the owner key as 'Authorization: Bearer <key>'.")

    async def _session(self, session_id: str, create: bool, health_check: bool = False) -> Any:
        """The live actor for a conversation, started (and rebuilt from the store) on demand.
        With `health_check`, the conversation must be (or become) a health-check session."""
        if not create and session_id not in self._sessions:
            if await self.store.get_conversation(session_id) is None:
                raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        for attempt in range(2):
            handle = self._sessions.get(session_id)
            if handle is None:
                handle = session_actor(session_id, self.config.session, self.agent)
                self._sessions[session_id] = handle
                while len(self._sessions) > HANDLE_CACHE:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(session_id)
            try:
                # `open` is cheap once loaded, and it is how we learn a cached actor has exited.
                channel = await handle.open.remote(create, HEALTH_CHANNEL if health_check else "chat")
                if not channel:
                    raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
                if health_check and channel != HEALTH_CHANNEL:
                    raise ApiError(422, "invalid_request",
                                   f"Session {session_id!r} is a conversation, not a health check; "
                                   "leave out session_id to start a health-check session.")
                return handle
            except RayActorError:
                # It exited while idle (or crashed) since we cached it: start a fresh one.
                self._sessions.pop(session_id, None)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    # -- routes ---------------------------------------------------------------------------

    @app.get("/healthz")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/", include_in_schema=False)
    async def index(self) -> FileResponse:
        return FileResponse(self.web_dir / "index.html", headers={"Cache-Control": "no-cache"})

    @app.post("/v1/auth/cookie", status_code=204)
    async def set_cookie(self, request: Request) -> Response:
        key = presented_key(request)
        if not key_matches(key, self.hashes):
            raise ApiError(401, "unauthorized", "That key was not accepted.")
        response = Response(status_code=204)
        response.set_cookie(COOKIE_NAME, key or "", httponly=True, samesite="strict",
                            max_age=30 * 24 * 3600, path="/", secure=request.url.scheme == "https")
        return response

    @app.post("/v1/auth/logout", status_code=204)
    async def logout(self) -> Response:
        response = Response(status_code=204)
        response.delete_cookie(COOKIE_NAME, path="/")
        return response

    @app.get("/v1/auth/check")
    async def auth_check(self, request: Request) -> dict[str, bool]:
        self.owner(request)
        return {"ok": True}

    @app.post("/v1/chat")
    async def chat(self, body: ChatRequest, request: Request) -> StreamingResponse:
        self.owner(request)
        session_id = body.session_id or new_id()
        handle = await self._session(session_id, create=body.session_id is None, health_check=body.health_check)
        events = handle.chat.options(num_returns="streaming").remote(
            body.message, background=body.background, attended=body.confirmations)
        return self._sse(handle, session_id, events)

    @app.get("/v1/sessions/{session_id}/stream")
    async def resume(self, session_id: str, request: Request) -> StreamingResponse:
        """Follow the running turn again from its start (a reopened client)."""
        self.owner(request)
        self._check_id(session_id)
        handle = await self._session(session_id, create=False)
        return self._sse(handle, session_id, handle.follow.options(num_returns="streaming").remote(),
                         await self._reader_is_person(session_id))

    def _sse(self, handle: Any, session_id: str, events: Any, reader_is_person: bool = True) -> StreamingResponse:
        async def stream():
            turn_id = None
            finished = False
            try:
                async for ref in events:
                    event = await ref
                    if event["type"] == "turn":
                        turn_id = event["data"]["turn_id"]
                        yield TurnEvent(type="session", data={"session_id": session_id, "turn_id": turn_id}).sse()
                        continue
                    finished = event["type"] in ("done", "error")
                    yield TurnEvent(**event_for_reader(event, reader_is_person)).sse()
            except (RayActorError, SessionNotFound) as exc:
                report("gateway.chat", exc, path="/v1/chat", request={"session": session_id})
                self._sessions.pop(session_id, None)
                finished = True
                yield TurnEvent(type="error", data={
                    "code": "session_unavailable",
                    "message": "The conversation stopped unexpectedly; what was said so far is saved. "
                               "Please send your message again.",
                }).sse()
            finally:
                if turn_id and not finished:
                    # The client left mid-turn: the actor decides (background goes on, else stop).
                    handle.client_left.remote(turn_id)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.get("/v1/sessions")
    async def list_sessions(self, request: Request) -> dict[str, Any]:
        self.owner(request)
        data = [c.model_dump(exclude={"summary_upto"}) for c in await self.store.list_conversations()]
        return {"data": data, "count": len(data)}

    @app.get("/v1/sessions/{session_id}/messages")
    async def messages(self, session_id: str, request: Request) -> dict[str, Any]:
        self.owner(request)
        self._check_id(session_id)
        return await self.stored_messages(session_id, await self._reader_is_person(session_id))

    async def stored_messages(self, session_id: str, reader_is_person: bool) -> dict[str, Any]:
        """A conversation's messages as the API returns them, shaped for who is reading."""
        handle = await self._session(session_id, create=False)
        data = [for_reader({k: m[k] for k in ("id", "seq", "role", "content", "meta", "created")}, reader_is_person)
                for m in await handle.messages.remote()]
        return {"session_id": session_id, "data": data, "count": len(data)}

    async def _reader_is_person(self, session_id: str) -> bool:
        """Owner routes read as the owner: is this conversation the owner's own?"""
        person, _device = await conversation_person(self.store, session_id)
        return person == OWNER_ID

    @app.get("/v1/sessions/{session_id}/state")
    async def session_state(self, session_id: str, request: Request) -> dict[str, Any]:
        self.owner(request)
        self._check_id(session_id)
        handle = await self._session(session_id, create=False)
        return await handle.state.remote()

    @app.post("/v1/sessions/{session_id}/cancel")
    async def cancel(self, session_id: str, request: Request, body: CancelRequest | None = None) -> dict[str, Any]:
        """Barge-in: stop the turn; history keeps only what the owner says they heard."""
        self.owner(request)
        self._check_id(session_id)
        handle = await self._session(session_id, create=False)
        body = body or CancelRequest()
        cancelled = await handle.cancel.remote(body.heard, body.heard_index)
        return {"session_id": session_id, "cancelled": cancelled}

    @app.post("/v1/confirmations/{confirmation_id}")
    async def confirm(self, confirmation_id: str, body: ConfirmationAnswer, request: Request) -> dict[str, Any]:
        self.owner(request)
        return await self.answer_confirmation(confirmation_id, body.approve, body.pin)

    @staticmethod
    def confirmation_session(confirmation_id: str) -> str:
        """The conversation a confirmation id belongs to (ids are "<session>.<random>")."""
        session_id = confirmation_id.rsplit(".", 1)[0]
        if "." not in confirmation_id or not SESSION_ID.match(session_id):
            raise ApiError(404, "not_found", "No pending confirmation with that id.")
        return session_id

    async def answer_confirmation(self, confirmation_id: str, approve: bool, pin: str | None) -> dict[str, Any]:
        """Yes or no to a pending confirmation; the session actor's refusals become API errors."""
        handle = await self._session(self.confirmation_session(confirmation_id), create=False)
        answer = await handle.answer_confirmation.remote(confirmation_id, approve, pin)
        if "error" in answer:
            status = {"not_found": 404, "pin_required": 422, "wrong_pin": 403, "pin_not_set": 409}[answer["error"]]
            raise ApiError(status, answer["error"], answer["message"])
        return answer

    @app.delete("/v1/messages/{message_id}")
    async def delete_message(self, message_id: str, request: Request) -> dict[str, Any]:
        """Delete for good: from storage and from the live conversation the model sees."""
        self.owner(request)
        session_id = await self.store.message_conversation(message_id)
        if session_id is None:
            session_id = await self._live_session_holding(message_id)
        if session_id is None:
            raise ApiError(404, "not_found", "No message with that id.")
        handle = await self._session(session_id, create=False)
        if not await handle.delete_message.remote(message_id):
            # Stored but older than what the actor keeps in memory: delete it in the store alone.
            await self.store.write_batch([], [], deleted_ids=[message_id])
        return {"id": message_id, "deleted": True}

    async def _live_session_holding(self, message_id: str) -> str | None:
        """A message not flushed yet lives only in its session actor: ask the live ones."""
        for session_id, actor in (await live_sessions_async()).items():
            try:
                if await actor.has_message.remote(message_id):
                    return session_id
            except RayActorError:
                continue
        return None

    async def flush_live_sessions(self) -> None:
        """Write every live session's buffer, so an export sees what was said a moment ago."""
        for actor in (await live_sessions_async()).values():
            try:
                await actor.flush.remote()
            except RayActorError:
                continue

    @app.get("/v1/audit")
    async def audit(self, request: Request, limit: int = 100) -> dict[str, Any]:
        self.owner(request)
        data = [e.model_dump() for e in await self.store.list_audit(max(1, min(limit, 1000)))]
        return {"data": data, "count": len(data)}

    @app.get("/v1/outbox")
    async def outbox(self, request: Request, status: str | None = None) -> dict[str, Any]:
        self.owner(request)
        data = [i.model_dump() for i in await self.store.list_outbox(status)]
        return {"data": data, "count": len(data)}

    @app.post("/v1/files", status_code=201)
    async def upload(self, request: Request, file: UploadFile = File(...)) -> dict[str, Any]:
        self.owner(request)
        limit = self.config.max_upload_bytes
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise ApiError(413, "file_too_large", f"Files are limited to {limit} bytes.")
        if not data:
            raise ApiError(422, "invalid_request", "file: the file is empty")
        name = (file.filename or "upload").rsplit("/", 1)[-1][:200]
        record = await self.store.add_file(name, file.content_type or "application/octet-stream", data)
        return {"id": record.id, "name": record.name, "mime": record.mime, "size": record.size,
                "attachment": f"[attachment file:{record.id} {record.name}]"}

    @app.get("/v1/files/{file_id}")
    async def download(self, file_id: int, request: Request) -> Response:
        self.owner(request)
        found = await self.store.get_file(file_id)
        if found is None:
            raise ApiError(404, "not_found", "No file with that id.")
        meta, data = found
        return byte_range_response(data, meta.mime, meta.name, request.headers.get("range"))

    @app.get("/v1/errors")
    async def errors(self, request: Request, limit: int = 50) -> dict[str, Any]:
        self.owner(request)
        entries = await error_log().recent.remote(max(1, min(limit, 200)))
        data = [e.model_dump() for e in entries]
        return {"data": data, "count": len(data)}

    @app.get("/v1/providers")
    async def providers(self, request: Request) -> dict[str, Any]:
        self.owner(request)
        data = await self.agent.providers_status.remote()
        return {"data": data, "count": len(data)}

    @app.get("/v1/tools")
    async def tools(self, request: Request) -> dict[str, Any]:
        """Every tool server: on, off (with the missing variable), down (restarting)."""
        self.owner(request)
        data = await self.agent.tools_status.remote()
        return {"data": data, "count": len(data)}

    @app.get("/v1/preview")
    async def preview(self, url: str, request: Request) -> dict[str, Any]:
        """A link preview fetched server-side through the SSRF guard (re-checked per redirect)."""
        self.owner(request)
        try:
            fetched = await safe_fetch(url, max_bytes=512_000, timeout=10)
        except SsrfError as exc:
            raise ApiError(422, "url_refused", f"That address is not allowed: {exc}") from None
        except FetchError as exc:
            raise ApiError(502, "fetch_failed", f"The page could not be fetched: {exc}") from None
        html = fetched.text or ""
        return {"url": url, "final_url": fetched.final_url, "status": fetched.status,
                **link_preview(html, fetched.final_url)}

    @staticmethod
    def _check_id(session_id: str) -> None:
        if not SESSION_ID.match(session_id):
            raise ApiError(404, "session_not_found", "No such session.")


