"""Ids and cursors at, over and under what the store holds (issue 31): the routes in-process (no
Ray, no server) over a real SQLite store. The largest id answers 404 like any missing row; one
past it, 0 or a negative id is a 422 in the documented error shape, never a 500 from the
driver's OverflowError. Unicode digits (`²`) in the event stream's resume point are ignored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel
from ray.exceptions import TaskCancelledError

from actors.camera.messages import Review, UseProcedure, parse_message
from actors.common.errors import ErrorInfo
from actors.common.ids import MAX_ROW_ID, ascii_int, over_cap
from actors.devices import repository as repo
from actors.devices.people import OWNER_ID
from actors.devices.settings import DeviceLimits
from actors.notify.config import NotifyConfig
from actors.relay.limits import RelayLimits
from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.http import app as http_app
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.http.relay_app import build_relay_app
from serve_apps.routes import auth, calls, camera, chat, devices, events, files, memory, people, push, tasks
from tests.test_tasks_routes import KEY, _Gateway as _TasksGateway

OVER = MAX_ROW_ID + 1
ROUTERS = (auth, calls, camera, chat, devices, events, files, memory, people, push, tasks)
# Every route that takes a row id in its path: (method, path with {id}, body).
ID_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/memory/{id}", None),
    ("DELETE", "/v1/memory/{id}", None),
    ("GET", "/v1/tasks/{id}", None),
    ("DELETE", "/v1/tasks/{id}", None),
    ("GET", "/v1/calls/{id}", None),
    ("POST", "/v1/calls/{id}/answer", None),
    ("POST", "/v1/calls/{id}/decline", None),
    ("POST", "/v1/calls/{id}/cancel", None),
    ("GET", "/v1/files/{id}", None),
    ("DELETE", "/v1/me/devices/{id}", None),
    ("DELETE", "/v1/admin/devices/{id}", None),
    ("PUT", "/v1/me/devices/{id}/skills/files", {"on": False}),
    ("DELETE", "/v1/admin/people/{id}", None),
    ("DELETE", "/v1/push/subscriptions/{id}", None),
    ("GET", "/v1/procedures/{id}", None),
    ("DELETE", "/v1/procedures/{id}", None),
    ("DELETE", "/v1/keys/{id}", None),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _ in ID_ROUTES]


class _Gateway(_TasksGateway):
    def owner_key(self, key: str | None) -> bool:
        return key == KEY


class _EventBus:
    """The stream's live half: records where it would wait from, then the client goes away."""

    def __init__(self) -> None:
        self.waited_after: list[int] = []
        outer = self

        class _Take:
            async def remote(self, _person: int, after: int, _timeout: float) -> list[dict[str, Any]]:
                outer.waited_after.append(after)
                raise TaskCancelledError()
        self.take = _Take()


@pytest.fixture
async def api(tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient, Store]]:
    # A 500 would report to the error log actor, which would start Ray: record nothing instead.
    monkeypatch.setattr(http_app, "report", lambda *_a, **_k: None)
    monkeypatch.setattr(calls, "route_config", lambda: NotifyConfig(app_url="http://app.test"))

    async def no_scheduler(*_args: Any) -> None:
        return None
    monkeypatch.setattr(calls, "find_actor_async", no_scheduler)
    monkeypatch.setattr(tasks, "_scheduler", no_scheduler)
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'ids.sqlite3'}")
    await migrate(store)
    app = FastAPI()
    for module in ROUTERS:
        app.include_router(module.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield app, client, store
    await store.close()


def _error(reply: httpx.Response) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"error"} and set(body["error"]) >= {"code", "message"}, body
    return body["error"]


async def _send(client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None,
                row_id: object) -> httpx.Response:
    return await client.request(method, path.format(id=row_id), json=body)


@pytest.mark.parametrize(("method", "path", "body"), ID_ROUTES, ids=ROUTE_IDS)
async def test_the_largest_id_is_a_missing_row(api, method: str, path: str, body: dict[str, Any] | None) -> None:
    _, client, _ = api
    reply = await _send(client, method, path, body, MAX_ROW_ID)
    assert reply.status_code == 404, reply.text
    assert _error(reply)["code"] == "not_found"


