"""Notifications and calls through the real `iriis serve`, every channel a local server this
test starts (ntfy, the Telegram Bot API, a Web Push endpoint with the browser's own keys) plus a
paired desktop device on its socket: a call due now reaches ntfy within 15 s and answering it
dismisses the alert; a background turn whose client left is delivered on every channel;
Telegram messages become turns whose confirm-tier actions are declined."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from tests import scripted_openai as so
from tests.device_client import connected, hello, pair
from tests.notify_fakes import Browser, Recorder
from tests.sse import LiveChat
from tests.waiting import until

pytestmark = pytest.mark.e2e

KEY = "e2e-calls-owner-key"
PIN = "1357"
TOKEN = "31337:e2e-bot-token"
CHAT = "4242"
TOPIC = "iriis-e2e"
MCP_YAML = """
servers:
  builtin:
    tools: {save_note: confirm, notify_owner: auto}
"""


@pytest.fixture(scope="module")
def fakes() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def calls_server(scripted, fakes: Recorder, tmp_path_factory) -> Iterator:
    from tests.server_proc import ServerProcess, scripted_env, set_pin

    home = tmp_path_factory.mktemp("home-calls")
    proc = ServerProcess(home, scripted_env(
        home, scripted.base_url, KEY, MCP_YAML,
        IRIIS_NTFY_URL=fakes.url, IRIIS_NTFY_TOPIC=TOPIC, IRIIS_TELEGRAM_API=fakes.url,
        IRIIS_TELEGRAM_TOKEN=TOKEN, IRIIS_TELEGRAM_CHAT_ID=CHAT, IRIIS_PUBLIC_URL="",
        IRIIS_CALLS_INTERVAL="1", IRIIS_NOTIFY_INTERVAL="1")).start()
    set_pin(proc, PIN)
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def owner(calls_server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=calls_server.url, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


@pytest.fixture(scope="module")
def browser(owner: httpx.Client, fakes: Recorder) -> Browser:
    phone = Browser(f"{fakes.url}/push/phone")
    assert owner.get("/v1/push/key").json()["key"]
    assert owner.post("/v1/push/subscriptions", json=phone.subscription()).status_code == 201
    return phone


def ntfy_posts(fakes: Recorder, sequence_id: str | None = None) -> list:
    return [s for s in fakes.requests("POST", f"/{TOPIC}")
            if sequence_id is None or s.header("X-Sequence-ID") == sequence_id]


def test_a_call_due_now_reaches_ntfy_within_15_seconds_and_answering_dismisses_it(
        owner: httpx.Client, fakes: Recorder, browser: Browser, model) -> None:
    made = owner.post("/v1/calls", json={"at": time.time(), "reason": "Time for the stand-up"})
    assert made.status_code == 201
    call_id = str(made.json()["id"])
    [alert] = until(lambda: ntfy_posts(fakes, call_id), timeout=15,
                    describe=lambda: str(owner.get(f"/v1/calls/{call_id}").json()))
    assert alert.header("Priority") == "5" and alert.body == b"Time for the stand-up"
    assert alert.header("Click").endswith(f"/?call={call_id}")
    pushes = until(lambda: [browser.decrypt(s.body) for s in fakes.requests("POST", "/push/phone")
                            if browser.decrypt(s.body)["data"].get("call_id") == int(call_id)])
    assert pushes[0]["data"]["kind"] == "call"
    assert owner.get(f"/v1/calls/{call_id}").json()["status"] == "ringing"
    answered = owner.post(f"/v1/calls/{call_id}/answer").json()
    assert answered["mode"] == "answered" and answered["turn"] == "[call answered] Time for the stand-up"
    assert [(s.method, s.path) for s in fakes.requests(path=f"/{TOPIC}/{call_id}")] == [
        ("PUT", f"/{TOPIC}/{call_id}/clear"), ("DELETE", f"/{TOPIC}/{call_id}")]
    assert owner.get(f"/v1/calls/{call_id}").json()["status"] == "answered"


async def test_a_background_turn_whose_client_left_is_delivered_on_every_channel(
        calls_server, owner: httpx.Client, fakes: Recorder, browser: Browser, model) -> None:
    device_token = (await asyncio.to_thread(pair, calls_server.url, KEY, PIN, "linux"))["token"]
    device, _welcome = await connected(calls_server.url, device_token, hello("linux"))
    try:
        model.enqueue(so.text("The garden plan is ready. " + "More detail. " * 40 + "The end.", chunk_delay=0.1))

        def leave() -> str:
            turn = LiveChat(calls_server.url, KEY, {"message": "plan the garden", "background": True})
            sid = turn.wait_for("session")["session_id"]
            turn.wait_for("sentence")
            turn.disconnect()
            turn.join()
            return sid

        sid = await asyncio.to_thread(leave)

        def delivered() -> dict | None:
            rows = [o for o in owner.get("/v1/outbox").json()["data"]
                    if o["session_id"] == sid and o["kind"] == "turn_done"]
            return rows[0] if rows and rows[0]["status"] == "sent" else None

        row = await asyncio.to_thread(until, delivered, 60.0,
                                      lambda: str(owner.get("/v1/outbox").json()["data"][:2]))
        assert set(row["channels"].values()) == {"sent"}
        assert {k.split(":")[0] for k in row["channels"]} == {"push", "ntfy", "telegram", "desktop"}
        [alert] = [s for s in ntfy_posts(fakes) if s.header("Click") and sid in s.header("Click")]
        assert alert.body == b"The garden plan is ready."
        texts = [s.json()["text"] for s in fakes.requests("POST", f"/bot{TOKEN}/sendMessage")]
        assert any(t.startswith("Iriis finished\n\nThe garden plan is ready.") for t in texts)
        pushed = [browser.decrypt(s.body) for s in fakes.requests("POST", "/push/phone")]
        assert any(p["title"] == "Iriis finished" and p["data"]["kind"] == "turn_done" for p in pushed)
        frame = await device.recv_type("event", 30)
        assert frame["event"] == "turn_done" and frame["text"] == "The garden plan is ready."
    finally:
        await device.close()


def test_telegram_messages_are_turns_and_confirm_actions_are_declined(owner: httpx.Client, fakes: Recorder,
                                                                      model) -> None:
    model.enqueue(so.tools(("save_note", {"text": "buy seeds"})), so.text("I cannot save notes from here."))
    fakes.updates.put({"update_id": 501, "message": {"message_id": 1, "date": 0, "text": "save a note: buy seeds",
                                                     "chat": {"id": int(CHAT), "type": "private"}}})

    def replies() -> list[str]:
        return [s.json()["text"] for s in fakes.requests("POST", f"/bot{TOKEN}/sendMessage")
                if s.json()["chat_id"] == CHAT and "cannot save" in s.json()["text"]]

    assert until(replies, timeout=60) == ["I cannot save notes from here."]
    declined = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert "nobody can confirm" in declined[-1]["content"]
    sessions = owner.get("/v1/sessions").json()["data"]
    assert any(s["id"] == f"telegram-{CHAT}" for s in sessions)
    # Another chat: no turn, no answer. Updates are read in order, so once the owner's next
    # message is answered the stranger's, sent before it, has been read and let go.
    asked = len(model.requests)
    model.enqueue(so.text("Seeds are on the list."))
    fakes.updates.put({"update_id": 502, "message": {"message_id": 2, "date": 0, "text": "hi",
                                                     "chat": {"id": 999, "type": "private"}}})
    fakes.updates.put({"update_id": 503, "message": {"message_id": 3, "date": 0, "text": "and seeds?",
                                                     "chat": {"id": int(CHAT), "type": "private"}}})
    until(lambda: [s for s in fakes.requests("POST", f"/bot{TOKEN}/sendMessage")
                   if s.json()["text"] == "Seeds are on the list."], timeout=60)
    last_words = [str(r["body"]["messages"][-1].get("content")) for r in model.requests[asked:]]
    assert any(w.endswith("and seeds?") for w in last_words), last_words
    assert not any(w.endswith("hi") for w in last_words), last_words
    assert not [s for s in fakes.requests("POST", f"/bot{TOKEN}/sendMessage") if s.json()["chat_id"] == "999"]
