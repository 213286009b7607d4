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
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 15.0, skip_pings: bool = True) -> dict[str, Any]:
        while True:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel that comes as
            # the frame does, so a background reader told to stop read on (a suite hung 480 s on it).
            async with asyncio.timeout(timeout):
                raw = await self.ws.recv()
            frame = json.loads(raw)
            if skip_pings and frame.get("type") == "ping":
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
        try:
            async with asyncio.timeout(timeout):
                while True:
                    frame = json.loads(await self.ws.recv())
                    if frame.get("type") == "ping":
                        await self.send({"type": "pong"})
                    seen.append(frame)
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd else None), seen
        return None, seen

    async def close(self) -> None:
        await self.ws.close()


async def open_device(base_url: str, token: str | None, header: bool = True) -> Device:
    url = base_url.replace("http://", "ws://") + "/v1/devices/ws"
    headers = {}
    if token and header:
        headers["Authorization"] = f"Bearer {token}"
    elif token:
        url += f"?token={token}"
    ws = await connect(url, additional_headers=headers, max_size=None, ping_interval=None, open_timeout=20)
    return Device(ws)


async def connected(base_url: str, token: str, frame: dict[str, Any] | None = None) -> tuple[Device, dict[str, Any]]:
    device = await open_device(base_url, token)
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