@pytest.mark.parametrize(("method", "path", "body"), ID_ROUTES, ids=ROUTE_IDS)
async def test_ids_out_of_range_are_422_in_the_error_shape(api, method: str, path: str,
                                                           body: dict[str, Any] | None) -> None:
    _, client, _ = api
    for bad in (OVER, 2**64, "9" * 5000, 0, -1, "²"):
        reply = await _send(client, method, path, body, bad)
        assert reply.status_code == 422, (bad, reply.text)
        error = _error(reply)
        assert error["code"] == "invalid_request", (bad, error)
        assert "_id" in error["message"], (bad, error)  # it names the parameter


async def test_a_good_id_still_reaches_its_row(api) -> None:
    _, client, _ = api
    made = await client.post("/v1/tasks", json={"title": "t", "goal": "g", "run_at": "2030-01-01T09:00"})
    assert made.status_code == 201, made.text
    task_id = made.json()["id"]
    assert (await client.get(f"/v1/tasks/{task_id}")).json()["id"] == task_id
    call = await client.post("/v1/calls", json={"at": 1_900_000_000, "reason": "Pay rent"})
    assert (await client.get(f"/v1/calls/{call.json()['id']}")).status_code == 200


async def test_the_event_list_cursor_is_bounded(api) -> None:
    _, client, store = api
    kept = await repo.add_event(store, OWNER_ID, None, {"event": "note", "title": "t", "text": "x"}, DeviceLimits())
    everything = await client.get("/v1/me/events", params={"after": 0})
    assert everything.status_code == 200 and [e["id"] for e in everything.json()["data"]] == [kept["id"]]
    at_top = await client.get("/v1/me/events", params={"after": MAX_ROW_ID})
    assert at_top.status_code == 200 and at_top.json()["count"] == 0
    for bad in (OVER, -1, "²", "9" * 5000):
        reply = await client.get("/v1/me/events", params={"after": bad})
        assert reply.status_code == 422, (bad, reply.text)
        error = _error(reply)
        assert error["code"] == "invalid_request" and "after" in error["message"], (bad, error)


async def _stream(app: FastAPI, headers: dict[str, Any] | None = None,
                  params: dict[str, str] | None = None) -> httpx.Response:
    # The stream runs until the client goes away; here the fake bus says it went away, and the
    # transport hands back what was sent until then instead of raising.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        return await client.get("/v1/me/events/stream", headers=headers, params=params)


async def test_the_stream_ignores_a_resume_point_that_is_not_a_plain_number(api, monkeypatch) -> None:
    app, _, store = api
    bus = _EventBus()
    monkeypatch.setattr(events, "event_bus", lambda: bus)
    kept = await repo.add_event(store, OWNER_ID, None, {"event": "note", "title": "t", "text": "x"}, DeviceLimits())
    # Good input keeps its meaning: Last-Event-ID 0 replays what was kept.
    replay = await _stream(app, headers={"Last-Event-ID": "0"})
    assert replay.status_code == 200 and f"id: {kept['id']}\nevent: device_event" in replay.text
    assert bus.waited_after[-1] == kept["id"]
    # `²` passes str.isdigit() but not int(); past the id column the driver overflows. Both start from now.
    for headers, params in (({"Last-Event-ID": "²".encode("latin-1")}, None), (None, {"after": "²"}),
                            ({"Last-Event-ID": str(OVER)}, None), (None, {"after": "9" * 5000}),
                            ({"Last-Event-ID": "-1"}, None)):
        reply = await _stream(app, headers=headers, params=params)
        assert reply.status_code == 200, (headers, params, reply.text)
        assert reply.text.startswith(": connected") and "event: device_event" not in reply.text
        assert bus.waited_after[-1] == kept["id"], (headers, params)


SESSION_ROUTES = [("GET", "/v1/sessions/{id}/messages", None), ("GET", "/v1/sessions/{id}/state", None),
                  ("GET", "/v1/sessions/{id}/stream", None), ("POST", "/v1/sessions/{id}/cancel", None),
                  ("POST", "/v1/sessions/{id}/set-aside", None), ("PATCH", "/v1/sessions/{id}", {"title": "x"}),
                  ("DELETE", "/v1/sessions/{id}", None), ("GET", "/v1/me/sessions/{id}/messages", None)]


