"""The camera socket: transport only. The stream's logic (the frame-ack gate, the OCR lane,
message dispatch, spoken questions) is actors/camera/stream.py; its state lives in its
CameraActor, frames go to the Perception deployment by object ref, and the actor's typed events
are drained back onto the socket as JSON. The procedures' HTTP routes are
serve_apps/routes/camera.py, included in this module's `router`.

Close codes: 4401 bad or missing key; 4400 a message that breaks the protocol; 4409 a frame
sent while another is still waiting for its frame_ack; 4404 watching a stream that is not
open; 4408 nothing received for IRIIS_CAMERA_IDLE_SECONDS; 1009 a message over four times the
frame limit; 1013 no room under the cap on live processes now (the reason says when to retry).
"""

import asyncio
import logging
from typing import Any

import ray
from fastapi import APIRouter, WebSocket
from ray.exceptions import ActorDiedError, RayActorError
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState
from ray.actor import ActorHandle

from actors.camera.actor import camera_actor, find_camera
from actors.camera.events import CameraEvent, Hello, State
from actors.camera.messages import Signal
from actors.camera.stream import StreamCore
from actors.common.errors import ErrorInfo
from actors.common.ids import ascii_int
from actors.common.placement import preferred
from actors.common.restart import through_restart
from actors.recent_errors import report
from actors.session.confirmations import ConfirmationAnswer
from actors.store.models import new_id
from serve_apps.http.auth import key_matches, presented_key
from serve_apps.http.deps import context_of
from serve_apps.http.errors import ApiError
from serve_apps.http.receive import receive_within
from serve_apps.routes.camera import router as http_router
from serve_apps.sockets.places import CLOSE_TRY_LATER, NoRoom, place

log = logging.getLogger(__name__)
router = APIRouter()
# The procedures' routes join this router as routes of its own (not a nested router), so the
# gateway, which includes only this module's `router`, serves them exactly as before.
router.routes.extend(http_router.routes)

CLOSE_UNAUTHORIZED = 4401
CLOSE_PROTOCOL = 4400
CLOSE_NO_ACK = 4409
CLOSE_NO_STREAM = 4404
CLOSE_IDLE = 4408
CLOSE_TOO_BIG = 1009
HARD_LIMIT_FACTOR = 4


class Sender:
    """Typed events onto one socket, one at a time, while it is open."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.lock = asyncio.Lock()

    async def __call__(self, event: CameraEvent) -> None:
        async with self.lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.send_json(event.wire())


class RemoteCamera:
    """The CameraPort over the stream's CameraActor handle. The actor restarts in place when
    killed: a call that met the death is made once more, after `start` (which restores the
    stream's settings from the store)."""

    def __init__(self, handle: ActorHandle) -> None:
        self.handle = handle

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args)
        except ActorDiedError:
            raise
        except RayActorError:
            # Restarting in place: once it is back (settings restored), the call is made again.
            await through_restart(lambda: self.handle.start.remote())
            return await through_restart(lambda: getattr(self.handle, method).remote(*args))

    async def start(self) -> dict[str, Any]:
        return await self._call("start")

    async def ask(self, question: str) -> Any:
        return await self._call("ask", question)

    async def set_goal(self, goal: str) -> None:
        await self._call("set_goal", goal)

    async def set_procedure(self, procedure_id: int | None) -> State | ErrorInfo:
        return await self._call("set_procedure", procedure_id)

    async def set_coach(self, on: bool, interval: float | None) -> None:
        await self._call("set_coach", on, interval)

    async def review(self, seconds: float, question: str, file_id: int | None) -> int:
        return await self._call("review", seconds, question, file_id)

    async def confirm(self, confirmation_id: str, approve: bool, pin: str | None) -> ConfirmationAnswer | ErrorInfo:
        return await self._call("confirm", confirmation_id, approve, pin)

    async def signal(self, sender: str, message: dict[str, Any]) -> bool:
        return await self._call("signal", sender, message)

    async def observe(self, perception: dict[str, Any], frame: Any) -> dict[str, Any]:
        return await self._call("observe", perception, [frame])  # in a list: passed as a ref

    async def observe_text(self, text: str) -> None:
        await self._call("observe_text", text)


class RemotePerception:
    """The PerceptionPort over the Perception deployment: frames go by object ref."""

    def __init__(self, handle: ActorHandle) -> None:
        self.handle = handle

    def put(self, data: bytes) -> Any:
        return ray.put(data)

    async def perceive(self, frame: Any, index: int, **options: Any) -> dict[str, Any]:
        return await self.handle.perceive.remote([frame], index, **options)


async def _forward(handle: ActorHandle, listener: str, send: Sender) -> None:
    """The actor's events onto the socket. The owner's stream follows an actor restarted in
    place (subscribing again after `start`); a viewer's ends with it."""
    while True:
        try:
            async for ref in handle.events.options(num_returns="streaming").remote(listener):
                await send(await ref)
            return
        except ActorDiedError:
            return
        except RayActorError:
            if listener != "owner":
                return
            log.warning("camera actor restarted; following its events again")
            await through_restart(lambda: handle.start.remote())




