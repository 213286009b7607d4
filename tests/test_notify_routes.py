"""The push and calls routes in-process (no Ray): the shapes the web app builds on, owner only,
limits at, over and under, and the ntfy alert dismissed when a call is answered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from actors.notify import webpush
from actors.notify.config import NotifyConfig
from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.routes import calls as call_routes
from serve_apps.routes import push as push_routes
from tests.notify_fakes import Browser, Recorder
from tests.test_tasks_routes import KEY, _Gateway as _TasksGateway


class _Gateway(_TasksGateway):
    async def refresh_keys(self) -> None:
        return None


class _Scheduler:
    def __init__(self) -> None:
        self.woken: list[str] = []
        outer = self

        class _Wake:
            def __init__(self, name: str) -> None:
                self.name = name

            def remote(self) -> None:
                outer.woken.append(self.name)
        self.wake_calls, self.wake_notify = _Wake("calls"), _Wake("notify")


@pytest.fixture
def ntfy() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ntfy: Recorder) -> AsyncIterator[tuple[httpx.AsyncClient, Store, _Scheduler]]:
    scheduler = _Scheduler()

    async def find(_name: str) -> _Scheduler:
        return scheduler

    config = NotifyConfig(ntfy_url=ntfy.url, ntfy_topic="calls", app_url="http://app.test")
    for module in (call_routes, push_routes):
        monkeypatch.setattr(module, "find_actor_async", find)
        monkeypatch.setattr(module, "route_config", lambda: config)
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'n.sqlite3'}")
    await migrate(store)
    app = FastAPI()
    app.include_router(push_routes.router, prefix=API_PREFIX)
    app.include_router(call_routes.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client, store, scheduler
    await store.close()


async def test_push_key_and_subscriptions(api) -> None:
    client, store, _ = api
    key = (await client.get("/v1/push/key")).json()
    assert key == {"key": (await webpush.vapid_keys(store)).public}
    browser = Browser("https://push.example.net/send/abc")
    made = await client.post("/v1/push/subscriptions", json=browser.subscription())
    assert made.status_code == 201
    sub = made.json()
    assert sub["endpoint"] == browser.endpoint and set(sub) == {"id", "endpoint", "created", "last_ok"}
    # The same browser again keeps one row.
    again = await client.post("/v1/push/subscriptions", json=browser.subscription())
    assert again.json()["id"] == sub["id"]
    listed = (await client.get("/v1/push/subscriptions")).json()
    assert listed["count"] == 1 and listed["data"][0]["id"] == sub["id"]
    assert (await client.delete(f"/v1/push/subscriptions/{sub['id']}")).json() == {"id": sub["id"], "deleted": True}
    gone = await client.delete(f"/v1/push/subscriptions/{sub['id']}")
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "not_found")


async def test_bad_subscriptions_are_refused(api) -> None:
    client, _, _ = api
    good = Browser("https://push.example.net/x").subscription()
    bad_keys = {**good, "keys": {"p256dh": "A" * 87, "auth": good["keys"]["auth"]}}
    resp = await client.post("/v1/push/subscriptions", json=bad_keys)
    assert (resp.status_code, resp.json()["error"]["code"]) == (422, "invalid_request")
    resp = await client.post("/v1/push/subscriptions", json={**good, "endpoint": "ftp://push.example/x"})
    assert resp.status_code == 422
    resp = await client.post("/v1/push/subscriptions", json={"endpoint": good["endpoint"]})
    assert resp.status_code == 422


async def test_only_the_owner(api) -> None:
    client, _, _ = api
    for method, path in (("GET", "/v1/push/key"), ("POST", "/v1/calls"), ("GET", "/v1/calls"),
                         ("POST", "/v1/calls/1/answer"), ("POST", "/v1/push/test")):
        resp = await client.request(method, path, headers={"Authorization": "Bearer nope"}, json={"reason": "x"})
        assert resp.status_code == 401, path


async def test_a_call_is_made_listed_and_wakes_the_watcher(api) -> None:
    client, _, scheduler = api
    made = await client.post("/v1/calls", json={"at": 1_900_000_000, "reason": "Pay rent", "repeat": "0 9 1 * *"})
    assert made.status_code == 201
    call = made.json()
    assert (call["status"], call["reason"], call["repeat"], call["source"], call["at"]) == (
        "scheduled", "Pay rent", "0 9 1 * *", "user", 1_900_000_000)
    assert call["link"] == f"http://app.test/?call={call['id']}"
    assert scheduler.woken == ["calls"]
    now = (await client.post("/v1/calls", json={"reason": "Now", "at": "in 0 minutes"})).json()
    listed = (await client.get("/v1/calls")).json()
    assert listed["count"] == 2 and {c["id"] for c in listed["data"]} == {call["id"], now["id"]}
    assert (await client.get(f"/v1/calls/{call['id']}")).json()["id"] == call["id"]
    assert (await client.get("/v1/calls/999")).status_code == 404


@pytest.mark.parametrize("body,field", [
    ({"reason": ""}, "reason"), ({"reason": "x" * 301}, "reason"), ({"reason": "ok", "repeat": "every 10s"}, "repeat"),
    ({"reason": "ok", "at": "someday"}, "at"), ({"reason": "ok", "opening": "y" * 1001}, "opening")])
async def test_call_limits(api, body: dict[str, Any], field: str) -> None:
    client, _, _ = api
    resp = await client.post("/v1/calls", json=body)
    assert resp.status_code == 422 and resp.json()["error"]["message"].startswith(field)


async def test_call_limits_at_the_edge_are_taken(api) -> None:
    client, _, _ = api
    resp = await client.post("/v1/calls", json={"reason": "x" * 300, "opening": "y" * 1000, "repeat": "every 1m"})
    assert resp.status_code == 201


async def test_answering_dismisses_the_alert_and_a_late_answer_calls_back(api, ntfy: Recorder) -> None:
    from actors.notify import call_store

    client, store, _ = api
    call = (await client.post("/v1/calls", json={"reason": "Stretch"})).json()
    # The watcher rang it a moment ago.
    await call_store.move(store, call["id"], ("scheduled",), 1.0, status="ringing", rang=1.0, rings=1)
    answered = (await client.post(f"/v1/calls/{call['id']}/answer")).json()
    assert answered["mode"] == "answered" and answered["turn"] == "[call answered] Stretch"
    assert answered["call"]["status"] == "answered" and answered["conversation_id"] == f"call-{call['id']}"
    assert [(s.method, s.path) for s in ntfy.requests()] == [
        ("PUT", f"/calls/{call['id']}/clear"), ("DELETE", f"/calls/{call['id']}")]
    declined = await client.post(f"/v1/calls/{call['id']}/decline")
    assert (declined.status_code, declined.json()["error"]["code"]) == (409, "call_conflict")
    other = (await client.post("/v1/calls", json={"reason": "Later", "at": 1_900_000_000})).json()
    assert (await client.post(f"/v1/calls/{other['id']}/cancel")).json()["mode"] == "cancelled"
    back = (await client.post(f"/v1/calls/{other['id']}/answer")).json()
    assert back["mode"] == "callback" and back["turn"] == "[call back] Later"
    assert (await client.post("/v1/calls/424242/answer")).status_code == 404
