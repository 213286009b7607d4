"""No NUL character reaches the store (issue 31, from fuzzing the API): PostgreSQL's text and jsonb
cannot hold U+0000, so a `%00` in the path or query, or a `\\u0000` in a JSON (or JSON lines) body,
failed deep in a read or a write as a 500. It is refused at the edge instead: 422 `invalid_request`
in the error shape, before any route runs.

Pure ASGI middleware. A JSON body is read whole here (FastAPI reads it whole anyway) up to
MAX_CHECKED bytes, and handed on unchanged; a bigger one passes unchecked, for its route to refuse.
"""

from __future__ import annotations

import json
from typing import Any

from actors.memory.transfer import MAX_IMPORT_BYTES
from serve_apps.http.errors import error_body

MAX_CHECKED = MAX_IMPORT_BYTES
JSON_TYPES = ("application/json", "application/x-ndjson", "application/jsonl")
REFUSED = json.dumps(error_body("invalid_request", "The request holds a NUL character (U+0000), "
                                                   "which nothing here can store.")).encode()


def holds_nul(value: Any) -> bool:
    """Whether a parsed JSON value has U+0000 in any string or key."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def body_holds_nul(body: bytes) -> bool:
    """Whether a JSON or JSON lines body holds U+0000 in a string. What does not parse is left
    to the route (a 400 or 422 of its own)."""
    if b"\\u0000" not in body:  # the only way JSON spells U+0000
        return False
    for line in (body,) + tuple(body.splitlines()):
        try:
            if holds_nul(json.loads(line)):
                return True
        except (ValueError, RecursionError):
            continue
    return False


def _is_json(scope: dict[str, Any]) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media = value.split(b";")[0].strip().lower().decode("latin-1")
            return media in JSON_TYPES or media.endswith("+json")
    return False


class RefuseNul:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if b"%00" in scope.get("query_string", b"") or "\x00" in scope.get("path", ""):
            await _refuse(send)
            return
        if not _is_json(scope):
            await self.app(scope, receive, send)
            return
        read: list[dict[str, Any]] = []
        size, more = 0, True
        while more and size <= MAX_CHECKED:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        if not more and body_holds_nul(b"".join(m.get("body", b"") for m in read)):
            await _refuse(send)
            return

        async def replay() -> dict[str, Any]:
            return read.pop(0) if read else await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Any) -> None:
    await send({"type": "http.response.start", "status": 422,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(REFUSED)).encode())]})
    await send({"type": "http.response.body", "body": REFUSED})