@router.websocket("/camera/ws")
async def camera_socket(ws: WebSocket) -> None:
    await ws.accept()
    gw = context_of(ws)
    if not key_matches(presented_key(ws), gw.hashes):
        await ws.close(CLOSE_UNAUTHORIZED, "send the owner key as ?token= or a Bearer header")
        return
    watch = ws.query_params.get("watch")
    if watch:
        await _viewer(ws, gw, watch)
        return
    stream_id = new_id()
    try:
        async with place(gw, f"camera:{stream_id}"):
            await _stream(ws, gw, stream_id)
    except NoRoom as full:
        await ws.close(CLOSE_TRY_LATER, full.reason)


async def _stream(ws: WebSocket, gw: Any, stream_id: str) -> None:
    """The owner's stream, its place under the cap held."""
    send = Sender(ws)
    session_id = new_id()
    handle: ActorHandle | None = None
    core: StreamCore | None = None
    try:
        try:
            session = await gw.conversations.open(session_id, create=True)
        except ApiError as exc:
            if exc.status != 503:
                raise
            retry = (exc.headers or {}).get("Retry-After", "a few")
            await ws.close(CLOSE_TRY_LATER, f"server full: every conversation is busy; retry in {retry} s")
            return
        handle = camera_actor(stream_id, gw.config.camera.model_copy(), session,
                              await preferred(gw.config.session.prefer_resource), session_id)
        camera = RemoteCamera(handle)
        limit = gw.config.camera.max_frame_bytes
        core = StreamCore(camera, RemotePerception(gw.perception), send, limit=limit,
                          frame_config=await camera.start())
        core.spawn(_forward(handle, "owner", send))
        await send(Hello(stream_id=stream_id, session_id=session_id, max_frame_bytes=limit,
                         ocr_every=core.frame_config["ocr_every"], vision_model=bool(gw.config.camera.vision)))
        procedure = ascii_int(ws.query_params.get("procedure"))
        if procedure:
            await core.on_text(f'{{"type": "procedure", "id": {procedure}}}')
        await _serve(ws, core, limit, gw.config.camera.idle_seconds)
    except WebSocketDisconnect:
        pass
    except Exception as exc:  # noqa: BLE001 - socket boundary: log, then close cleanly
        log.exception("camera stream failed")
        report("camera.ws", exc, path="/v1/camera/ws")
        if ws.application_state == WebSocketState.CONNECTED:
            await ws.close(1011, "server error; it was logged")
    finally:
        if core is not None:
            core.close()
        if handle is not None:
            try:
                await handle.close.remote()
            except Exception:  # noqa: BLE001 - it may already be gone
                pass
            ray.kill(handle, no_restart=True)


async def _serve(ws: WebSocket, core: StreamCore, limit: int, idle: float) -> None:
    hard_limit = limit * HARD_LIMIT_FACTOR
    while True:
        message = await receive_within(ws, idle)
        if message is None:
            await ws.close(CLOSE_IDLE, f"nothing received for {idle:.0f} s")
            return
        if message["type"] == "websocket.disconnect":
            return
        data, text = message.get("bytes"), message.get("text")
        if data is not None:
            if len(data) > hard_limit:
                await ws.close(CLOSE_TOO_BIG, f"message over {hard_limit} bytes")
                return
            if not core.on_frame(data):
                await ws.close(CLOSE_NO_ACK, "send the next frame only after its frame_ack")
                return
        elif text is not None:
            # Text is bounded like frames (a spoken question is base64 audio); each message's
            # fields carry their own limits.
            if len(text) > hard_limit:
                await ws.close(CLOSE_TOO_BIG, f"message over {hard_limit} bytes")
                return
            if not await core.on_text(text):
                await ws.close(CLOSE_PROTOCOL, "that message breaks the camera protocol")
                return


async def _viewer(ws: WebSocket, gw: Any, stream_id: str) -> None:
    """A watch-only viewer: WebRTC signalling relayed through the stream's actor."""
    handle = await find_camera(stream_id)
    if handle is None:
        await ws.close(CLOSE_NO_STREAM, "no open camera stream with that id")
        return
    viewer = await handle.add_viewer.remote()
    send = Sender(ws)
    forwarding = asyncio.get_running_loop().create_task(_forward(handle, viewer, send))
    await send(Hello(stream_id=stream_id, viewer=viewer))
    try:
        while True:
            message = await receive_within(ws, gw.config.camera.idle_seconds)
            if message is None or message["type"] == "websocket.disconnect":
                return
            try:
                signal = Signal.model_validate_json(message.get("text") or "")
            except ValidationError:
                await ws.close(CLOSE_PROTOCOL, "viewers send only webrtc signalling messages")
                return
            await handle.signal.remote(viewer, signal.model_dump())
    finally:
        forwarding.cancel()
        try:
            await handle.remove_viewer.remote(viewer)
        except Exception:  # noqa: BLE001 - the stream may have ended first
            pass
