"""The task routes in-process (no Ray): the owner key, 201 with the row, the error shape for a
bad cron, cancel, and the scheduler's status when it is not running."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.requests import HTTPConnection

from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.http.errors import ApiError
from serve_apps.routes import tasks as routes

KEY = "owner-key"


class _Gateway:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def refresh_keys(self, force: bool = False) -> None:
        """One fixed key here: nothing stored to reload."""

    def owner(self, connection: HTTPConnection) -> None:
        if connection.headers.get("authorization") != f"Bearer {KEY}":
            raise ApiError(401, "unauthorized", "Send the owner key.")


class _Scheduler:
    def __init__(self) -> None:
        self.woken = 0

        class _Wake:
            def remote(inner) -> None:
                self.woken += 1
        self.wake = _Wake()


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'r.sqlite3'}")
    await migrate(store)
    app = FastAPI()
    app.include_router(routes.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)
    sched = _Scheduler()
    handle: dict[str, Any] = {"now": sched}

    async def find() -> Any:
        return handle["now"]
    monkeypatch.setattr(routes, "_scheduler", find)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c, (sched, handle)
    await store.close()


async def test_create_get_list_cancel(client: tuple[httpx.AsyncClient, Any]) -> None:
    c, (sched, _) = client
    made = await c.post("/v1/tasks", json={"title": "Flights", "goal": "Find the cheapest flight"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["status"], body["runs"], body["kind"]) == ("scheduled", 0, "task")
    assert body["conversation_id"] and body["next_run"] <= body["created"] + 1
    assert sched.woken == 1
    later = await c.post("/v1/tasks", json={"title": "Digest", "goal": "g", "run_at": "2030-01-01T09:00",
                                            "repeat": "0 9 * * *"})
    assert later.status_code == 201 and later.json()["repeat"] == "0 9 * * *"

    one = await c.get(f"/v1/tasks/{body['id']}")
    assert one.status_code == 200 and one.json()["goal"] == "Find the cheapest flight"
    listed = (await c.get("/v1/tasks")).json()
    assert listed["count"] == 2 and [t["title"] for t in listed["data"]] == ["Digest", "Flights"]

    gone = await c.delete(f"/v1/tasks/{body['id']}")
    assert gone.status_code == 200 and gone.json()["status"] == "cancelled"
    assert (await c.get("/v1/tasks", params={"status": "cancelled"})).json()["count"] == 1


async def test_errors_have_the_documented_shape(client: tuple[httpx.AsyncClient, Any]) -> None:
    c, _ = client
    bad = await c.post("/v1/tasks", json={"title": "x", "goal": "y", "repeat": "61 * * * *"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    empty = await c.post("/v1/tasks", json={"title": "", "goal": "y"})
    assert empty.status_code == 422 and empty.json()["error"]["code"] == "invalid_request"
    missing = await c.get("/v1/tasks/999")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert (await c.delete("/v1/tasks/999")).json()["error"]["code"] == "not_found"
    unsigned = await c.get("/v1/tasks", headers={"Authorization": "Bearer nope"})
    assert unsigned.status_code == 401 and unsigned.json()["error"]["code"] == "unauthorized"


async def test_the_scheduler_status_when_it_is_not_running(client: tuple[httpx.AsyncClient, Any]) -> None:
    c, (_, handle) = client
    handle["now"] = None
    answer = await c.get("/v1/scheduler")
    assert answer.status_code == 200 and answer.json() == {"running": False}
    # Creating a task needs no scheduler: the row waits for it.
    assert (await c.post("/v1/tasks", json={"title": "t", "goal": "g"})).status_code == 201
