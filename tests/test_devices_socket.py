"""The device socket handler in-process, over a stand-in for its DeviceActor (no Ray, no server):
typed frames in and out keep the contract's JSON, error frames and close codes."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from actors.common.errors import ErrorInfo
from actors.devices import repository as repo
from actors.devices.frames import CallFrame, Close, EventFrame, Hello, ResultFrame
from actors.devices.grants import skill_split
from actors.devices.protocol import EventRate, ProtocolError, sanitize_event, welcome
from actors.devices.settings import DeviceLimits
from serve_apps.sockets import devices as socket_module
from serve_apps.sockets.places import CLOSE_TRY_LATER, NoRoom
from serve_apps.http.app import API_PREFIX

LIMITS = DeviceLimits()
DEVICE = repo.Device(id=3, person_id=1, kind="mac", label="Desk", skills=["files"], reported=[], created=0.0,
                     last_seen=None, revoked=None)
TOKEN = "irad_" + "x" * 43


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> Any:
        result = self.fn(*args)
        if asyncio.iscoroutine(result):
            return result

        async def done() -> Any:
            return result
        return done()


class FakeDeviceActor:
    """What the socket needs of a DeviceActor, with the same typed arguments and replies."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] | None = None
        self.hellos: list[Hello] = []
        self.results: list[ResultFrame] = []
        self.rate = EventRate(LIMITS.event_seconds)
        for name in ("connect", "rehello", "take", "result", "event", "disconnect"):
            setattr(self, name, _Method(getattr(self, "_" + name)))

    async def _connect(self, conn_id: str, hello: Hello, device: dict[str, Any]) -> Any:
        assert isinstance(hello, Hello)
        self.queue = asyncio.Queue()
        self.hellos.append(hello)
        return welcome(device["id"], hello.label or device["label"], skill_split(hello, device["skills"])[0],
                       "Iriis", LIMITS)

    async def _rehello(self, conn_id: str, hello: Hello) -> Any:
        self.hellos.append(hello)
        return welcome(DEVICE.id, hello.label, skill_split(hello, DEVICE.skills)[0], "Iriis", LIMITS)

    async def _take(self, conn_id: str, timeout: float) -> list[Any]:
        assert self.queue is not None
        try:
            return [await asyncio.wait_for(self.queue.get(), timeout)]
        except asyncio.TimeoutError:
            return []

    def _result(self, conn_id: str, frame: ResultFrame) -> ErrorInfo | None:
        assert isinstance(frame, ResultFrame)
        self.results.append(frame)
        return None if frame.id == "c1" else ErrorInfo(code="no_such_call", message="no call is waiting")

    async def _event(self, conn_id: str, frame: EventFrame) -> ErrorInfo | None:
        try:
            sanitize_event(frame, LIMITS)
        except ProtocolError as exc:
            return ErrorInfo(code="bad_event", message=str(exc))
        return self.rate.refusal(asyncio.get_running_loop().time())

    async def _disconnect(self, conn_id: str) -> None:
        return None


