"""A raw device WebSocket client for the protocol tests: frames in, frames out, close codes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed


def tool(name: str, tier: int | None = 0, skill: str | None = None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "description": f"The {name} tool.",
                           "parameters": params or {"type": "object", "properties": {"path": {"type": "string"}}}}
    if tier is not None:
        out["tier"] = tier
    if skill is not None:
        out["skill"] = skill
    return out


def hello(kind: str = "linux", tools: list[dict[str, Any]] | None = None, label: str = "Test box") -> dict[str, Any]:
    return {"type": "hello", "kind": kind, "label": label, "version": "0.1",
            "tools": [tool("files_read")] if tools is None else tools}


class Device:
    """One device connection. Like a real device client it answers the server's pings as they
    come, whatever the test is doing meanwhile (a turn on a loaded machine can take longer than
    the silence limit); `answer_pings=False` leaves them to the test (the silence tests)."""

    def __init__(self, ws: ClientConnection, answer_pings: bool = True) -> None:
        self.ws = ws
        self._frames: asyncio.Queue[dict[str, Any] | Exception] | None = None
        self._reader: asyncio.Task[None] | None = None
        if answer_pings:
            self._frames = asyncio.Queue()
            self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self._frames is not None
        try:
            while True:
                frame = json.loads(await self.ws.recv())
                if frame.get("type") == "ping":
                    await self.send({"type": "pong"})
                self._frames.put_nowait(frame)
        except Exception as exc:  # noqa: BLE001 - the close (or a broken frame) reaches the reader
            self._frames.put_nowait(exc)

    async def _next(self, timeout: float) -> dict[str, Any]:
        """The next frame (a ping too, already answered when this client answers them)."""
        # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel that comes as
        # the frame does, so a background reader told to stop read on (a suite hung 480 s on it).
        async with asyncio.timeout(timeout):
            if self._frames is None:
                return json.loads(await self.ws.recv())
            got = await self._frames.get()
        if isinstance(got, Exception):
            self._frames.put_nowait(got)   # every later read sees the close too
            raise got
        return got

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 15.0, skip_pings: bool = True) -> dict[str, Any]:
        while True:
            frame = await self._next(timeout)
            if skip_pings and frame.get("type") == "ping":
                if self._frames is None:
                    await self.send({"type": "pong"})
                continue
            return frame

    async def recv_type(self, kind: str, timeout: float = 15.0) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            frame = await self.recv(max(0.01, deadline - loop.time()))
            if frame.get("type") == kind:
                return frame

    async def closed(self, timeout: float = 15.0) -> tuple[int | None, list[dict[str, Any]]]:
        """Read until the server closes; the close code and the frames seen before it."""
        seen: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while loop.time() < deadline:
                frame = await self._next(max(0.01, deadline - loop.time()))
                if self._frames is None and frame.get("type") == "ping":
                    await self.send({"type": "pong"})
                seen.append(frame)
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd else None), seen
        except TimeoutError:
            pass
        return None, seen

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


async def open_device(base_url: str, token: str | None, header: bool = True, answer_pings: bool = True) -> Device:
    url = base_url.replace("http://", "ws://") + "/v1/devices/ws"
    headers = {}
    if token and header:
        headers["Authorization"] = f"Bearer {token}"
    elif token:
        url += f"?token={token}"
    ws = await connect(url, additional_headers=headers, max_size=None, ping_interval=None, open_timeout=20)
    return Device(ws, answer_pings)


async def connected(base_url: str, token: str, frame: dict[str, Any] | None = None,
                    answer_pings: bool = True) -> tuple[Device, dict[str, Any]]:
    device = await open_device(base_url, token, answer_pings=answer_pings)
    await device.send(frame or hello())
    # Generous: on a loaded machine a device actor's first start can take tens of seconds.
    return device, await device.recv_type("welcome", 120)


def pair(base_url: str, owner_key: str, pin: str, kind: str = "linux", skills: list[str] | None = None,
         label: str = "Test box") -> dict[str, Any]:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        made = client.post("/v1/me/devices/codes", headers={"Authorization": f"Bearer {owner_key}"},
                           json={"kind": kind, "label": label, "skills": skills if skills is not None else ["files"],
                                 "pin": pin})
        assert made.status_code == 201, made.text
        paired = client.post("/v1/devices/pair", json={"code": made.json()["code"], "kind": kind})
        assert paired.status_code == 200, paired.text
        return paired.json()
