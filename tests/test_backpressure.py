"""Backpressure through the real server: with the gateway's limit lowered to two requests in
flight, a third is answered at once with 503, Retry-After and the documented error shape (not
left hanging), the liveness probe still answers, and once the long replies finish everything
works again with nothing lost. Also the limiter itself, in-process."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.session.start_queue import SessionsBusy
from serve_apps.deployments.backpressure import Backpressure, InFlight, serve_limits
from tests.scripted_openai import ScriptedOpenAI, text
from tests.server_proc import ServerProcess
from tests.sse import LiveChat

KEY = "backpressure-owner-key"
LIMIT = 2
RETRY_AFTER = 3


# -- the limiter, in-process -----------------------------------------------------------------

def test_in_flight_counts_at_under_and_over_the_limit() -> None:
    gate = InFlight(2)
    assert gate.enter() and gate.enter()          # under, then at the limit
    assert not gate.enter() and gate.rejected == 1  # over
    gate.leave()
    assert gate.enter()
    assert serve_limits(2)["max_ongoing_requests"] > 2  # Serve's own limit stays above ours


async def test_middleware_answers_503_in_the_error_shape_and_passes_sockets() -> None:
    release = asyncio.Event()

    async def app(scope, receive, send):
        if scope["type"] == "http":
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

    gate = InFlight(1)
    middleware = Backpressure(app, gate, retry_after=RETRY_AFTER)
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    first = asyncio.create_task(middleware({"type": "http", "path": "/v1/sessions"}, None, send))
    await asyncio.sleep(0)
    await middleware({"type": "http", "path": "/v1/sessions"}, None, send)
    start, body = sent[0], sent[1]
    assert start["status"] == 503
    assert (b"retry-after", str(RETRY_AFTER).encode()) in start["headers"]
    assert json.loads(body["body"])["error"]["code"] == "overloaded"
    # WebSockets and the liveness probe are never counted or refused.
    await middleware({"type": "websocket", "path": "/v1/devices/socket"}, None, send)
    release.set()
    await middleware({"type": "http", "path": "/healthz"}, None, send)
    await first
    assert gate.count == 0


# -- through the real server -----------------------------------------------------------------

def scripted_server(factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[tuple[ServerProcess, ScriptedOpenAI]]:
    """A server on SQLite whose chat model is a scripted one, with `env` on top."""
    scripted = ScriptedOpenAI().start()
    home: Path = factory.mktemp(name)
    (home / "mcp.yaml").write_text("servers:\n  builtin: {}\n")
    proc = ServerProcess(home, {
        "IRIIS_MCP_CONFIG": str(home / "mcp.yaml"), "OPENAI_BASE_URL": scripted.base_url,
        "OPENAI_API_KEY": "sk-scripted", "IRIIS_CHAT_MODEL": "scripted-model", "IRIIS_OWNER_KEYS": KEY, **env,
    }).start()
    yield proc, scripted
    proc.kill()
    scripted.stop()


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ScriptedOpenAI]]:
    yield from scripted_server(tmp_path_factory, "home-backpressure", IRIIS_GATEWAY_MAX_ONGOING=str(LIMIT),
                               IRIIS_RETRY_AFTER_SECONDS=str(RETRY_AFTER), IRIIS_SESSION_SPARES="1")


@pytest.mark.e2e
def test_over_the_limit_is_503_with_retry_after_not_a_hang(busy_server) -> None:
    proc, scripted = busy_server
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=proc.url, headers=headers, timeout=30) as client:
        assert client.get("/v1/sessions").status_code == 200
        # Two replies that take a while to start: each holds one of the two places.
        scripted.enqueue(text("First slow answer.", ttft=8.0), text("Second slow answer.", ttft=8.0))
        first = LiveChat(proc.url, KEY, {"message": "one"})
        first.wait_for("session")
        # Under and at the limit: one stream in flight, this request is the second.
        assert client.get("/v1/sessions").status_code == 200
        second = LiveChat(proc.url, KEY, {"message": "two"})
        second.wait_for("session")

        over = client.get("/v1/sessions")
        assert over.status_code == 503, over.text
        assert over.headers["retry-after"] == str(RETRY_AFTER)
        assert over.json()["error"]["code"] == "overloaded"
        # Refused while both places were held, not queued until the slow replies let one go.
        assert not [e for e, _ in first.events + second.events if e in ("sentence", "done")], "refused late"
        assert client.get("/healthz").status_code == 200

        ends = [first.wait_for("done", timeout=60), second.wait_for("done", timeout=60)]
        assert sorted(e["text"] for e in ends) == ["First slow answer.", "Second slow answer."]
        first.join()
        second.join()
        # Back under the limit: served again, and both replies were kept.
        sessions = client.get("/v1/sessions")
        assert sessions.status_code == 200
        assert sessions.json()["count"] >= 2


# -- a burst of new conversations with no spare ------------------------------------------------

BURST = 4


@pytest.fixture(scope="module")
def burst_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ScriptedOpenAI]]:
    # No warm spare, one process start at a time, and a bound shorter than any start: a
    # burst's first conversation starts at once and the ones behind it are sent away.
    yield from scripted_server(tmp_path_factory, "home-burst", IRIIS_SESSION_SPARES="0",
                               IRIIS_SESSION_COLD_STARTS="1", IRIIS_SESSION_START_WAIT="0.5")


async def new_chat(client: httpx.AsyncClient, message: str) -> tuple[int, dict[str, str], list[tuple[str, dict]]]:
    async with client.stream("POST", "/v1/chat", json={"message": message}) as resp:
        if resp.status_code != 200:
            return resp.status_code, dict(resp.headers), [("body", json.loads(await resp.aread()))]
        events, event = [], "message"
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                events.append((event, json.loads(line[5:])))
        return 200, dict(resp.headers), events


@pytest.mark.e2e
async def test_a_burst_past_the_start_wait_is_told_when_to_come_back_and_then_served(burst_server) -> None:
    proc, scripted = burst_server
    scripted.enqueue(*(text(f"Answer {i}.") for i in range(BURST)))
    async with httpx.AsyncClient(base_url=proc.url, timeout=120, headers={"Authorization": f"Bearer {KEY}"}) as client:
        answers = await asyncio.gather(*(new_chat(client, f"burst {i}") for i in range(BURST)))
        served = [events for status, _, events in answers if status == 200]
        refused = [(i, headers, events) for i, (status, headers, events) in enumerate(answers) if status == 503]
        assert len(served) + len(refused) == BURST, [a[0] for a in answers]
        assert served and refused, "the first starts at once; the ones queued behind it are sent away"
        for _, headers, [(_, body)] in refused:
            assert 1 <= int(headers["retry-after"]) <= 60
            assert body["error"]["code"] == "overloaded"
            assert body["error"]["message"] == str(SessionsBusy(int(headers["retry-after"])))
        # A client that comes back when told is served (it may be told to wait once more).
        for i, headers, _ in refused:
            for _attempt in range(10):
                await asyncio.sleep(int(headers["retry-after"]))
                status, headers, events = await new_chat(client, f"burst {i}")
                if status == 200:
                    served.append(events)
                    break
                assert status == 503
            else:
                raise AssertionError(f"burst {i} was never served")
        assert all(events[-1][0] == "done" for events in served)
        assert sorted(events[-1][1]["text"] for events in served) == [f"Answer {i}." for i in range(BURST)]
        # The owner sees the pool: every conversation has its actor, nobody waits, and the
        # starts were measured (the estimate the refusals came from).
        pool = (await client.get("/v1/pool")).json()
        assert pool["live"] >= BURST and pool["queued"] == 0 and pool["spare"] == 0
        assert pool["cold_starts"] == 1 and pool["start_wait_seconds"] == 0.5
        assert pool["start_seconds"] > 0 and pool["wait_seconds_now"] == pool["start_seconds"]
        assert (await client.get("/v1/pool", headers={"Authorization": "Bearer wrong"})).status_code == 401
        # Nothing refused was half-kept: exactly one conversation per message, each complete.
        sessions = (await client.get("/v1/sessions")).json()["data"]
        assert len(sessions) == BURST
        for session in sessions:
            rows = (await client.get(f"/v1/sessions/{session['id']}/messages")).json()["data"]
            assert [r["role"] for r in rows] == ["user", "assistant"]


async def voice_open(url: str) -> tuple[str, Any]:
    """('ready', session_id) or ('closed', (code, reason)) for one new voice conversation."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    async with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        try:
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 120))
                if message["type"] == "ready":
                    return "ready", message["session_id"]
        except ConnectionClosed as closed:
            return "closed", (closed.rcvd.code, closed.rcvd.reason) if closed.rcvd else (None, "")


@pytest.mark.e2e
async def test_a_voice_burst_past_the_start_wait_closes_1013_try_again_later(burst_server) -> None:
    proc, _ = burst_server
    url = proc.url.replace("http://", "ws://") + "/v1/voice/ws"
    opened = await asyncio.gather(*(voice_open(url) for _ in range(BURST)))
    ready = [sid for kind, sid in opened if kind == "ready"]
    busy = [how for kind, how in opened if kind == "closed"]
    assert len(ready) + len(busy) == BURST and ready and busy, opened
    for code, reason in busy:
        assert code == 1013 and re.fullmatch(r"Too many new conversations .*; try again in \d+ s\.", reason), (code, reason)
