"""GET /v1/devices/ws: the device WebSocket. The socket ends here, on a gateway replica; the
device's state lives in its DeviceActor. This handler enforces what belongs to the socket:
the hello deadline, frame size (1009), silence (4408), pings, and the closes the actor asks
for (4000 replaced, 4403 revoked, 1001 server stopping), and 1013 when no place under the cap
on live processes is free (serve_apps/sockets/places.py; the reason says when to retry).

Frames are typed (`actors.devices.frames`): what arrives is parsed into the device union and
dispatched on its class; what leaves is a server frame model, encoded to the same JSON the
contract has always shown."""

import asyncio
import logging
import secrets
from typing import Any

from fastapi import APIRouter, WebSocket
from ray.actor import ActorHandle
from ray.exceptions import RayActorError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from actors.devices import repository as repo
from actors.devices.actor import device_actor
from actors.common.errors import ErrorInfo
from actors.common.placement import preferred
from actors.common.restart import through_restart
from actors.devices.frames import (BadFrame, BadHello, ByeFrame, Close, EventFrame, Hello, PingFrame, PongFrame,
                                   ResultFrame, UnknownFrame, Welcome, encode)
from actors.devices.protocol import (CLOSE_BAD_HELLO, CLOSE_NORMAL, CLOSE_REVOKED, CLOSE_SILENT, CLOSE_TOO_BIG,
                                     CLOSE_UNAUTHORIZED, ProtocolError, error_frame, frame_size, parse_frame)
from actors.devices.settings import DeviceLimits
from actors.devices.tokens import DEVICE_TOKEN_PREFIX
from serve_apps.http.auth import presented_key
from serve_apps.http.errors import SocketClosed
from serve_apps.http.receive import receive_within
from serve_apps.routes.device_calls import device_limits
from serve_apps.sockets.places import CLOSE_TRY_LATER, NoRoom, place

log = logging.getLogger(__name__)
router = APIRouter()
TAKE_SECONDS = 20.0


class _Invalid:
    """A frame that broke the protocol; the device is told why (and a bad hello closes 4400)."""

    def __init__(self, error: ProtocolError) -> None:
        self.error = error


