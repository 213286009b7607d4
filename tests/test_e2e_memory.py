"""Memory that learns, through the real server: reflection after a turn, a correction that
replaces the fact in the next prompt, the exchanges export, consolidation with progress, the
persona. The learning calls go to their own scripted model (IRIIS_LEARNING_MODEL)."""

from __future__ import annotations

import json

import httpx
import pytest

from actors.memory.consolidation import CONSOLIDATION_INSTRUCTION
from actors.memory.persona import PERSONA_INSTRUCTION
from actors.memory.playbook import PLAYBOOK_INSTRUCTION
from actors.memory.reflect_prompt import REFLECTION_INSTRUCTION
from tests import scripted_openai as so
from tests.conftest import OWNER_KEY
from tests.sse import chat, iter_events
from tests.waiting import until

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {OWNER_KEY}"}


class Learner:
    """Answers the server's learning calls by what they ask for."""

    def __init__(self) -> None:
        self.reflections: list[str] = []
        self.consolidation = "{}"
        self.persona = "{}"
        self.playbook = "{}"
        self.playbook_work: list[str] = []
        self.seen: list[str] = []

    def __call__(self, body: dict) -> so.Reply:
        system = body["messages"][0]["content"]
        if system == REFLECTION_INSTRUCTION:
            self.seen.append("reflection")
            return so.text(self.reflections.pop(0) if self.reflections else "{}")
        if system == CONSOLIDATION_INSTRUCTION:
            self.seen.append("consolidation")
            return so.text(self.consolidation)
        if system == PLAYBOOK_INSTRUCTION:
            self.seen.append("playbook")
            self.playbook_work.append(body["messages"][1]["content"])
            return so.text(self.playbook)
        if system == PERSONA_INSTRUCTION:
            self.seen.append("persona")
            return so.text(self.persona)
        return so.text("{}")


def facts_about(client: httpx.Client, word: str) -> list[dict]:
    return client.get("/v1/memory", params={"search": word, "active": True}).json()["data"]


def test_a_correction_reaches_the_next_prompt_and_the_export(client, model) -> None:
    learner = Learner()
    model.side_responder = learner
    learner.reflections.append(json.dumps({"observations": [
        {"text": "Zofia, the owner's aunt, lives in Gdansk", "importance": 8}]}))
    model.enqueue(so.text("How nice that Zofia lives by the sea."))
    first = chat(client, OWNER_KEY, "My aunt Zofia lives in Gdansk, by the sea")
    session = next(d["session_id"] for e, d in first if e == "session")
    item = until(lambda: facts_about(client, "Zofia"), describe=lambda: learner.seen)[0]
    assert item["text"] == "Zofia, the owner's aunt, lives in Gdansk"
    # The learning call went to the learning model, not the chat model's script.
    assert all(r["body"]["model"] == "scripted-learner" for r in model.side_requests
               if r["body"]["model"] != so.VISION)
    assert any("My aunt Zofia lives in Gdansk" in r["body"]["messages"][1]["content"] for r in model.side_requests)

    learner.reflections.append(json.dumps({"updates": [
        {"id": item["id"], "text": "Zofia, the owner's aunt, lives in Krakow"}]}))
    model.enqueue(so.text("Thanks, I'll remember Krakow."))
    chat(client, OWNER_KEY, "No, that's wrong: Zofia moved to Krakow last spring", session)
    until(lambda: facts_about(client, "Krakow"))

    model.enqueue(so.text("In Krakow."))
    chat(client, OWNER_KEY, "Where does my aunt Zofia live?", session)
    system = model.requests[-1]["body"]["messages"][0]["content"]
    assert "Zofia, the owner's aunt, lives in Krakow" in system and "Gdansk" not in system
    assert [i["id"] for i in facts_about(client, "Zofia")] == [item["id"]]
    updates = client.get("/v1/memory/events", params={"event": "update"}).json()["data"]
    assert any(e["item_id"] == item["id"] and e["data"]["old"].endswith("Gdansk") for e in updates)

    export = client.get("/v1/export/exchanges.jsonl")
    assert export.status_code == 200 and export.headers["content-type"].startswith("application/x-ndjson")
    rows = [json.loads(line) for line in export.text.splitlines() if line.strip()]
    mine = [r for r in rows if r["session_id"] == session]
    assert [(r["user"][:12], r["corrected"]) for r in mine] == [
        ("My aunt Zofi", True), ("No, that's w", False), ("Where does m", False)]
    assert mine[0]["correction"].startswith("No, that's wrong")


def test_chit_chat_is_not_reflected_on(client, model) -> None:
    learner = Learner()
    model.side_responder = learner
    chat(client, OWNER_KEY, "hi there")
    events = client.get("/v1/memory/events", params={"event": "reflection"}).json()["data"]
    before = len(events)
    chat(client, OWNER_KEY, "thanks!")
    assert learner.seen == []
    assert len(client.get("/v1/memory/events", params={"event": "reflection"}).json()["data"]) == before


