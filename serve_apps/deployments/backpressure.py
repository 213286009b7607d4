"""Backpressure at the gateway: past a number of HTTP requests in flight on one replica, the next
one is answered at once with 503, a `Retry-After` header and the documented error shape, instead
of waiting in a queue. Serve's own `max_ongoing_requests` / `max_queued_requests` stay above this
limit as the second line (its proxy answers 503 with Retry-After too, in plain text).

WebSockets are not counted (a paired device holds one for hours); the liveness probe never is.
A streamed reply counts until its last byte, so long turns are what fills the replica.
"""

from __future__ import annotations

import json
from typing import Any

from ray.serve.exceptions import BackPressureError
from starlette.requests import Request
from starlette.responses import JSONResponse

from actors.common.trace import mark
from serve_apps.http.errors import OVERLOADED, error_body

EXEMPT = frozenset({"/healthz"})


class InFlight:
    """How many requests are being served, against a limit (pure; one per replica)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.rejected = 0

    def enter(self) -> bool:
        if self.count >= self.limit:
            self.rejected += 1
            return False
        self.count += 1
        return True

    def leave(self) -> None:
        self.count = max(0, self.count - 1)


def overloaded_body(retry_after: int) -> dict[str, Any]:
    return error_body(OVERLOADED, f"The server is busy; try again in {retry_after} s.")


def serve_limits(limit: int) -> dict[str, int]:
    """Serve's own limits for the gateway: above ours, with room for sockets and quick 503s."""
    return {"max_ongoing_requests": 2 * limit + 100, "max_queued_requests": limit}


class Backpressure:
    """Pure ASGI middleware (streams pass through untouched)."""

    def __init__(self, app: Any, gate: InFlight, retry_after: int) -> None:
        self.app = app
        self.gate = gate
        self.retry_after = retry_after

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("path") == "/v1/chat":
            mark("gateway.asgi")  # the request left the Serve proxy (benchmarks/chat_overhead.py)
        if scope["type"] != "http" or scope.get("path") in EXEMPT:
            await self.app(scope, receive, send)
            return
        if not self.gate.enter():
            body = json.dumps(overloaded_body(self.retry_after)).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                    (b"retry-after", str(self.retry_after).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.gate.leave()


def install(app: Any, limit: int, retry_after: int) -> InFlight:
    """Put the gate in front of `app` (once per process, before it serves) and map a downstream
    deployment's full queue (AgentLoop, Perception) to the same 503."""
    gate = InFlight(limit)
    app.add_middleware(Backpressure, gate=gate, retry_after=retry_after)

    async def downstream_full(_request: Request, exc: Exception) -> JSONResponse:
        wait = getattr(exc, "retry_after_s", None) or retry_after
        return JSONResponse(overloaded_body(int(wait)), status_code=503, headers={"Retry-After": str(int(wait))})

    app.add_exception_handler(BackPressureError, downstream_full)
    return gate