class _Socket:
    """Sends from several tasks, one at a time; closes once."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.lock = asyncio.Lock()
        self.closed = False

    async def send(self, frame: Any) -> None:
        """Send one server frame (a model from actors.devices.frames)."""
        async with self.lock:
            if not self.closed:
                await self.ws.send_json(encode(frame))

    async def send_error(self, error: ErrorInfo | ProtocolError | str) -> None:
        message = error.message if isinstance(error, ErrorInfo) else str(error)
        await self.send(error_frame(message))

    async def close(self, code: int, reason: str = "") -> None:
        async with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.ws.application_state != WebSocketState.DISCONNECTED:
                try:
                    await self.ws.close(code=code, reason=reason[:120])
                except (RuntimeError, WebSocketDisconnect):
                    pass


async def _receive(ws: WebSocket, limits: DeviceLimits, kind: str, seconds: float, on_timeout: SocketClosed) -> Any:
    """The next frame as its model (or _Invalid); SocketClosed for silence, a frame too big, or the
    device leaving."""
    message = await receive_within(ws, seconds)
    if message is None:
        raise on_timeout
    if message["type"] == "websocket.disconnect":
        raise SocketClosed(message.get("code", 1000) or 1000, "the device left")
    raw = message.get("text")
    if raw is None:
        raw = message.get("bytes")
    if raw is not None and frame_size(raw) > limits.max_frame_bytes:
        raise SocketClosed(CLOSE_TOO_BIG, f"frames are at most {limits.max_frame_bytes} bytes")
    try:
        return parse_frame(raw, limits, kind)
    except ProtocolError as exc:
        return _Invalid(exc)


@router.websocket("/devices/ws")
async def device_ws(websocket: WebSocket) -> None:
    gw = websocket.app.state.gateway
    limits = device_limits()
    token = presented_key(websocket, cookie=False) or ""
    device = await repo.device_by_token(gw.store, token) if token.startswith(DEVICE_TOKEN_PREFIX) else None
    await websocket.accept()
    sock = _Socket(websocket)
    if device is None:
        # Owner keys and web sessions do not open this socket: only a live device token.
        await sock.send(error_frame("a valid device token is needed (Authorization: Bearer irad_...)"))
        await sock.close(CLOSE_UNAUTHORIZED, "unauthorized")
        return
    try:
        first = await _receive(websocket, limits, device.kind, limits.hello_seconds,
                               SocketClosed(CLOSE_BAD_HELLO, f"no hello within {limits.hello_seconds:g} s"))
    except SocketClosed as closed:
        if closed.close_code == CLOSE_BAD_HELLO:
            await sock.send_error(closed.reason)
        await sock.close(closed.close_code, closed.reason)
        return
    if isinstance(first, ByeFrame):
        await repo.revoke(gw.store, device.id, f"device:{device.id}")
        await sock.close(CLOSE_NORMAL, "goodbye: this device's token is revoked")
        return
    if not isinstance(first, Hello):
        # Broken JSON, a broken hello, or another frame first: all are a bad hello.
        broken = first.error if isinstance(first, _Invalid) and not isinstance(first.error, BadFrame) else None
        await sock.send_error(broken or "the first frame must be a hello (or a bye)")
        await sock.close(CLOSE_BAD_HELLO, "bad hello")
        return
    try:
        async with place(gw, f"device:{device.id}"):
            await _serve(gw, sock, device, token, first, limits)
    except NoRoom as full:
        await sock.send_error(full.reason)
        await sock.close(CLOSE_TRY_LATER, full.reason)


async def _connect(gw: Any, device: repo.Device, conn_id: str, hello: Hello, limits: DeviceLimits) -> tuple[Any, Welcome]:
    placement = await preferred(gw.config.session.prefer_resource)
    for attempt in range(3):
        actor = device_actor(device.id, gw.config.database_url, limits, placement)
        try:
            return actor, await actor.connect.remote(conn_id, hello, device.model_dump())
        except RayActorError:
            # It was exiting after the previous connection; a fresh one starts on the next try.
            if attempt == 2:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


class _Connection:
    """One device's live connection: the socket, its DeviceActor (replaced when it restarts) and
    the hello to register again with. Three tasks share it: pump, pinger and reader."""

    # Set by open(); the pump replaces it when the actor restarts, and the others use the new one.
    actor: ActorHandle

    def __init__(self, gw: Any, sock: _Socket, device: repo.Device, token: str, hello: Hello,
                 limits: DeviceLimits) -> None:
        self.gw, self.sock, self.device, self.token, self.limits = gw, sock, device, token, limits
        self.conn_id = secrets.token_hex(8)
        self.latest = hello

    async def open(self) -> None:
        self.actor, welcome = await _connect(self.gw, self.device, self.conn_id, self.latest, self.limits)
        await self.sock.send(welcome)

    async def pump(self) -> None:
        """Frames the actor has for the device, and the close it asks for."""
        while True:
            try:
                frames = await self.actor.take.remote(self.conn_id, TAKE_SECONDS)
            except RayActorError:
                # The actor died (killed, its node lost) and restarts empty: this socket
                # registers again with the hello it holds; the device sees no close.
                try:
                    self.actor, _welcome = await through_restart(
                        lambda: _connect(self.gw, self.device, self.conn_id, self.latest, self.limits))
                except RayActorError:
                    raise SocketClosed(1011, "the device's actor stopped") from None
                log.warning("device %s: its actor restarted; the connection was registered again",
                            self.device.id)
                continue
            for frame in frames:
                if isinstance(frame, Close):
                    raise SocketClosed(frame.code, frame.reason)
                await self.sock.send(frame)

    async def pinger(self) -> None:
        while True:
            await asyncio.sleep(self.limits.ping_seconds)
            # A revocation this process did not see (the operator's CLI, another replica) still
            # ends the connection, at the latest one ping later.
            if await repo.device_by_token(self.gw.store, self.token) is None:
                raise SocketClosed(CLOSE_REVOKED, "this device was revoked")
            await self.sock.send(PingFrame())

    async def reader(self) -> None:
        limits = self.limits
        silent = SocketClosed(CLOSE_SILENT, f"nothing heard for {limits.silence_seconds:g} s")
        while True:
            frame = await _receive(self.sock.ws, limits, self.device.kind, limits.silence_seconds, silent)
            await self.on_frame(frame)

    async def on_frame(self, frame: Any) -> None:
        """One frame from the device, dispatched on its class; SocketClosed when it ends the socket."""
        sock = self.sock
        if isinstance(frame, _Invalid):
            await sock.send_error(frame.error)
            if isinstance(frame.error, BadHello):
                raise SocketClosed(CLOSE_BAD_HELLO, "bad hello")
        elif isinstance(frame, PingFrame):
            await sock.send(PongFrame())
        elif isinstance(frame, PongFrame):
            return
        elif isinstance(frame, (ResultFrame, EventFrame)):
            await self.forward(frame)
        elif isinstance(frame, Hello):
            self.latest = frame
            answer = await self.actor.rehello.remote(self.conn_id, frame)
            if answer is not None:
                await sock.send(answer)
        elif isinstance(frame, ByeFrame):
            await repo.revoke(self.gw.store, self.device.id, f"device:{self.device.id}")
            raise SocketClosed(CLOSE_NORMAL, "goodbye: this device's token is revoked")
        else:
            assert isinstance(frame, UnknownFrame)
            await sock.send_error(f"unknown frame type {frame.type!r}")

    async def forward(self, frame: ResultFrame | EventFrame) -> None:
        """A call's result or an event, to the actor; the device hears of any problem with it."""
        method = self.actor.result if isinstance(frame, ResultFrame) else self.actor.event
        try:
            problem: ErrorInfo | None = await method.remote(self.conn_id, frame)
        except RayActorError:
            # Its actor is restarting (the pump registers this socket again): the frame
            # was not taken, and the device is told so rather than disconnected.
            problem = ErrorInfo(code="restarting", message="the server was restarting this device's "
                                "state; that frame was not taken, send it again")
        if problem is not None:
            await self.sock.send_error(problem)

    async def close(self, outcome: list[SocketClosed]) -> None:
        """Close the socket with the first outcome, then let the actor forget this connection."""
        closing = outcome[0] if outcome else SocketClosed(1011, "internal error")
        await self.sock.close(closing.close_code, closing.reason)
        try:
            await self.actor.disconnect.remote(self.conn_id)
        except RayActorError:
            pass


async def _serve(gw: Any, sock: _Socket, device: repo.Device, token: str, hello: Hello, limits: DeviceLimits) -> None:
    conn = _Connection(gw, sock, device, token, hello, limits)
    await conn.open()
    outcome: list[SocketClosed] = []
    tasks = [asyncio.create_task(t()) for t in (conn.pump, conn.pinger, conn.reader)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            exc = task.exception()
            if isinstance(exc, SocketClosed):
                outcome.append(exc)
            elif exc is not None and not isinstance(exc, WebSocketDisconnect):
                log.warning("device %s: socket task failed: %r", device.id, exc)
                outcome.append(SocketClosed(1011, "internal error"))
    finally:
        for task in tasks:
            task.cancel()
        # `wait`, not `gather`: if this handler is itself being cancelled (the server stopping),
        # the error raised here must be that cancellation, not one of the tasks' own.
        await asyncio.wait(tasks)
        await conn.close(outcome)