def test_health_check_sessions_run_for_real_but_teach_nothing(client, model) -> None:
    learner = Learner()
    model.side_responder = learner
    probe = "Health check from the uptime monitor: my name is Probe, I prefer short answers; reply OK"
    model.enqueue(so.text("OK."))
    events = chat(client, OWNER_KEY, probe, health_check=True)
    assert [d["text"] for e, d in events if e == "sentence"] == ["OK."]
    health = next(d["session_id"] for e, d in events if e == "session")
    # The monitor may keep probing in its own session; plain follow-ups there stay health checks.
    model.enqueue(so.text("Still OK."))
    chat(client, OWNER_KEY, probe + " again", health, health_check=True)
    model.enqueue(so.text("OK again."))
    chat(client, OWNER_KEY, probe + " once more", health)

    # The same kind of message from the owner is reflected on: proof the learner is listening.
    learner.reflections.append("{}")
    model.enqueue(so.text("Noted, short answers."))
    owner = chat(client, OWNER_KEY, "My name is Ada and I prefer short answers, please remember")
    until(lambda: learner.seen == ["reflection"], describe=lambda: learner.seen)
    prompts = [r["body"]["messages"][1]["content"] for r in model.side_requests
               if r["body"]["messages"][0]["content"] == REFLECTION_INSTRUCTION]
    assert any("My name is Ada" in p for p in prompts) and not any("Probe" in p for p in prompts)

    sessions = [s["id"] for s in client.get("/v1/sessions").json()["data"]]
    assert health not in sessions and next(d["session_id"] for e, d in owner if e == "session") in sessions
    assert client.get(f"/v1/sessions/{health}/messages").status_code == 200  # kept, just not listed
    export = client.get("/v1/export/exchanges.jsonl").text
    assert "Probe" not in export and "My name is Ada" in export

    # An owner's conversation cannot be turned into a health check.
    with client.stream("POST", "/v1/chat", json={"message": "ping", "session_id": sessions[0],
                                                 "health_check": True}) as resp:
        resp.read()
        assert resp.status_code == 422 and resp.json()["error"]["code"] == "invalid_request"


def test_consolidation_streams_progress_then_reports(client, model) -> None:
    learner = Learner()
    model.side_responder = learner
    learner.consolidation = json.dumps({"insights": ["The owner keeps in touch with family abroad"],
                                        "patterns": [], "retire": []})
    learner.persona = json.dumps({"purpose": "Keep the owner close to their family", "voice": "warm",
                                  "address": "you"})
    with client.stream("POST", "/v1/memory/consolidate", headers={"Accept": "text/event-stream"}) as resp:
        assert resp.status_code == 200
        events = list(iter_events(resp))
    kinds = [e for e, _ in events]
    assert kinds[:4] == ["progress"] * 4 and kinds[-1] == "report"
    report = events[-1][1]
    assert len(report["histogram"]) == 24 and sum(report["histogram"]) >= 1
    assert report["persona"] in ("authored", "revised")
    assert facts_about(client, "abroad")[0]["kind"] == "insight"
    persona = client.get("/v1/memory/persona").json()
    assert persona["purpose"] == "Keep the owner close to their family"
    # Plain JSON when the client does not ask for a stream.
    plain = client.post("/v1/memory/consolidate")
    assert plain.status_code == 200 and "applied" in plain.json()


def test_a_finished_background_task_distils_playbook_rules(client, model) -> None:
    learner = Learner()
    model.side_responder = learner
    learner.playbook = json.dumps({"rules": [{"domain": "time", "rule": "State the time zone with every time you give"}]})
    model.enqueue(so.tools(("current_time", {})), so.text("It is noon UTC."))
    with client.stream("POST", "/v1/chat", json={"message": "check the time for my Tokyo call", "background": True}) as resp:
        list(iter_events(resp))
    rule = until(lambda: client.get("/v1/memory", params={"kind": "playbook", "search": "time zone"}).json()["data"],
                 describe=lambda: learner.seen)[0]
    assert rule["text"] == "[time] State the time zone with every time you give"
    assert "check the time for my Tokyo call" in learner.playbook_work[0] and "current_time" in learner.playbook_work[0]


def test_memory_routes_need_the_owner(server) -> None:
    for method, path in (("GET", "/v1/memory/events"), ("GET", "/v1/memory/persona"),
                         ("POST", "/v1/memory/consolidate"), ("GET", "/v1/export/exchanges.jsonl")):
        resp = httpx.request(method, server.url + path, timeout=30)
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "unauthorized"