@pytest.mark.parametrize("method, path, body", SESSION_ROUTES, ids=[f"{m} {p}" for m, p, _ in SESSION_ROUTES])
@pytest.mark.parametrize("bad", ["a" * 65, "has.dot", "has space", "é"])
async def test_a_string_that_cannot_be_a_session_id_is_no_session(api, method: str, path: str,
                                                                    body: dict[str, Any] | None, bad: str) -> None:
    _, client, _ = api
    reply = await client.request(method, path.format(id=bad), json=body)
    assert reply.status_code == 404 and _error(reply)["code"] == "session_not_found", reply.text
    # Without a key the caller hears 401 first, whatever the id.
    anonymous = await client.request(method, path.format(id=bad), json=body, headers={"Authorization": ""})
    assert anonymous.status_code == 401 and _error(anonymous)["code"] == "unauthorized", anonymous.text


def test_a_session_id_at_its_limits_is_taken() -> None:
    from serve_apps.http.ids import _session_id
    assert _session_id("a" * 64) == "a" * 64 and _session_id("x") == "x" and _session_id("A-z_0") == "A-z_0"


def test_every_integer_path_parameter_has_bounds_in_the_openapi_document() -> None:
    app = FastAPI()
    for module in ROUTERS:
        app.include_router(module.router, prefix=API_PREFIX)
    document = app.openapi()
    found = []
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for param in operation.get("parameters", []):
                schema = param.get("schema", {})
                if schema.get("type") == "integer" and param["in"] == "path":
                    found.append((method, path, param["name"]))
                    assert schema.get("maximum") == MAX_ROW_ID, (method, path, param)
                    assert schema.get("minimum") == 1, (method, path, param)
    assert len(found) >= len(ID_ROUTES), found
    after = [p for p in document["paths"]["/v1/me/events"]["get"]["parameters"] if p["name"] == "after"]
    assert after and (after[0]["schema"]["minimum"], after[0]["schema"]["maximum"]) == (0, MAX_ROW_ID)


class _Batch(BaseModel):
    since: int
    limit: int


class _RelayService:
    """Just enough of RelayService for the query parameters: every key is good."""

    limits = RelayLimits()

    async def authorize(self, _uid: str, _key: str | None) -> None:
        return None

    async def call(self, _uid: str, _what: str, since: int, limit: int, _now: float) -> _Batch:
        return _Batch(since=since, limit=limit)

    def now(self) -> float:
        return 0.0


async def test_the_relay_since_is_bounded() -> None:
    app = build_relay_app(_RelayService())  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://r",
                                 headers={"Authorization": "Bearer k"}) as client:
        top = await client.get("/s/abc", params={"since": MAX_ROW_ID, "limit": 5000})
        assert top.status_code == 200 and top.json() == {"since": MAX_ROW_ID, "limit": 1000}
        for bad in (OVER, "9" * 5000, "²", "-1", " 5", "x"):
            reply = await client.get("/s/abc", params={"since": bad})
            assert reply.status_code == 400, (bad, reply.text)
            assert reply.json()["error"]["code"] == "invalid_request", (bad, reply.text)


def test_plain_numbers_only() -> None:
    assert ascii_int("42") == 42 and ascii_int("007") == 7 and ascii_int(str(MAX_ROW_ID)) == MAX_ROW_ID
    for bad in (None, "", "²", "٣", "-1", "+1", " 1", "1_0", str(OVER), "9" * 5000):
        assert ascii_int(bad) is None, bad
    assert ascii_int("65535", 65535) == 65535 and ascii_int("65536", 65535) is None
    # A declared length: refused early only when it is a plain number over the cap.
    assert over_cap("1001", 1000) and over_cap("9" * 5000, 1000) and not over_cap("0" * 5000 + "1", 1000)
    assert not over_cap("1000", 1000) and not over_cap("²", 1000) and not over_cap(None, 1000)


def test_the_camera_socket_messages_bound_their_ids() -> None:
    top = parse_message(f'{{"type": "procedure", "id": {MAX_ROW_ID}}}')
    assert isinstance(top, UseProcedure) and top.id == MAX_ROW_ID
    cleared = parse_message('{"type": "procedure", "id": null}')
    assert isinstance(cleared, UseProcedure) and cleared.id is None
    assert isinstance(parse_message('{"type": "review", "file_id": 7}'), Review)
    for bad in (OVER, 0, -1):
        for text in (f'{{"type": "procedure", "id": {bad}}}', f'{{"type": "review", "file_id": {bad}}}'):
            refused = parse_message(text)
            assert isinstance(refused, ErrorInfo) and refused.code == "bad_message", text
