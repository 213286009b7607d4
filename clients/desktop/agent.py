"""The connection: hello, calls answered within the deadline, pings, events at most one per
window (the rest queued), and reconnecting with a growing delay."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import deque
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from clients.desktop.tools import DesktopTool, run_tool

log = logging.getLogger("iriis-device")
LEGACY_MAX_TOOLS = 30
CALL_SECONDS = 20.0  # inside the server's 25 s, so the answer arrives in time
PING_SECONDS = 30.0
EVENT_SECONDS = 30.0
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0
# Closes after which reconnecting cannot help: the token is gone.
FATAL = {4401: "the token was not accepted", 4403: "this device was revoked"}


def ws_url(server: str) -> str:
    base = server.rstrip("/")
    return ("wss://" + base[8:] if base.startswith("https://") else "ws://" + base[7:]
            if base.startswith("http://") else base) + "/v1/devices/ws"


class EventQueue:
    """Events to send, at most one per `seconds`; the rest wait their turn."""

    def __init__(self, seconds: float = EVENT_SECONDS, limit: int = 100) -> None:
        self.seconds = seconds
        self.items: deque[dict[str, Any]] = deque(maxlen=limit)
        self.last: float | None = None

    def add(self, event: dict[str, Any]) -> None:
        self.items.append(event)

    def due(self, now: float) -> dict[str, Any] | None:
        if not self.items or (self.last is not None and now - self.last < self.seconds):
            return None
        self.last = now
        return self.items.popleft()


class Backoff:
    """How long to wait before the next connection attempt. A 1001 (the server is restarting,
    or the replica holding the socket went away) is retried almost at once; every failure
    after that doubles the wait up to BACKOFF_MAX; a connection that got its welcome resets it.
    Each wait is jittered so a fleet of devices does not reconnect in step."""

    def __init__(self, first: float = BACKOFF_FIRST, most: float = BACKOFF_MAX,
                 jitter: Any = random.uniform) -> None:
        self.first, self.most, self.jitter = first, most, jitter
        self.delay = first

    def after(self, code: int | None, welcomed: bool) -> float:
        if welcomed:
            self.delay = self.first
        if code == 1001:
            self.delay = self.first
            return self.jitter(0.1, 0.5)
        wait = self.delay * self.jitter(0.8, 1.2)
        self.delay = min(self.delay * 2, self.most)
        return wait


class DeviceAgent:
    def __init__(self, server: str, token: str, kind: str, label: str, tools: list[DesktopTool],
                 spool: Path | None = None, event_seconds: float = EVENT_SECONDS,
                 ping_seconds: float = PING_SECONDS) -> None:
        self.server, self.token, self.kind, self.label = server, token, kind, label
        self.tools = {t.name: t for t in tools}
        self.order = [t.name for t in tools]  # oldest first
        self.max_tools = LEGACY_MAX_TOOLS
        self.events = EventQueue(event_seconds)
        self.spool = spool
        self.ping_seconds = ping_seconds
        self.stopped: str | None = None
        self.welcomed = False  # this connection got its welcome
        self.backoff = Backoff()
        self.sleep = asyncio.sleep

    def hello(self) -> dict[str, Any]:
        offered = [self.tools[n].offer() for n in self.order[:self.max_tools]]
        return {"type": "hello", "kind": self.kind, "label": self.label, "version": "0.1.0", "tools": offered}

    async def run_forever(self) -> str:
        """Connect, serve, reconnect with a growing delay; returns why it stopped for good."""
        while self.stopped is None:
            self.welcomed = False
            try:
                code = await self.session()
            except (OSError, InvalidStatus, asyncio.TimeoutError) as exc:
                log.warning("could not connect: %s", exc)
                code = None
            if code in FATAL:
                self.stopped = FATAL[code]
                break
            wait = self.backoff.after(code, self.welcomed)
            log.info("connection ended (%s); reconnecting in %.1f s", code, wait)
            await self.sleep(wait)
        return self.stopped or "stopped"

    async def session(self) -> int | None:
        async with connect(ws_url(self.server), additional_headers={"Authorization": f"Bearer {self.token}"},
                           max_size=1_048_576, ping_interval=None, open_timeout=20) as ws:
            await ws.send(json.dumps(self.hello()))
            tasks: set[asyncio.Task[Any]] = set()
            pinger = asyncio.create_task(self._pings(ws))
            try:
                async for raw in ws:
                    frame = json.loads(raw)
                    kind = frame.get("type")
                    if kind == "welcome":
                        self.welcomed = True
                        log.info("connected as device %s", frame.get("deviceId"))
                        if frame.get("maxTools", LEGACY_MAX_TOOLS) > self.max_tools:
                            self.max_tools = int(frame["maxTools"])
                            if len(self.order) > LEGACY_MAX_TOOLS:
                                await ws.send(json.dumps(self.hello()))
                    elif kind == "call":
                        task = asyncio.create_task(self._answer(ws, frame))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
                    elif kind == "ping":
                        await ws.send(json.dumps({"type": "pong"}))
                    elif kind == "error":
                        log.warning("server: %s", frame.get("error"))
                    elif kind == "event":
                        log.info("event from another device: %s", frame.get("title"))
            except ConnectionClosed:
                pass
            finally:
                pinger.cancel()
                for task in tasks:
                    task.cancel()
            return ws.close_code

    async def _answer(self, ws: ClientConnection, frame: dict[str, Any]) -> None:
        tool = self.tools.get(frame.get("tool", ""))
        body = await run_tool(tool, frame.get("args"), CALL_SECONDS) if tool else \
            {"ok": False, "error": "this device has no such tool"}
        try:
            await ws.send(json.dumps({"type": "result", "id": frame.get("id"), **body}))
        except ConnectionClosed:
            pass

    async def _pings(self, ws: ClientConnection) -> None:
        loop = asyncio.get_running_loop()
        last_ping = loop.time()
        while True:
            await asyncio.sleep(0.5)
            self._read_spool()
            now = loop.time()
            event = self.events.due(now)
            if event is not None:
                await ws.send(json.dumps({"type": "event", **event}))
            if now - last_ping >= self.ping_seconds:
                last_ping = now
                await ws.send(json.dumps({"type": "ping"}))

    def _read_spool(self) -> None:
        """Events written by `iriis-device notify` (or any program) as JSON files."""
        if self.spool is None or not self.spool.is_dir():
            return
        for path in sorted(self.spool.glob("*.json")):
            try:
                self.events.add(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError) as exc:
                log.warning("skipped event file %s: %s", path.name, exc)
            path.unlink(missing_ok=True)


async def say_bye(server: str, token: str) -> int | None:
    """Uninstalling: the server revokes this device's token."""
    async with connect(ws_url(server), additional_headers={"Authorization": f"Bearer {token}"},
                       open_timeout=20) as ws:
        await ws.send(json.dumps({"type": "bye"}))
        try:
            async for _ in ws:
                pass
        except ConnectionClosed:
            pass
        return ws.close_code