class Places:
    """Stands in for the registry's places under the cap (serve_apps/sockets/places.py): the
    keys held now, or NoRoom when `full`."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.full = False

    @contextlib.asynccontextmanager
    async def __call__(self, _gw: Any, key: str) -> Any:
        if self.full:
            raise NoRoom(5)
        self.held.append(key)
        try:
            yield
        finally:
            self.held.remove(key)


@pytest.fixture
def socket_app(monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, FakeDeviceActor, list[int]]:
    actor = FakeDeviceActor()
    revoked: list[int] = []

    async def by_token(_store: Any, token: str) -> repo.Device | None:
        return DEVICE if token == TOKEN else None

    async def revoke(_store: Any, device_id: int, _who: str) -> bool:
        revoked.append(device_id)
        return True

    monkeypatch.setattr(socket_module.repo, "device_by_token", by_token)
    monkeypatch.setattr(socket_module.repo, "revoke", revoke)
    monkeypatch.setattr(socket_module, "device_limits", lambda: LIMITS)
    monkeypatch.setattr(socket_module, "device_actor", lambda *_a: actor)
    monkeypatch.setattr(socket_module, "place", Places())
    app = FastAPI()
    app.include_router(socket_module.router, prefix=API_PREFIX)

    class _Gateway:
        store = None

        class config:  # noqa: N801 - stands in for the gateway's settings object
            database_url = "sqlite://"

            class session:  # noqa: N801 - no placement preference (one machine)
                prefer_resource = ""

    app.state.gateway = _Gateway()
    return TestClient(app), actor, revoked


def _hello(**extra: Any) -> str:
    return json.dumps({"type": "hello", "kind": "mac", "label": "Test box", "tools": [
        {"name": "files_read", "description": "d", "parameters": {"type": "object"}},
        {"name": "clip_read", "description": "d", "parameters": {"type": "object"}, "skill": "clipboard"}],
        **extra})


def _closed_with(ws: Any) -> int:
    with pytest.raises(WebSocketDisconnect) as caught:
        while True:
            ws.receive_json()
    return caught.value.code


def test_a_hello_is_welcomed_with_the_contracts_json(socket_app) -> None:
    client, actor, _ = socket_app
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        assert ws.receive_json() == {"type": "welcome", "deviceId": 3, "label": "Test box", "skills": ["files"],
                                     "assistant": "Iriis", "wakePhrase": "Hey Iriis", "maxTools": 40}
        assert [t.name for t in actor.hellos[0].tools] == ["files_read", "clip_read"]
        ws.send_text('{"type": "ping"}')
        assert ws.receive_json() == {"type": "pong"}
        assert actor.queue is not None
        actor.queue.put_nowait(CallFrame(id="c1", tool="files_read", args={"path": "a"}, here=False))
        assert ws.receive_json() == {"type": "call", "id": "c1", "tool": "files_read", "args": {"path": "a"},
                                     "here": False}
        ws.send_text('{"type": "result", "id": "c1", "ok": true, "content": "x"}')
        ws.send_text('{"type": "result", "id": "c9", "ok": true}')
        assert ws.receive_json() == {"type": "error", "error": "no call is waiting"}
        assert [(r.id, r.ok, r.content) for r in actor.results] == [("c1", True, "x"), ("c9", True, None)]


def test_broken_frames_get_error_frames_without_closing(socket_app) -> None:
    client, _, _ = socket_app
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        ws.receive_json()
        ws.send_text("not json")
        assert ws.receive_json() == {"type": "error", "error": "a frame must be one JSON object"}
        ws.send_text('{"type": "sing"}')
        assert ws.receive_json() == {"type": "error", "error": "unknown frame type 'sing'"}
        ws.send_text('{"type": "event", "event": "party"}')
        assert "event must be one of" in ws.receive_json()["error"]
        ws.send_text('{"type": "event", "event": "task_done", "title": "one"}')
        ws.send_text('{"type": "event", "event": "task_done", "title": "two"}')
        assert "one event per 30 s" in ws.receive_json()["error"]
        ws.send_text('{"type": "ping"}')
        assert ws.receive_json() == {"type": "pong"}


def test_a_bad_second_hello_closes_4400_and_a_good_one_is_welcomed_again(socket_app) -> None:
    client, _, _ = socket_app
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        ws.receive_json()
        ws.send_text(_hello(label="Renamed"))
        assert ws.receive_json()["label"] == "Renamed"
        ws.send_text(_hello(kind="android"))
        assert ws.receive_json() == {"type": "error", "error": "this device was paired as 'mac', not 'android'"}
        assert _closed_with(ws) == 4400


@pytest.mark.parametrize(("first", "says"), [
    ('{"type": "result", "id": "x", "ok": true}', "the first frame must be a hello (or a bye)"),
    ('{"type": "event", "event": "party"}', "the first frame must be a hello (or a bye)"),
    ("hello?", "a frame must be one JSON object"),
    (json.dumps({"type": "hello", "kind": "mac", "tools": [{"name": "ab", "description": "d",
                                                            "parameters": {"type": "object"}}]}), "must match"),
])
def test_a_first_frame_that_is_not_a_good_hello_closes_4400(socket_app, first: str, says: str) -> None:
    client, _, _ = socket_app
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(first)
        frame = ws.receive_json()
        assert frame["type"] == "error" and says in frame["error"]
        assert _closed_with(ws) == 4400


def test_closes_the_actor_asks_for_and_the_socket_enforces(socket_app) -> None:
    client, actor, revoked = socket_app
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        ws.receive_json()
        assert actor.queue is not None
        actor.queue.put_nowait(Close(code=4000, reason="replaced"))
        assert _closed_with(ws) == 4000
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        ws.receive_json()
        ws.send_text(json.dumps({"type": "ping", "pad": "x" * LIMITS.max_frame_bytes}))
        assert _closed_with(ws) == 1009
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text('{"type": "bye"}')
        assert _closed_with(ws) == 1000 and revoked == [3]
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": "Bearer irad_wrong"}) as ws:
        assert ws.receive_json()["type"] == "error"
        assert _closed_with(ws) == 4401


def test_a_device_holds_a_place_while_connected_and_gets_1013_when_none_is_free(socket_app) -> None:
    client, _actor, _ = socket_app
    places = socket_module.place
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        assert ws.receive_json()["type"] == "welcome"
        assert places.held == [f"device:{DEVICE.id}"]
    assert places.held == []
    places.full = True
    with client.websocket_connect("/v1/devices/ws", headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send_text(_hello())
        error = ws.receive_json()
        assert error["type"] == "error" and "retry in 5 s" in error["error"]
        assert _closed_with(ws) == CLOSE_TRY_LATER
