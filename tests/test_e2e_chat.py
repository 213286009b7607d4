"""End to end through the real `iriis serve` process: HTTP, SSE, Serve, the actors, PostgreSQL."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY, SECOND_KEY
from tests.sse import LiveChat, chat, iter_events

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {OWNER_KEY}"}


@pytest.fixture
def client(server, model) -> httpx.Client:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def kinds(events):
    return [e for e, _ in events]


def test_health_needs_no_key(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}


def test_reply_streams_sentence_by_sentence_and_is_stored(client, model) -> None:
    model.enqueue(so.text("The sky is blue. Grass is green. Snow is white.", chunk_delay=0.01))
    events = chat(client, OWNER_KEY, "Tell me three colours.")
    assert kinds(events) == ["session", "sentence", "sentence", "sentence", "done"]
    session_id = events[0][1]["session_id"]
    assert [d["text"] for e, d in events if e == "sentence"] == [
        "The sky is blue.", "Grass is green.", "Snow is white."]
    done = events[-1][1]
    assert done["session_id"] == session_id and done["message_id"]

    stored = client.get(f"/v1/sessions/{session_id}/messages", headers=AUTH).json()
    assert [(m["role"], m["content"]) for m in stored["data"]] == [
        ("user", "Tell me three colours."),
        ("assistant", "The sky is blue. Grass is green. Snow is white.")]
    assert stored["data"][1]["id"] == done["message_id"]
    # The provider's key travelled stripped of its trailing newline.
    assert model.requests[-1]["headers"]["authorization"] == "Bearer sk-scripted-provider-key"


def test_second_turn_sees_the_first(client, model) -> None:
    model.enqueue(so.text("Nice to meet you, Ada."), so.text("Your name is Ada."))
    first = chat(client, OWNER_KEY, "My name is Ada.")
    sid = first[0][1]["session_id"]
    second = chat(client, OWNER_KEY, "What is my name?", session_id=sid)
    assert second[0][1]["session_id"] == sid
    sent = model.requests[-1]["body"]["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [
        "My name is Ada.", "Nice to meet you, Ada.", "What is my name?"]


def test_tool_calls_show_as_tool_events(client, model) -> None:
    model.enqueue(so.tools(("calculate", {"expression": "21*2"})), so.text("The answer is 42."))
    events = chat(client, OWNER_KEY, "what is 21*2")
    tools = [d for e, d in events if e == "tool"]
    assert [(t["name"], t["status"]) for t in tools] == [("calculate", "start"), ("calculate", "done")]
    assert tools[1]["result"] == "42"
    assert [d["text"] for e, d in events if e == "sentence"] == ["The answer is 42."]


def test_markup_tool_calls_never_reach_the_client(client, model) -> None:
    model.enqueue(so.text('One moment. <tool_call>{"name": "calculate", "arguments": {"expression": "3+4"}}</tool_call>'),
                  so.text("Seven."))
    events = chat(client, OWNER_KEY, "3+4?")
    body = "".join(str(d) for _, d in events)
    assert "<tool_call>" not in body and "One moment." in body and "Seven." in body


def test_every_owner_key_and_every_way_of_sending_it_works(client, model) -> None:
    assert client.get("/v1/auth/check").status_code == 401
    assert client.get("/v1/auth/check", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/v1/auth/check", headers={"Authorization": f"Bearer {SECOND_KEY}"}).status_code == 200
    assert client.get(f"/v1/auth/check?token={OWNER_KEY}").status_code == 200
    resp = client.post("/v1/auth/cookie", headers=AUTH)
    assert resp.status_code == 204
    cookie = resp.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert client.get("/v1/auth/check").status_code == 200  # the client kept the cookie
    client.post("/v1/auth/logout")
    client.cookies.clear()
    assert client.get("/v1/auth/check").status_code == 401


@pytest.mark.parametrize("body,status,code,field", [
    ('{"message": ', 400, "invalid_json", None),
    ("{}", 422, "invalid_request", "message"),
    ('{"message": ""}', 422, "invalid_request", "message"),
    ('{"message": 5}', 422, "invalid_request", "message"),
    ('{"message": "hi", "session_id": "bad id!"}', 422, "invalid_request", "session_id"),
])
def test_bad_requests_get_a_clear_error(client, body, status, code, field) -> None:
    resp = client.post("/v1/chat", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status_code == status
    err = resp.json()["error"]
    assert err["code"] == code
    if field:
        assert field in err["message"]


def test_message_size_limit_at_and_over(client, model) -> None:
    at = chat(client, OWNER_KEY, "x" * 100_000)
    assert at[-1][0] == "done"
    over = client.post("/v1/chat", json={"message": "x" * 100_001}, headers=AUTH)
    assert over.status_code == 422 and "message" in over.json()["error"]["message"]


def test_missing_key_is_401_and_unknown_session_404(client) -> None:
    assert client.post("/v1/chat", json={"message": "hi"}).status_code == 401
    resp = client.post("/v1/chat", json={"message": "hi", "session_id": "nosuchsession"}, headers=AUTH)
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "session_not_found"
    assert client.get("/v1/sessions/nosuchsession/messages", headers=AUTH).status_code == 404


def test_a_deleted_conversation_answers_404_to_its_next_message(client, model) -> None:
    # The gateway keeps the conversation's actor handle from the first turn; the delete ends
    # that actor, and the next message must still be a plain 404, not a stream.
    model.enqueue(so.text("Hello."))
    sid = chat(client, OWNER_KEY, "Hi there.")[-1][1]["session_id"]
    assert client.delete(f"/v1/sessions/{sid}", headers=AUTH).json() == {"id": sid, "deleted": True}
    again = client.post("/v1/chat", json={"message": "Still there?", "session_id": sid}, headers=AUTH)
    assert again.status_code == 404 and again.json()["error"]["code"] == "session_not_found"
    assert client.get(f"/v1/sessions/{sid}/messages", headers=AUTH).status_code == 404


def test_provider_failure_is_a_plain_error_event_and_loses_nothing(client, model) -> None:
    model.enqueue(so.status(400), so.status(400))
    events = chat(client, OWNER_KEY, "please remember this question")
    assert kinds(events)[-1] == "error"
    err = events[-1][1]
    assert err["code"] == "provider_unavailable"
    assert "Traceback" not in err["message"] and "refused" in err["message"]
    sid = events[0][1]["session_id"]
    stored = client.get(f"/v1/sessions/{sid}/messages", headers=AUTH).json()["data"]
    assert [m["content"] for m in stored] == ["please remember this question"]


def test_cancel_stops_the_turn_and_keeps_only_what_was_heard(client, model) -> None:
    words = "First part is here. " + " ".join(f"word{i}" for i in range(60)) + "."
    model.enqueue(so.text(words, chunk_delay=0.05))
    seen: list[tuple[str, dict]] = []
    first_sentence = threading.Event()
    result: dict[str, str] = {}

    def run() -> None:
        with client.stream("POST", "/v1/chat", json={"message": "talk a lot"}, headers=AUTH) as resp:
            for event, data in iter_events(resp):
                seen.append((event, data))
                if event == "session":
                    result["sid"] = data["session_id"]
                if event == "sentence":
                    first_sentence.set()

    t = threading.Thread(target=run)
    t.start()
    assert first_sentence.wait(30)
    resp = client.post(f"/v1/sessions/{result['sid']}/cancel", headers=AUTH)
    assert resp.json() == {"session_id": result["sid"], "cancelled": True}
    t.join(30)
    assert seen[-1][0] == "done" and seen[-1][1]["cancelled"] is True
    stored = client.get(f"/v1/sessions/{result['sid']}/messages", headers=AUTH).json()["data"]
    assert stored[-1]["content"] == "First part is here."
    assert stored[-1]["meta"] == {"interrupted": True}


def test_turns_in_one_session_run_one_at_a_time(client, server, model) -> None:
    model.enqueue(so.text("Alpha."))
    sid = chat(client, OWNER_KEY, "start")[0][1]["session_id"]
    model.enqueue(so.text("One one one. Still one.", chunk_delay=0.05), so.text("Two."))
    first = LiveChat(server.url, OWNER_KEY, {"message": "first", "session_id": sid})
    first.wait_for("sentence")  # the first turn holds the session now
    second = LiveChat(server.url, OWNER_KEY, {"message": "second", "session_id": sid})
    first.join()
    second.join()
    stored = client.get(f"/v1/sessions/{sid}/messages", headers=AUTH).json()["data"]
    assert [m["content"] for m in stored][2:] == ["first", "One one one. Still one.", "second", "Two."]


def test_recent_errors_are_for_the_owner(client) -> None:
    assert client.get("/v1/errors").status_code == 401
    body = client.get("/v1/errors", headers=AUTH).json()
    assert isinstance(body["data"], list) and body["count"] == len(body["data"])


def test_provider_status_shows_the_configured_model(client) -> None:
    keys = [p["key"] for p in client.get("/v1/providers", headers=AUTH).json()["data"]]
    assert "openai/scripted-model" in keys


def test_keys_never_appear_in_the_server_output(client, server, model) -> None:
    client.get(f"/v1/auth/check?token={OWNER_KEY}")
    chat(client, OWNER_KEY, "hello")
    out = server.output()
    assert OWNER_KEY not in out and "sk-scripted-provider-key" not in out
