"""Reading a WebSocket with a silence limit, for every socket the gateway serves.

`asyncio.wait_for` on Python 3.11 can swallow a cancellation that lands just as the message
arrives (it returns the message instead of raising), so a socket closing at shutdown, or the
test client leaving, could leave its handler running past its cancel. `asyncio.timeout`
does not have that race."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import WebSocket


async def receive_within(ws: WebSocket, seconds: float) -> dict[str, Any] | None:
    """The next ASGI message from `ws`, or None when nothing came within `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            return await ws.receive()
    except TimeoutError:
        return None
