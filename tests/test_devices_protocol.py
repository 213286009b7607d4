"""The device protocol, driven through a real `iriis serve` with a raw WebSocket client: every
rule and limit of the hello, the socket limits with their close codes, pairing and tokens.

The time-based limits are shortened for this server through IRIIS_DEVICE_*; their defaults
(the spec's numbers) are checked in test_devices_logic.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import HELLO_S, OWNER_KEY, OWNER_PIN, PING_S, SILENCE_S
from tests.device_client import connected, hello, open_device, pair, tool

pytestmark = pytest.mark.e2e

MB = 1_048_576


def db(server) -> sqlite3.Connection:
    return sqlite3.connect(Path(server.home) / "iriis.sqlite3", timeout=10)


def owner() -> dict[str, str]:
    return {"Authorization": f"Bearer {OWNER_KEY}"}


# -- pairing and tokens ---------------------------------------------------------------------------

def test_a_pairing_code_needs_the_pin_and_works_once(device_server) -> None:
    with httpx.Client(base_url=device_server.url, timeout=60) as client:
        body = {"kind": "mac", "label": "Office Mac", "skills": ["files"]}
        assert client.post("/v1/me/devices/codes", json=body, headers=owner()).json()["error"]["code"] == "pin_required"
        wrong = client.post("/v1/me/devices/codes", json={**body, "pin": "0000"}, headers=owner())
        assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "wrong_pin"
        made = client.post("/v1/me/devices/codes", json={**body, "pin": OWNER_PIN}, headers=owner())
        assert made.status_code == 201
        code = made.json()["code"]
        assert re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}", code)
        assert made.json()["link"].endswith("/pair#code=" + code.replace("-", ""))
        assert base64.b64decode(made.json()["qr_png"])[:8] == b"\x89PNG\r\n\x1a\n"
        stored = db(device_server).execute("SELECT code_hash FROM pairing_codes").fetchall()
        assert code not in json.dumps(stored) and code.replace("-", "") not in json.dumps(stored)

        paired = client.post("/v1/devices/pair", json={"code": code, "kind": "mac"})
        assert paired.status_code == 200
        out = paired.json()
        assert set(out) == {"device_id", "token", "kind", "label", "skills", "name", "websocket"}
        assert out["kind"] == "mac" and out["label"] == "Office Mac" and out["skills"] == ["files"]
        assert out["websocket"] == "/v1/devices/ws"
        assert out["token"].startswith("irad_") and len(base64.urlsafe_b64decode(out["token"][5:] + "=")) == 32
        tokens = db(device_server).execute("SELECT token_hash FROM devices").fetchall()
        assert out["token"] not in json.dumps(tokens)

        again = client.post("/v1/devices/pair", json={"code": code, "kind": "mac"})
        assert again.status_code == 410 and again.json()["error"]["code"] == "code_gone"


def test_an_expired_or_unknown_code_is_gone(device_server) -> None:
    with httpx.Client(base_url=device_server.url, timeout=60) as client:
        made = client.post("/v1/me/devices/codes", headers=owner(),
                           json={"kind": "linux", "label": "x", "pin": OWNER_PIN}).json()
        with db(device_server) as conn:
            conn.execute("UPDATE pairing_codes SET expires = ?", (time.time() - 1,))
        assert client.post("/v1/devices/pair", json={"code": made["code"], "kind": "linux"}).status_code == 410
        assert client.post("/v1/devices/pair", json={"code": "ABCD-EFGH", "kind": "linux"}).status_code == 410
    _clear_failures(device_server)


def _clear_failures(server) -> None:
    with db(server) as conn:
        conn.execute("DELETE FROM pair_failures")


def test_five_wrong_codes_from_one_address_give_429(device_server) -> None:
    _clear_failures(device_server)
    with httpx.Client(base_url=device_server.url, timeout=60) as client:
        good = client.post("/v1/me/devices/codes", headers=owner(),
                           json={"kind": "linux", "label": "x", "pin": OWNER_PIN}).json()["code"]
        for _ in range(5):
            assert client.post("/v1/devices/pair", json={"code": "WXYZ-2345", "kind": "linux"}).status_code == 410
        blocked = client.post("/v1/devices/pair", json={"code": good, "kind": "linux"})
        assert blocked.status_code == 429 and blocked.json()["error"]["code"] == "too_many_attempts"
        # Blocked for the whole window (15 minutes by default), counted from the fifth miss.
        assert 890 <= int(blocked.headers["Retry-After"]) <= 900
        _clear_failures(device_server)
        assert client.post("/v1/devices/pair", json={"code": good, "kind": "linux"}).status_code == 200


def test_four_wrong_codes_do_not_block(device_server) -> None:
    _clear_failures(device_server)
    with httpx.Client(base_url=device_server.url, timeout=60) as client:
        for _ in range(4):
            assert client.post("/v1/devices/pair", json={"code": "WXYZ-2345", "kind": "linux"}).status_code == 410
        good = client.post("/v1/me/devices/codes", headers=owner(),
                           json={"kind": "linux", "label": "x", "pin": OWNER_PIN}).json()["code"]
        assert client.post("/v1/devices/pair", json={"code": good, "kind": "linux"}).status_code == 200
    _clear_failures(device_server)


def test_a_device_token_is_refused_wherever_a_signed_in_person_is_needed(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=device_server.url, timeout=60) as client:
        for method, path in [("GET", "/v1/sessions"), ("GET", "/v1/me/devices"), ("GET", "/v1/audit"),
                             ("POST", "/v1/me/devices/codes"), ("GET", "/v1/me/events"),
                             ("GET", "/v1/me/events/stream"), ("GET", "/v1/admin/devices"), ("GET", "/v1/memory")]:
            response = client.request(method, path, headers=device,
                                      json={"kind": "linux", "label": "x", "pin": OWNER_PIN})
            assert response.status_code == 403, (path, response.text)
            assert response.json()["error"]["code"] == "forbidden"
        # As ?token= too.
        assert client.get(f"/v1/sessions?token={token}").status_code == 403


async def test_owner_keys_and_no_token_do_not_open_the_device_socket(device_server) -> None:
    for token in (OWNER_KEY, None, "irad_" + "x" * 43):
        device = await open_device(device_server.url, token)
        code, frames = await device.closed()
        assert code == 4401 and frames[0]["type"] == "error"


async def test_hello_gets_a_welcome_with_max_tools(device_server) -> None:
    paired = pair(device_server.url, OWNER_KEY, OWNER_PIN, label="Desk")
    device, welcome = await connected(device_server.url, paired["token"], hello(
        tools=[tool("files_read"), tool("clip_read", skill="clipboard")]))
    assert welcome == {"type": "welcome", "deviceId": paired["device_id"], "label": "Test box",
                       "skills": ["files"], "assistant": "Iriis", "wakePhrase": "Hey Iriis", "maxTools": 40}
    await device.close()


async def test_the_token_works_as_a_query_parameter(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device = await open_device(device_server.url, token, header=False)
    await device.send(hello())
    assert (await device.recv_type("welcome"))["maxTools"] == 40
    await device.close()


def _params(size: int) -> dict:
    base = {"type": "object", "properties": {"p": {"type": "string", "description": ""}}}
    pad = size - len(json.dumps(base, separators=(",", ":")).encode())
    base["properties"]["p"]["description"] = "x" * pad
    assert len(json.dumps(base, separators=(",", ":")).encode()) == size
    return base


GOOD_HELLOS = {
    "40 tools": hello(tools=[tool(f"files_t{i:02d}") for i in range(40)]),
    "parameters of 8192 bytes": hello(tools=[tool("files_big", params=_params(8192))]),
    "a 41-character name": hello(tools=[tool("f" + "a" * 40)]),
    "a 3-character name": hello(tools=[tool("abc")]),
    "no tier (tier 2)": hello(tools=[tool("files_x", tier=None)]),
}

BAD_HELLOS = {
    "41 tools": hello(tools=[tool(f"files_t{i:02d}") for i in range(41)]),
    "parameters of 8193 bytes": hello(tools=[tool("files_big", params=_params(8193))]),
    "a 42-character name": hello(tools=[tool("f" + "a" * 41)]),
    "a 2-character name": hello(tools=[tool("ab")]),
    "an upper-case name": hello(tools=[tool("Files_read")]),
    "tier 4": hello(tools=[tool("files_read", tier=4)]),
    "tier -1": hello(tools=[tool("files_read", tier=-1)]),
    "parameters not an object schema": hello(tools=[tool("files_read", params={"type": "string"})]),
    "no description": hello(tools=[{"name": "files_read", "parameters": {"type": "object"}}]),
    "the wrong kind": hello(kind="android"),
    "duplicate names": hello(tools=[tool("files_read"), tool("files_read")]),
    "a call before hello": {"type": "result", "id": "x", "ok": True},
    "not JSON": "hello?",
}


@pytest.mark.parametrize("name", list(GOOD_HELLOS))
async def test_hellos_at_the_limits_are_welcome(device_server, name: str) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device, welcome = await connected(device_server.url, token, GOOD_HELLOS[name])
    assert welcome["type"] == "welcome"
    await device.close()


@pytest.mark.parametrize("name", list(BAD_HELLOS))
async def test_a_hello_that_breaks_a_rule_gets_an_error_and_4400(device_server, name: str) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device = await open_device(device_server.url, token)
    await device.send(BAD_HELLOS[name])
    code, frames = await device.closed()
    assert code == 4400
    assert frames and frames[0]["type"] == "error" and frames[0]["error"]


async def test_no_hello_in_time_closes_4400(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device = await open_device(device_server.url, token)
    code, frames = await device.closed(timeout=HELLO_S + 15)
    assert code == 4400 and frames[0]["type"] == "error"


# -- the socket's limits --------------------------------------------------------------------------

def _ping_of(size: int) -> str:
    text = json.dumps({"type": "ping", "pad": ""})
    return json.dumps({"type": "ping", "pad": "x" * (size - len(text))})


async def test_a_frame_of_exactly_1mb_is_read_and_one_byte_more_closes_1009(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device, _ = await connected(device_server.url, token)
    frame = _ping_of(MB)
    assert len(frame.encode()) == MB
    await device.send(frame)
    assert (await device.recv_type("pong"))["type"] == "pong"
    await device.send(_ping_of(MB + 1))
    code, _ = await device.closed()
    assert code == 1009


async def test_pings_both_ways(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device, _ = await connected(device_server.url, token)
    await device.send({"type": "ping"})
    assert (await device.recv_type("pong"))["type"] == "pong"
    # The server pings too (every IRIIS_DEVICE_PING_SECONDS; 30 s by default).
    assert (await device.recv(timeout=PING_S + 10, skip_pings=False))["type"] == "ping"
    await device.close()


async def test_silence_closes_4408_and_answering_pings_keeps_it_open(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    talker, _ = await connected(device_server.url, token)
    quiet_token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    quiet, _ = await connected(device_server.url, quiet_token, answer_pings=False)
    started = time.monotonic()
    # The quiet one reads but never answers; the talker answers every ping.
    async def read_only() -> int | None:
        from websockets.exceptions import ConnectionClosed
        try:
            while True:
                await quiet.ws.recv()
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd else None
    async def answer_pings() -> None:
        while True:
            await talker.recv(timeout=60)  # answers each ping with a pong

    answering = asyncio.create_task(answer_pings())
    code = await asyncio.wait_for(read_only(), SILENCE_S + 60)
    assert code == 4408
    assert time.monotonic() - started >= SILENCE_S - 0.5
    # The talker outlives the silence limit because it answers pings.
    deadline = started + 2 * SILENCE_S
    while time.monotonic() < deadline:
        assert not answering.done(), answering.exception()
        await asyncio.sleep(0.2)
    answering.cancel()
    await asyncio.gather(answering, return_exceptions=True)
    await talker.send({"type": "ping"})
    assert (await talker.recv_type("pong"))["type"] == "pong"
    await talker.close()


async def test_a_second_connection_replaces_the_first_with_4000(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    first, _ = await connected(device_server.url, token)
    second, welcome = await connected(device_server.url, token)
    code, _ = await first.closed()
    assert code == 4000
    await second.send({"type": "ping"})
    assert (await second.recv_type("pong"))["type"] == "pong"
    await second.close()


async def test_events_one_per_window_per_device(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device, _ = await connected(device_server.url, token)
    await device.send({"type": "event", "event": "task_done", "title": "first", "text": "ok"})
    await device.send({"type": "event", "event": "task_done", "title": "second", "text": "too soon"})
    refused = await device.recv_type("error")
    assert "one event per" in refused["error"]
    await device.send({"type": "event", "event": "unknown_kind", "title": "x"})
    assert "event must be one of" in (await device.recv_type("error"))["error"]
    await device.close()


async def test_bye_revokes_the_token(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device = await open_device(device_server.url, token)
    await device.send({"type": "bye"})
    code, _ = await device.closed()
    assert code == 1000
    again = await open_device(device_server.url, token)
    assert (await again.closed())[0] == 4401


async def test_revoking_closes_4403_and_stops_the_token(device_server) -> None:
    paired = pair(device_server.url, OWNER_KEY, OWNER_PIN)
    device, _ = await connected(device_server.url, paired["token"])
    async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
        gone = await client.delete(f"/v1/me/devices/{paired['device_id']}", headers=owner())
        assert gone.status_code == 200 and gone.json()["revoked"] is True
        code, _ = await device.closed()
        assert code == 4403
        ask = await client.post("/v1/ask", json={"message": "hi"},
                                headers={"Authorization": f"Bearer {paired['token']}"})
        assert ask.status_code == 401
    again = await open_device(device_server.url, paired["token"])
    assert (await again.closed())[0] == 4401


async def test_an_admin_revokes_any_device(device_server) -> None:
    paired = pair(device_server.url, OWNER_KEY, OWNER_PIN)
    device, _ = await connected(device_server.url, paired["token"])
    async with httpx.AsyncClient(base_url=device_server.url, timeout=60) as client:
        gone = await client.delete(f"/v1/admin/devices/{paired['device_id']}", headers=owner())
        assert gone.status_code == 200
    assert (await device.closed())[0] == 4403


async def test_unknown_frames_and_bad_json_get_error_frames_without_closing(device_server) -> None:
    token = pair(device_server.url, OWNER_KEY, OWNER_PIN)["token"]
    device, _ = await connected(device_server.url, token)
    await device.send("{not json")
    assert (await device.recv_type("error"))["error"]
    await device.send({"type": "dance"})
    assert "unknown frame type" in (await device.recv_type("error"))["error"]
    await device.send({"type": "result", "id": "nope", "ok": True, "content": {}})
    assert (await device.recv_type("error"))["error"]
    await device.send({"type": "ping"})
    assert (await device.recv_type("pong"))["type"] == "pong"
    await device.close()


# -- last of the device server's group: it stops the shared server ------------------------------


@pytest.mark.last_in_group
async def test_a_restart_closes_every_device_with_1001(device_server) -> None:
    first = pair(device_server.url, OWNER_KEY, OWNER_PIN)
    second = pair(device_server.url, OWNER_KEY, OWNER_PIN)
    a, _ = await connected(device_server.url, first["token"])
    # Each device answers pings from the moment it is connected: on a loaded machine the
    # second one's actor can take longer to start than the silence limit (4408 for the first).
    a_closed = asyncio.create_task(a.closed(timeout=120))
    b, _ = await connected(device_server.url, second["token"])
    b_closed = asyncio.create_task(b.closed(timeout=120))
    stopping = asyncio.create_task(asyncio.to_thread(device_server.stop))
    codes = await asyncio.gather(a_closed, b_closed)
    await stopping
    assert [c for c, _ in codes] == [1001, 1001]
