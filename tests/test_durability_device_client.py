"""The desktop device agent comes back by itself: after a 1001 (the server restarting, or the
replica that held its socket going away) it reconnects almost at once, later failures back off
(doubling, capped), a connection that got its welcome resets the wait, and a revoked token
stops it for good. Driven against a real WebSocket server on loopback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from clients.desktop.agent import BACKOFF_MAX, Backoff, DeviceAgent


def middle(low: float, high: float) -> float:
    return (low + high) / 2


def test_the_backoff_after_1001_is_short_then_grows_and_a_welcome_resets_it() -> None:
    backoff = Backoff(jitter=middle)
    assert backoff.after(1001, welcomed=True) == 0.3
    assert [backoff.after(None, welcomed=False) for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff.after(1011, welcomed=True) == 1.0
    for _ in range(20):
        backoff.after(None, welcomed=False)
    assert backoff.after(None, welcomed=False) == BACKOFF_MAX
    assert backoff.after(1001, welcomed=False) == 0.3 and backoff.after(None, welcomed=False) == 1.0


async def test_the_agent_reconnects_after_1001_and_stops_on_a_revocation() -> None:
    # Each connection's ending, in order: welcomed then 1001, refused before the welcome (1011),
    # welcomed then 1001 again, then revoked (4403, fatal).
    script = [("welcome", 1001), (None, 1011), ("welcome", 1001), ("welcome", 4403)]
    hellos: list[dict[str, Any]] = []

    async def handler(ws: ServerConnection) -> None:
        hellos.append(json.loads(await ws.recv()))
        welcome, code = script[len(hellos) - 1]
        if welcome:
            await ws.send(json.dumps({"type": "welcome", "deviceId": 7}))
        await ws.close(code, "scripted")

    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        agent = DeviceAgent(f"http://127.0.0.1:{port}", "irad_test", "mac", "test mac", [])
        agent.backoff = Backoff(jitter=middle)
        agent.sleep = no_wait
        stopped = await asyncio.wait_for(agent.run_forever(), 30)
    assert stopped == "this device was revoked"
    assert len(hellos) == 4 and all(h["type"] == "hello" for h in hellos)
    # 1001: almost at once; a failure before the welcome: the first real wait; 1001 again: quick.
    assert waits == [0.3, 1.0, 0.3]
