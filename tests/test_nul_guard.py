"""A NUL character is a 422 in the error shape at the edge (issue 31, found by fuzzing the API):
PostgreSQL cannot store U+0000, so one in the path, the query or a JSON (lines) body used to fail
as a 500 deep in a write. In-process, no Ray: the guard in front of a route that echoes what it got."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from serve_apps.http.nul import MAX_CHECKED, RefuseNul


def _app() -> tuple[FastAPI, list[Any]]:
    app = FastAPI()
    seen: list[Any] = []

    @app.api_route("/echo/{name}", methods=["GET", "POST"])
    async def echo(name: str, request: Request) -> dict[str, Any]:
        body = await request.body()
        seen.append((name, dict(request.query_params), body))
        return {"name": name, "size": len(body)}

    app.add_middleware(RefuseNul)
    return app, seen


@pytest.fixture
async def api() -> Any:
    app, seen = _app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client, seen


def _refused(reply: httpx.Response) -> bool:
    return reply.status_code == 422 and reply.json()["error"]["code"] == "invalid_request" \
        and "NUL" in reply.json()["error"]["message"]


async def test_a_nul_anywhere_is_refused_before_the_route(api) -> None:
    client, seen = api
    assert _refused(await client.get("/echo/a", params={"q": "x\x00y"}))
    assert _refused(await client.get("/echo/a%00b"))
    assert _refused(await client.post("/echo/a", json={"text": "x\x00"}))
    assert _refused(await client.post("/echo/a", json={"k\x00": 1}))
    assert _refused(await client.post("/echo/a", json=[{"deep": ["ok", "n\x00"]}]))
    lines = b'{"text": "fine"}\n{"text": "bad\\u0000"}\n'
    assert _refused(await client.post("/echo/a", content=lines, headers={"Content-Type": "application/x-ndjson"}))
    assert seen == []


async def test_everything_else_reaches_the_route_unchanged(api) -> None:
    client, seen = api
    escaped = json.dumps({"text": "a backslash-u0000 written out: \\u0000"}).encode()
    for body, media in ((escaped, "application/json"), (b'{"broken', "application/json"),
                        (b"\x00\x01binary", "application/octet-stream"),
                        (b'{"text": "\\u0000"}', "text/plain")):
        reply = await client.post("/echo/a", content=body, headers={"Content-Type": media})
        assert reply.status_code == 200 and reply.json()["size"] == len(body), (body, reply.text)
        assert seen[-1][2] == body
    assert (await client.get("/echo/a", params={"q": "100%"})).status_code == 200
    assert seen[-1][1] == {"q": "100%"}


async def test_bodies_read_for_the_check_reach_the_route_whole(api) -> None:
    client, seen = api
    for size in (0, 10, MAX_CHECKED + 10):  # past MAX_CHECKED the rest streams on unread

        async def chunks(size: int = size):
            for start in range(0, size, 65_536):
                yield b"x" * min(65_536, size - start)

        reply = await client.post("/echo/a", content=chunks(), headers={"Content-Type": "application/json"})
        assert reply.status_code == 200 and reply.json()["size"] == size and seen[-1][2] == b"x" * size
