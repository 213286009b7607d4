"""One owner's camera stream as the socket sees it, without the socket and without Ray: frames
through the ack gate to perception (with the OCR lane beside them), text messages dispatched to
the stream's camera, spoken questions transcribed and asked. The transport
(serve_apps/sockets/camera.py) reads the socket, closes it with the protocol's codes, and plugs
in the CameraActor and the Perception deployment behind the two ports below."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from pydantic import BaseModel

from actors.camera import messages as m
from actors.camera.events import (
    CameraEvent,
    Confirmation,
    ErrorEvent,
    FrameAck,
    PerceptionEvent,
    Pong,
    State,
    Transcript,
)
from actors.camera.gate import BadFrame, FrameGate
from actors.camera.ocr_lane import OcrLane
from actors.common import background
from actors.common.errors import ErrorInfo
from actors.providers.failover import RouterClient
from actors.providers.speech import transcribe_any
from actors.providers.types import ProviderError
from actors.providers.vision_http import configured_providers

log = logging.getLogger(__name__)

SPEECH_TIMEOUT = 30.0
MAX_QUESTION = 2000
SPEECH_NOT_CONFIGURED = ('Speech to text is not configured (a provider with kind "speech" in '
                         "IRIIS_PROVIDERS); type the question instead.")

Send = Callable[[CameraEvent], Awaitable[None]]


class CameraPort(Protocol):
    """The stream's CameraActor, as the socket calls it."""

    async def start(self) -> dict[str, Any]: ...
    async def ask(self, question: str) -> Any: ...
    async def set_goal(self, goal: str) -> None: ...
    async def set_procedure(self, procedure_id: int | None) -> State | ErrorInfo: ...
    async def set_coach(self, on: bool, interval: float | None) -> None: ...
    async def review(self, seconds: float, question: str, file_id: int | None) -> int: ...
    async def confirm(self, confirmation_id: str, approve: bool, pin: str | None) -> BaseModel: ...
    async def signal(self, sender: str, message: dict[str, Any]) -> bool: ...
    async def observe(self, perception: dict[str, Any], frame: Any) -> dict[str, Any]: ...
    async def observe_text(self, text: str) -> None: ...


class PerceptionPort(Protocol):
    """The Perception deployment: a frame is put once, then perceived by reference."""

    def put(self, data: bytes) -> Any: ...
    async def perceive(self, frame: Any, index: int, **options: Any) -> dict[str, Any]: ...


class StreamCore:
    def __init__(self, camera: CameraPort, perception: PerceptionPort, send: Send, *, limit: int,
                 frame_config: dict[str, Any] | None = None, environ: Mapping[str, str] | None = None,
                 speech_router: RouterClient | None = None) -> None:
        self.camera, self.perception, self.send = camera, perception, send
        self.frame_config: dict[str, Any] = frame_config or {}
        self.environ = os.environ if environ is None else environ
        self.speech_router = speech_router
        self.gate = FrameGate(limit, self._ack, self._work)
        self.ocr = OcrLane(self._read_text)
        self.tasks: set[asyncio.Task[Any]] = set()

    # -- plumbing -------------------------------------------------------------------------

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run beside the read loop (a question's answer, a transcription)."""
        return background.spawn(work, self.tasks)

    async def idle(self) -> None:
        """Wait until the frames and the spawned work so far are done (tests)."""
        await self.gate.idle()
        while self.tasks or self.ocr.busy:
            await asyncio.gather(*self.tasks, *([self.ocr.task] if self.ocr.busy else []), return_exceptions=True)

    def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        self.gate.cancel()
        self.ocr.cancel()

    # -- frames ---------------------------------------------------------------------------

    def on_frame(self, data: bytes) -> bool:
        """False when the client broke the ack protocol."""
        return self.gate.offer(data)

    async def _ack(self, index: int) -> None:
        await self.send(FrameAck(frame=index))

    async def _work(self, index: int, item: bytes | BadFrame) -> None:
        if isinstance(item, BadFrame):
            await self.send(ErrorEvent.of(item, frame=index))
            return
        frame = self.perception.put(item)
        self.ocr.offer(index, frame, self.frame_config.get("ocr_every", 3))
        result = await self.perception.perceive(frame, index, ocr=False,
                                                instrument=self.frame_config.get("instrument"))
        if "error" in result:
            await self.send(ErrorEvent(code=result["error"], message=result["message"], frame=index))
            return
        # The stream's actor has the frame before the client hears of it: a question asked on
        # seeing this perception is about this frame, never "no frame has arrived yet".
        self.frame_config = await self.camera.observe(result, frame)
        await self.send(PerceptionEvent.of(index, result))

    async def _read_text(self, index: int, frame: Any) -> None:
        result = await self.perception.perceive(frame, index, detect=False, dial=False)
        if "error" in result:
            return  # the frame loop reports a bad frame
        event = PerceptionEvent.ocr_only(index, result)
        await self.send(event)
        await self.camera.observe_text(event.ocr or "")

    # -- text messages --------------------------------------------------------------------

    async def on_text(self, text: str) -> bool:
        """Dispatch one JSON message; False when it breaks the protocol."""
        message = m.parse_message(text)
        if isinstance(message, ErrorInfo):
            await self.send(ErrorEvent.of(message))
            return False
        camera = self.camera
        if isinstance(message, m.Ask):
            self.spawn(camera.ask(message.text))
        elif isinstance(message, m.Goal):
            await camera.set_goal(message.text)
        elif isinstance(message, m.UseProcedure):
            result = await camera.set_procedure(message.id)
            if not isinstance(result, State):
                await self.send(ErrorEvent.of(result))
            self.frame_config = await camera.start()
        elif isinstance(message, m.Coach):
            await camera.set_coach(message.on, message.interval)
        elif isinstance(message, m.Review):
            await camera.review(message.seconds, message.question, message.file_id)
        elif isinstance(message, m.Confirm):
            await self.send(Confirmation.of(await camera.confirm(message.id, message.approve, message.pin)))
        elif isinstance(message, m.Signal):
            if not await camera.signal("owner", message.model_dump()):
                await self.send(ErrorEvent(code="no_viewer", message=f"No viewer {message.to!r}."))
        elif isinstance(message, m.Ping):
            await self.send(Pong())
        elif isinstance(message, m.Audio):
            self.spawn(self.hear(message))
        return True

    async def hear(self, message: m.Audio) -> None:
        """Transcribe a spoken question with the speech providers, then ask it."""
        providers = configured_providers("speech", self.environ)
        if not providers:
            await self.send(ErrorEvent(code="speech_not_configured", message=SPEECH_NOT_CONFIGURED))
            return
        try:
            audio = base64.b64decode(message.data, validate=True)
        except binascii.Error:
            await self.send(ErrorEvent(code="bad_audio", message="The audio is not valid base64."))
            return
        extension = message.mime.split("/")[-1].split(";")[0] or "webm"
        try:
            _provider, _model, text = await transcribe_any(providers, audio, f"question.{extension}", message.mime,
                                                           SPEECH_TIMEOUT, router=self.speech_router)
        except ProviderError as exc:
            log.warning("speech to text failed: %s", exc)
            await self.send(ErrorEvent(code="speech_failed", message=f"{exc.plain()} Type the question instead."))
            return
        await self.send(Transcript(text=text))
        if text.strip():
            await self.camera.ask(text[:MAX_QUESTION])
