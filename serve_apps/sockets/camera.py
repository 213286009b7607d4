"""The camera assistant's surface: the ack-gated camera WebSocket and the owner's procedures.

The socket ends at this gateway replica, which keeps no state of its own beyond the socket: the
stream's state lives in its CameraActor, frames go to the Perception deployment by object ref,
and the actor's events are drained back onto the socket.

Close codes: 4401 bad or missing key; 4400 a message that breaks the protocol; 4409 a frame
sent while another is still waiting for its frame_ack; 4404 watching a stream that is not
open; 4408 nothing received for IRIIS_CAMERA_IDLE_SECONDS; 1009 a message over four times the
frame limit.
"""

import asyncio
import base64
import binascii
import logging
import os
from typing import Annotated, Any, Literal

import ray
from fastapi import APIRouter, Request, WebSocket
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from actors.camera import procedures
from actors.camera.actor import camera_actor, find_camera
from actors.errors import report
from actors.providers.types import ProviderError
from actors.tools.inspect import configured_provider, transcribe
from actors.store.models import new_id
from serve_apps.http.errors import ApiError, gateway_of
from serve_apps.http.auth import key_matches, presented_key
from vision.frames import looks_like_jpeg
from vision.procedure import ProcedureCreate

log = logging.getLogger(__name__)
router = APIRouter()

CLOSE_UNAUTHORIZED = 4401
CLOSE_PROTOCOL = 4400
CLOSE_NO_ACK = 4409
CLOSE_NO_STREAM = 4404
CLOSE_IDLE = 4408
CLOSE_TOO_BIG = 1009
HARD_LIMIT_FACTOR = 4
MAX_AUDIO_B64 = 4_000_000  # about 3 MB of audio: a spoken question, not a recording


class Ask(BaseModel):
    type: Literal["ask"]
    text: str = Field(min_length=1, max_length=2000)


class Goal(BaseModel):
    type: Literal["goal"]
    text: str = Field(max_length=300)


class UseProcedure(BaseModel):
    type: Literal["procedure"]
    id: int | None = None


class Coach(BaseModel):
    type: Literal["coach"]
    on: bool
    interval: float | None = Field(default=None, ge=2, le=600)


class Review(BaseModel):
    type: Literal["review"]
    seconds: float = Field(default=90, gt=0, le=90)
    question: str = Field(default="", max_length=500)
    file_id: int | None = None


class Confirm(BaseModel):
    type: Literal["confirm"]
    id: str = Field(min_length=1, max_length=200)
    approve: bool
    pin: str | None = Field(default=None, max_length=32)


class Signal(BaseModel):
    model_config = {"extra": "allow"}
    type: Literal["webrtc"]
    to: str | None = Field(default=None, max_length=64)


class Ping(BaseModel):
    type: Literal["ping"]


class Audio(BaseModel):
    """A spoken question: base64 audio (webm, ogg, wav, mp3, m4a...), transcribed server-side."""
    type: Literal["audio"]
    data: str = Field(min_length=1, max_length=MAX_AUDIO_B64)
    mime: str = Field(default="audio/webm", max_length=60)


ClientMessage = TypeAdapter(Annotated[Ask | Goal | UseProcedure | Coach | Review | Confirm | Signal | Ping | Audio,
                                      Field(discriminator="type")])


class BadFrame:
    def __init__(self, code: str, message: str) -> None:
        self.code, self.message = code, message


def check_frame(data: bytes, limit: int) -> BadFrame | None:
    if len(data) > limit:
        return BadFrame("frame_too_large", f"The frame is {len(data)} bytes; the limit is {limit}. "
                                           "Send a smaller JPEG (640x480 at quality 80 is plenty).")
    if not looks_like_jpeg(data):
        return BadFrame("not_jpeg", "Frames must be JPEG images.")
    return None


