"""GET /v1/devices/ws: the device WebSocket. The socket ends here, on a gateway replica; the
device's state lives in its DeviceActor. This handler enforces what belongs to the socket:
the hello deadline, frame size (1009), silence (4408), pings, and the closes the actor asks
for (4000 replaced, 4403 revoked, 1001 server stopping)."""

import asyncio
import logging
import secrets
from typing import Any

from fastapi import APIRouter, WebSocket
from ray.exceptions import RayActorError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from actors.devices import repository as repo
from actors.devices.actor import device_actor
from actors.devices.protocol import (CLOSE_BAD_HELLO, CLOSE_NORMAL, CLOSE_REVOKED, CLOSE_SILENT, CLOSE_TOO_BIG,
                                     CLOSE_UNAUTHORIZED, ProtocolError, error_frame, frame_size, parse_frame,
                                     validate_hello)
from actors.devices.settings import DeviceLimits
from actors.devices.tokens import DEVICE_TOKEN_PREFIX
from serve_apps.http.auth import presented_key
from serve_apps.routes.device_calls import device_limits

log = logging.getLogger(__name__)
router = APIRouter()
TAKE_SECONDS = 20.0


class _Closed(Exception):
    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class _Socket:
    """Sends from several tasks, one at a time; closes once."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.lock = asyncio.Lock()
        self.closed = False

    async def send(self, frame: dict[str, Any]) -> None:
        async with self.lock:
            if not self.closed:
                await self.ws.send_json(frame)

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


async def _receive(ws: WebSocket, limits: DeviceLimits, seconds: float, on_timeout: _Closed) -> dict[str, Any]:
    """The next frame, parsed; _Closed for silence, a frame too big, or the device leaving."""
    try:
        message = await asyncio.wait_for(ws.receive(), seconds)
    except asyncio.TimeoutError:
        raise on_timeout from None
    if message["type"] == "websocket.disconnect":
        raise _Closed(message.get("code", 1000) or 1000, "the device left")
    raw = message.get("text")
    if raw is None:
        raw = message.get("bytes")
    if raw is not None and frame_size(raw) > limits.max_frame_bytes:
        raise _Closed(CLOSE_TOO_BIG, f"frames are at most {limits.max_frame_bytes} bytes")
    try:
        return parse_frame(raw, limits)
    except ProtocolError as exc:
        return {"type": "_invalid", "error": str(exc)}


@router.websocket("/v1/devices/ws")
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
        first = await _receive(websocket, limits, limits.hello_seconds,
                               _Closed(CLOSE_BAD_HELLO, f"no hello within {limits.hello_seconds:g} s"))
        if first.get("type") == "bye":
            await repo.revoke(gw.store, device.id, f"device:{device.id}")
            await sock.close(CLOSE_NORMAL, "goodbye: this device's token is revoked")
            return
        hello = validate_hello(first, device.kind, limits) if first.get("type") != "_invalid" \
            else _raise(ProtocolError(first["error"]))
    except ProtocolError as exc:
        await sock.send(error_frame(str(exc)))
        await sock.close(CLOSE_BAD_HELLO, "bad hello")
        return
    except _Closed as closed:
        if closed.code == CLOSE_BAD_HELLO:
            await sock.send(error_frame(closed.reason))
        await sock.close(closed.code, closed.reason)
        return
    await _serve(gw, sock, device, token, hello, limits)


def _raise(exc: Exception) -> Any:
    raise exc


async def _connect(gw: Any, device: repo.Device, conn_id: str, hello: Any, limits: DeviceLimits) -> tuple[Any, dict[str, Any]]:
    for attempt in range(3):
        actor = device_actor(device.id, gw.config.database_url, limits)
        try:
            return actor, await actor.connect.remote(conn_id, hello.model_dump(), device.model_dump())
        except RayActorError:
            # It was exiting after the previous connection; a fresh one starts on the next try.
            if attempt == 2:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


async def _serve(gw: Any, sock: _Socket, device: repo.Device, token: str, hello: Any, limits: DeviceLimits) -> None:
    conn_id = secrets.token_hex(8)
    actor, welcome = await _connect(gw, device, conn_id, hello, limits)
    await sock.send(welcome)
    outcome: list[_Closed] = []

    async def pump() -> None:
        """Frames the actor has for the device, and the close it asks for."""
        while True:
            try:
                frames = await actor.take.remote(conn_id, TAKE_SECONDS)
            except RayActorError:
                raise _Closed(1011, "the device's actor stopped") from None
            for frame in frames:
                if "close" in frame:
                    raise _Closed(frame["close"], frame.get("reason", ""))
                await sock.send(frame)

    async def pinger() -> None:
        while True:
            await asyncio.sleep(limits.ping_seconds)
            # A revocation this process did not see (the operator's CLI, another replica) still
            # ends the connection, at the latest one ping later.
            if await repo.device_by_token(gw.store, token) is None:
                raise _Closed(CLOSE_REVOKED, "this device was revoked")
            await sock.send({"type": "ping"})

    async def reader() -> None:
        silent = _Closed(CLOSE_SILENT, f"nothing heard for {limits.silence_seconds:g} s")
        while True:
            frame = await _receive(sock.ws, limits, limits.silence_seconds, silent)
            kind = frame.get("type")
            if kind == "_invalid":
                await sock.send(error_frame(frame["error"]))
            elif kind == "ping":
                await sock.send({"type": "pong"})
            elif kind == "pong":
                continue
            elif kind == "result":
                problem = await actor.result.remote(conn_id, frame)
                if problem:
                    await sock.send(problem)
            elif kind == "event":
                problem = await actor.event.remote(conn_id, frame)
                if problem:
                    await sock.send(problem)
            elif kind == "hello":
                try:
                    again = validate_hello(frame, device.kind, limits)
                except ProtocolError as exc:
                    await sock.send(error_frame(str(exc)))
                    raise _Closed(CLOSE_BAD_HELLO, "bad hello") from None
                answer = await actor.rehello.remote(conn_id, again.model_dump())
                if answer:
                    await sock.send(answer)
            elif kind == "bye":
                await repo.revoke(gw.store, device.id, f"device:{device.id}")
                raise _Closed(CLOSE_NORMAL, "goodbye: this device's token is revoked")
            else:
                await sock.send(error_frame(f"unknown frame type {kind!r}"))

    tasks = [asyncio.create_task(t()) for t in (pump, pinger, reader)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            exc = task.exception()
            if isinstance(exc, _Closed):
                outcome.append(exc)
            elif exc is not None and not isinstance(exc, WebSocketDisconnect):
                log.warning("device %s: socket task failed: %r", device.id, exc)
                outcome.append(_Closed(1011, "internal error"))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        closing = outcome[0] if outcome else _Closed(1011, "internal error")
        await sock.close(closing.code, closing.reason)
        try:
            await actor.disconnect.remote(conn_id)
        except RayActorError:
            pass