def perception_event(frame: int, perception: dict[str, Any]) -> dict[str, Any]:
    ocr = "\n".join(line["text"] for line in perception.get("ocr_lines", [])) if perception.get("ocr_ran") else None
    return {"type": "perception", "frame": frame, "detections": perception.get("detections", []), "ocr": ocr,
            "dial": perception.get("dial"), "timings_ms": perception.get("timings_ms", {})}


class Stream:
    """One owner's camera socket at this replica."""

    def __init__(self, ws: WebSocket, gw: Any) -> None:
        self.ws, self.gw = ws, gw
        self.limit: int = gw.config.camera.max_frame_bytes
        self.lock = asyncio.Lock()
        self.pending: bytes | BadFrame | None = None
        self.worker: asyncio.Task[None] | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.frames = 0
        self.frame_config: dict[str, Any] = {}
        self.camera: Any = None
        self.reading: asyncio.Task[None] | None = None
        self.last_read = -10**9

    async def send(self, event: dict[str, Any]) -> None:
        async with self.lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.send_json(event)

    def spawn(self, work: Any) -> None:
        """Run a coroutine or await an object ref beside the read loop."""
        async def run() -> None:
            await work

        task = asyncio.get_running_loop().create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def forward(self, listener: str) -> None:
        async for ref in self.camera.events.options(num_returns="streaming").remote(listener):
            await self.send(await ref)

    async def process(self, item: bytes | BadFrame) -> None:
        """Frames one at a time; the ack goes out as work starts, so the next frame uploads
        while this one is perceived, and at most one waits."""
        current: bytes | BadFrame | None = item
        try:
            while current is not None:
                self.frames += 1
                index = self.frames
                await self.send({"type": "frame_ack", "frame": index})
                if isinstance(current, BadFrame):
                    await self.send({"type": "error", "code": current.code, "message": current.message, "frame": index})
                else:
                    await self.perceive(index, current)
                current, self.pending = self.pending, None
        finally:
            self.worker = None

    async def perceive(self, index: int, data: bytes) -> None:
        ref = ray.put(data)
        if (self.reading is None or self.reading.done()) and index - self.last_read >= self.frame_config.get("ocr_every", 3):
            # OCR takes several frames' time on a CPU: it runs beside the frame loop, one at a
            # time, on the newest frame when it is free.
            self.last_read = index
            self.reading = asyncio.get_running_loop().create_task(self.read_text(index, ref))
        result = await self.gw.perception.perceive.remote(
            [ref], index, ocr=False, instrument=self.frame_config.get("instrument"))
        if "error" in result:
            await self.send({"type": "error", "code": result["error"], "message": result["message"], "frame": index})
            return
        await self.send(perception_event(index, result))
        self.frame_config = await self.camera.observe.remote(result, [ref])

    async def read_text(self, index: int, ref: Any) -> None:
        result = await self.gw.perception.perceive.remote([ref], index, detect=False, dial=False)
        if "error" in result:
            return  # the frame loop reports a bad frame
        event = perception_event(index, result)
        await self.send({"type": "perception", "frame": index, "ocr": event["ocr"],
                         "timings_ms": event["timings_ms"]})
        await self.camera.observe_text.remote(event["ocr"] or "")

    async def on_frame(self, data: bytes) -> bool:
        """False when the client broke the ack protocol."""
        item: bytes | BadFrame = check_frame(data, self.limit) or data
        if self.worker is None:
            self.worker = asyncio.get_running_loop().create_task(self.process(item))
        elif self.pending is None:
            self.pending = item
        else:
            return False
        return True

    async def on_text(self, text: str) -> bool:
        """Dispatch one JSON message; False when it breaks the protocol."""
        try:
            message = ClientMessage.validate_json(text)
        except ValidationError as exc:
            err = exc.errors()[0]
            await self.send({"type": "error", "code": "bad_message",
                             "message": f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"})
            return False
        camera = self.camera
        if isinstance(message, Ask):
            self.spawn(camera.ask.remote(message.text))
        elif isinstance(message, Goal):
            await camera.set_goal.remote(message.text)
        elif isinstance(message, UseProcedure):
            result = await camera.set_procedure.remote(message.id)
            if "error" in result:
                await self.send({"type": "error", "code": result["error"], "message": result["message"]})
            self.frame_config = await camera.start.remote()
        elif isinstance(message, Coach):
            await camera.set_coach.remote(message.on, message.interval)
        elif isinstance(message, Review):
            job = await camera.review.remote(message.seconds, message.question, message.file_id)
            await self.send({"type": "job", "job": job, "stage": "queued", "progress": 0.0})
        elif isinstance(message, Confirm):
            result = await camera.confirm.remote(message.id, message.approve, message.pin)
            await self.send({"type": "confirmation", **result})
        elif isinstance(message, Signal):
            if not await camera.signal.remote("owner", message.model_dump()):
                await self.send({"type": "error", "code": "no_viewer", "message": f"No viewer {message.to!r}."})
        elif isinstance(message, Ping):
            await self.send({"type": "pong"})
        elif isinstance(message, Audio):
            self.spawn(self.hear(message))
        return True

    async def hear(self, message: Audio) -> None:
        """Transcribe a spoken question with the speech provider, then ask it."""
        provider = configured_provider("speech", os.environ)
        if provider is None:
            await self.send({"type": "error", "code": "speech_not_configured",
                             "message": 'Speech to text is not configured (a provider with kind "speech" in '
                                        "IRIIS_PROVIDERS); type the question instead."})
            return
        try:
            audio = base64.b64decode(message.data, validate=True)
        except binascii.Error:
            await self.send({"type": "error", "code": "bad_audio", "message": "The audio is not valid base64."})
            return
        extension = message.mime.split("/")[-1].split(";")[0] or "webm"
        try:
            text = await transcribe(provider, audio, f"question.{extension}", message.mime, 30.0)
        except ProviderError as exc:
            await self.send({"type": "error", "code": "speech_failed", "message": f"{exc.plain()} Type the question instead."})
            return
        await self.send({"type": "transcript", "text": text})
        if text.strip():
            await self.camera.ask.remote(text[:2000])


async def _receive(ws: WebSocket, idle: float) -> dict[str, Any] | None:
    try:
        return await asyncio.wait_for(ws.receive(), idle)
    except asyncio.TimeoutError:
        return None


@router.websocket("/v1/camera/ws")
async def camera_socket(ws: WebSocket) -> None:
    await ws.accept()
    gw = gateway_of(ws)
    if not key_matches(presented_key(ws), gw.hashes):
        await ws.close(CLOSE_UNAUTHORIZED, "send the owner key as ?token= or a Bearer header")
        return
    watch = ws.query_params.get("watch")
    if watch:
        await _viewer(ws, gw, watch)
        return
    stream = Stream(ws, gw)
    stream_id = new_id()
    session_id = new_id()
    try:
        session = await gw._session(session_id, create=True)
        stream.camera = camera_actor(stream_id, gw.config.camera.model_copy(), session)
        stream.frame_config = await stream.camera.start.remote()
        stream.spawn(stream.forward("owner"))
        await stream.send({"type": "hello", "stream_id": stream_id, "session_id": session_id,
                           "max_frame_bytes": stream.limit, "ocr_every": stream.frame_config["ocr_every"],
                           "vision_model": bool(gw.config.camera.vision)})
        procedure = ws.query_params.get("procedure")
        if procedure and procedure.isdigit():
            await stream.on_text(f'{{"type": "procedure", "id": {int(procedure)}}}')
        await _serve(ws, stream, gw.config.camera.idle_seconds)
    except WebSocketDisconnect:
        pass
    except Exception as exc:  # noqa: BLE001 - socket boundary: log, then close cleanly
        log.exception("camera stream failed")
        report("camera.ws", exc, path="/v1/camera/ws")
        if ws.application_state == WebSocketState.CONNECTED:
            await ws.close(1011, "server error; it was logged")
    finally:
        for task in list(stream.tasks) + [t for t in (stream.worker, stream.reading) if t]:
            task.cancel()
        if stream.camera is not None:
            try:
                await stream.camera.close.remote()
            except Exception:  # noqa: BLE001 - it may already be gone
                pass
            ray.kill(stream.camera, no_restart=True)


async def _serve(ws: WebSocket, stream: Stream, idle: float) -> None:
    hard_limit = stream.limit * HARD_LIMIT_FACTOR
    while True:
        message = await _receive(ws, idle)
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
            if not await stream.on_frame(data):
                await ws.close(CLOSE_NO_ACK, "send the next frame only after its frame_ack")
                return
        elif text is not None:
            # Text is bounded like frames (a spoken question is base64 audio); each message's
            # fields carry their own limits.
            if len(text) > hard_limit:
                await ws.close(CLOSE_TOO_BIG, f"message over {hard_limit} bytes")
                return
            if not await stream.on_text(text):
                await ws.close(CLOSE_PROTOCOL, "that message breaks the camera protocol")
                return


async def _viewer(ws: WebSocket, gw: Any, stream_id: str) -> None:
    """A watch-only viewer: WebRTC signalling relayed through the stream's actor."""
    camera = await find_camera(stream_id)
    if camera is None:
        await ws.close(CLOSE_NO_STREAM, "no open camera stream with that id")
        return
    viewer = await camera.add_viewer.remote()
    stream = Stream(ws, gw)
    stream.camera = camera
    stream.spawn(stream.forward(viewer))
    await stream.send({"type": "hello", "stream_id": stream_id, "viewer": viewer})
    try:
        while True:
            message = await _receive(ws, gw.config.camera.idle_seconds)
            if message is None or message["type"] == "websocket.disconnect":
                return
            try:
                signal = Signal.model_validate_json(message.get("text") or "")
            except ValidationError:
                await ws.close(CLOSE_PROTOCOL, "viewers send only webrtc signalling messages")
                return
            await camera.signal.remote(viewer, signal.model_dump())
    finally:
        for task in list(stream.tasks):
            task.cancel()
        try:
            await camera.remove_viewer.remote(viewer)
        except Exception:  # noqa: BLE001 - the stream may have ended first
            pass


# -- procedures -------------------------------------------------------------------------------

@router.post("/v1/procedures", status_code=201)
async def procedure_create(body: ProcedureCreate, request: Request) -> dict[str, Any]:
    """Define a procedure (steps with acceptance criteria, instruments with span and unit)."""
    gw = gateway_of(request)
    gw.owner(request)
    procedure_id = await procedures.create(gw.store, body)
    return {"id": procedure_id, **body.model_dump(mode="json")}


@router.get("/v1/procedures")
async def procedure_list(request: Request) -> dict[str, Any]:
    gw = gateway_of(request)
    gw.owner(request)
    data = await procedures.list_all(gw.store)
    return {"data": data, "count": len(data)}


@router.get("/v1/procedures/{procedure_id}")
async def procedure_get(procedure_id: int, request: Request) -> dict[str, Any]:
    gw = gateway_of(request)
    gw.owner(request)
    found = await procedures.get(gw.store, procedure_id)
    if found is None:
        raise ApiError(404, "not_found", "No procedure with that id.")
    return {"id": procedure_id, **found.model_dump(mode="json")}


@router.delete("/v1/procedures/{procedure_id}")
async def procedure_delete(procedure_id: int, request: Request) -> dict[str, Any]:
    gw = gateway_of(request)
    gw.owner(request)
    if not await procedures.delete(gw.store, procedure_id):
        raise ApiError(404, "not_found", "No procedure with that id.")
    return {"id": procedure_id, "deleted": True}
