"""`kill -9` of the actors that hold state or sockets, through the real server (PostgreSQL, the
scripted model): a conversation's SessionActor between turns and mid-turn, a Gateway replica, the ToolHub, a
DeviceActor, a CameraActor and the scheduler mid-task. Each comes back (Ray restarts it in
place and it rebuilds from the store), the next request succeeds at the first try, and no
accepted message, audit row or task run is lost or written twice.

One server for the whole module (the session-wide `server` fixture); the kills are found and
made through `tests/fault_probe.py`, a subprocess that joins the server's Ray cluster. A
Gateway replica killed is replaced by Serve's controller: a message sent right after the kill
waits in the Serve proxy for the new replica, and a turn whose stream was cut finishes in its
actor."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY, OWNER_PIN
from tests.device_client import connected, hello, pair, tool
from tests.fault_probe import Probe
from tests.sse import LiveChat, chat
from tests.waiting import until

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {OWNER_KEY}"}


@pytest.fixture(scope="module")
def probe(server) -> Iterator[Probe]:
    found = Probe(server)
    yield found
    found.close()


def messages(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/sessions/{session_id}/messages")
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def ended_with(events: list[tuple[str, dict[str, Any]]], kind: str) -> dict[str, Any]:
    assert events and events[-1][0] == kind, events
    return events[-1][1]


def session_of(events: list[tuple[str, dict[str, Any]]]) -> str:
    return next(data["session_id"] for kind, data in events if kind == "session")


def audit_rows(client: httpx.Client, tool_name: str) -> list[dict[str, Any]]:
    return [e for e in client.get("/v1/audit", params={"limit": 1000}).json()["data"] if e["tool"] == tool_name]


# -- the conversation ---------------------------------------------------------------------


def test_a_session_killed_between_turns_keeps_the_exchange_and_answers_the_next_message(
        client: httpx.Client, model, probe: Probe) -> None:
    model.enqueue(so.text("Noted: your locker is 41."))
    first = chat(client, OWNER_KEY, "My locker number is 41.")
    done = ended_with(first, "done")
    sid = done["session_id"]

    before = probe.kill(sid, session=True)
    # What the person was told is done is in the store, as it was said.
    stored = messages(client, sid)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "My locker number is 41."), ("assistant", "Noted: your locker is 41.")]
    assert stored[1]["id"] == done["message_id"]
    after = probe.restarted(sid, before, session=True)
    assert after["id"] == before["id"]  # the same actor, restarted in place

    model.enqueue(so.text("It is 41."))
    second = chat(client, OWNER_KEY, "What is my locker number?", session_id=sid)
    assert ended_with(second, "done")["text"] == "It is 41."
    # The rebuilt conversation gave the model the earlier exchange.
    prompt = [m["content"] for m in model.requests[-1]["body"]["messages"] if m["role"] != "system"]
    assert prompt[-3:] == ["My locker number is 41.", "Noted: your locker is 41.", "What is my locker number?"]
    rows = messages(client, sid)
    assert [m["content"] for m in rows] == ["My locker number is 41.", "Noted: your locker is 41.",
                                            "What is my locker number?", "It is 41."]
    assert len({m["id"] for m in rows}) == 4 and [m["seq"] for m in rows] == sorted({m["seq"] for m in rows})


def test_a_message_sent_right_after_its_session_is_killed_is_answered_at_the_first_try(
        client: httpx.Client, model, probe: Probe) -> None:
    # The gateway sends a known conversation's turn straight to the actor it used last; this
    # one is dead (restarting) when the message arrives, so the turn must be sent once more.
    model.enqueue(so.text("Your bike is red."))
    sid = ended_with(chat(client, OWNER_KEY, "Remember my bike is red."), "done")["session_id"]
    probe.kill(sid, session=True)

    model.enqueue(so.text("Red."))
    events = chat(client, OWNER_KEY, "What colour is my bike?", session_id=sid)
    assert ended_with(events, "done")["text"] == "Red."
    assert [kind for kind, _ in events].count("session") == 1
    assert [m["content"] for m in messages(client, sid)] == [
        "Remember my bike is red.", "Your bike is red.", "What colour is my bike?", "Red."]


def test_a_session_killed_mid_turn_ends_it_with_an_error_and_keeps_the_partial_reply(
        client: httpx.Client, model, server, probe: Probe) -> None:
    # One sentence at once, then a slow tail: the actor dies while the reply is being written.
    model.enqueue(so.text("The story begins in a small harbour town. " + "and then it goes on " * 150,
                          chunk_delay=0.05))
    live = LiveChat(server.url, OWNER_KEY, {"message": "Tell me a long story."})
    sentence = live.wait_for("sentence")
    assert sentence["text"] == "The story begins in a small harbour town."
    sid = session_of(live.events)
    # The sentence is in the store while the turn is still running (a pending reply row).
    until(lambda: [m for m in messages(client, sid) if m["role"] == "assistant"
                   and m["content"] == "The story begins in a small harbour town."], timeout=30)

    before = probe.kill(sid, session=True)
    events = live.join(timeout=60)
    error = ended_with(events, "error")
    assert error["code"] == "session_unavailable"
    assert "process was lost" in error["message"] and "send your message again" in error["message"]

    stored = messages(client, sid)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Tell me a long story."), ("assistant", "The story begins in a small harbour town.")]
    assert stored[1]["meta"]["interrupted"] is True and stored[1]["meta"]["cause"] == "session_restarted"
    assert "pending" not in stored[1]["meta"]
    probe.restarted(sid, before, session=True)

    model.enqueue(so.text("Where was I? In the harbour town."))
    again = chat(client, OWNER_KEY, "Go on.", session_id=sid)
    assert ended_with(again, "done")["text"] == "Where was I? In the harbour town."
    assert [m["content"] for m in messages(client, sid)] == [
        "Tell me a long story.", "The story begins in a small harbour town.", "Go on.",
        "Where was I? In the harbour town."]


# -- the gateway --------------------------------------------------------------------------


def replica_back(probe: Probe, deployment: str, before: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
    """Serve's controller replaced the killed replica with a new process."""
    def replaced() -> dict[str, Any] | None:
        now = probe.replica(deployment)
        return now if now.get("pid") not in (None, before["pid"]) else None
    return until(replaced, timeout=timeout)


def test_a_gateway_replica_killed_between_turns_is_replaced_and_the_next_message_is_answered_at_the_first_try(
        client: httpx.Client, model, probe: Probe) -> None:
    model.enqueue(so.text("Noted: the gate code is 7315."))
    sid = ended_with(chat(client, OWNER_KEY, "The gate code is 7315."), "done")["session_id"]
    before = probe.replica("Gateway")
    assert before.get("state") == "ALIVE" and before.get("pid"), before
    os.kill(before["pid"], signal.SIGKILL)

    # Sent at once: the Serve proxy holds it until a replica can take it.
    model.enqueue(so.text("It is 7315."))
    events = chat(client, OWNER_KEY, "What is the gate code?", session_id=sid)
    assert ended_with(events, "done")["text"] == "It is 7315."
    assert replica_back(probe, "Gateway", before)["pid"] != before["pid"]
    assert [m["content"] for m in messages(client, sid)] == [
        "The gate code is 7315.", "Noted: the gate code is 7315.", "What is the gate code?", "It is 7315."]


def test_a_gateway_replica_killed_mid_turn_leaves_the_turn_to_finish_and_its_reply_is_kept(
        client: httpx.Client, model, server, probe: Probe) -> None:
    reply = "The list has three parts. " + "and one more item " * 40
    model.enqueue(so.text(reply, chunk_delay=0.05))
    live = LiveChat(server.url, OWNER_KEY, {"message": "Give me a long list."})
    live.wait_for("sentence")
    sid = session_of(live.events)
    before = probe.replica("Gateway")
    os.kill(before["pid"], signal.SIGKILL)
    live.join(timeout=60)
    assert live.cut and not any(kind == "done" for kind, _ in live.events)
    # The stream was cut with its replica; the turn itself lives in the conversation's actor
    # and finishes there: the whole reply is stored, once, not marked interrupted.
    replica_back(probe, "Gateway", before)
    def finished() -> list[dict[str, Any]] | None:
        rows = messages(client, sid)
        return rows if len(rows) == 2 and "pending" not in (rows[1]["meta"] or {}) else None
    stored = until(finished, timeout=60)
    assert [(m["role"], m["content"]) for m in stored] == [("user", "Give me a long list."), ("assistant", reply.strip())]
    assert not (stored[1]["meta"] or {}).get("interrupted")
    model.enqueue(so.text("Glad it helped."))
    assert ended_with(chat(client, OWNER_KEY, "Thanks.", session_id=sid), "done")["text"] == "Glad it helped."


# -- the tool hub -------------------------------------------------------------------------


def test_the_tool_hub_killed_comes_back_with_its_servers_and_the_next_tool_call_works(
        client: httpx.Client, model, probe: Probe) -> None:
    before = probe.kill("tools")
    listed = client.get("/v1/tools")
    assert listed.status_code == 200, listed.text
    probe.restarted("tools", before)
    def servers_on() -> bool:
        states = {t["name"]: t["state"] for t in client.get("/v1/tools").json()["data"]}
        return states.get("files") == "on" and states.get("studio") == "on"
    until(servers_on, timeout=150, describe=lambda: str(client.get("/v1/tools").json()["data"]))

    earlier = len(audit_rows(client, "list_files"))
    model.enqueue(so.tools(("list_files", {})), so.text("You have some files."))
    events = chat(client, OWNER_KEY, "list my uploaded files")
    assert ended_with(events, "done")["text"] == "You have some files."
    assert [d["status"] for k, d in events if k == "tool"] == ["start", "done"]
    assert len(audit_rows(client, "list_files")) == earlier + 1


# -- a device -----------------------------------------------------------------------------


async def test_a_device_actor_killed_comes_back_on_the_same_socket_and_its_tools_work(
        server, model, probe: Probe) -> None:
    from tests.test_devices_agent import Answering, echo

    paired = pair(server.url, OWNER_KEY, OWNER_PIN, skills=["files"], label="Fault box")
    device, _ = await connected(server.url, paired["token"], hello(tools=[tool("files_stat", tier=0)]))
    answering = Answering(device, echo)
    name = f"device:{paired['device_id']}"
    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers=AUTH) as client:
        # The audit is the database's: other modules on it may have run this tool already.
        earlier = len([e for e in (await client.get("/v1/audit", params={"limit": 1000})).json()["data"]
                       if e["tool"] == "files_stat"])
    before = await asyncio.to_thread(probe.kill, name)

    async with httpx.AsyncClient(base_url=server.url, timeout=60, headers=AUTH) as client:
        # Asked at once: the call reaches the actor while it restarts and its socket is being
        # registered again, and waits for that instead of failing.
        model.enqueue(so.tools(("files_stat", {"path": "/tmp/now"})), so.text("It is there now."))
        reply = await client.post("/v1/ask", json={"message": "stat my device file now"},
                                  headers={"Authorization": f"Bearer {paired['token']}"})
        assert reply.status_code == 200 and reply.json()["reply"] == "It is there now."
        assert answering.calls[-1]["args"] == {"path": "/tmp/now"}
        await asyncio.to_thread(probe.restarted, name, before)
        # The socket was registered again: the device is online, and its tool is offered.
        async with asyncio.timeout(60):
            while not [d for d in (await client.get("/v1/me/devices")).json()["data"]
                       if d["id"] == paired["device_id"] and d.get("online")]:
                await asyncio.sleep(0.3)
            while True:
                model.enqueue(so.text("ok"))
                await client.post("/v1/ask", json={"message": "use my device files"},
                                  headers={"Authorization": f"Bearer {paired['token']}"})
                offered = [t["function"]["name"] for t in model.requests[-1]["body"].get("tools") or []]
                if "files_stat" in offered:
                    break
                await asyncio.sleep(0.3)
        model.enqueue(so.tools(("files_stat", {"path": "/tmp/a"})), so.text("It is there."))
        reply = await client.post("/v1/ask", json={"message": "stat my device file a"},
                                  headers={"Authorization": f"Bearer {paired['token']}"})
        assert reply.status_code == 200 and reply.json()["reply"] == "It is there."
        assert answering.calls[-1]["tool"] == "files_stat"
        rows = [e for e in (await client.get("/v1/audit", params={"limit": 1000})).json()["data"]
                if e["tool"] == "files_stat"]
        assert len(rows) == earlier + 2
    # The device never saw a close: its socket is the one it opened before the kill.
    assert not [f for f in answering.frames if f.get("type") == "error"]
    await answering.stop()


# -- a camera stream ----------------------------------------------------------------------


def test_the_vision_router_killed_comes_back_fresh_and_the_next_question_reaches_the_model(
        server, model, probe: Probe) -> None:
    """The router holds rests and retirements in memory only: a restarted router starts from its
    configured providers again (an earlier module retires the scripted vision model with a 404),
    and a camera question after the death is answered by the model at the first try."""
    from tests.test_e2e_camera import Cam, handoff_for, vlm
    from tests.vision_draw import jpeg, shapes_frame

    model.responder = handoff_for("\0", so.text("NOTHING"))
    cam = Cam(server.url)
    assert cam.frame(jpeg(shapes_frame()))["type"] == "perception"
    before = probe.kill("router:vision")
    probe.restarted("router:vision", before)
    assert not [e for e in probe.call("router:vision", "snapshot") if e["retired"]]
    model.side_responder = lambda body: vlm("A circle and a square.") if "What shapes" in json.dumps(body) else None
    cam.send(type="ask", text="What shapes are here?")
    answer = cam.next("answer")
    assert answer["source"] == "model" and answer["say"] == "A circle and a square."
    cam.close()


def test_a_camera_actor_killed_comes_back_with_its_goal_and_the_stream_goes_on(server, model, probe: Probe) -> None:
    from tests.test_e2e_camera import Cam, handoff_for, vlm
    from tests.vision_draw import jpeg, shapes_frame

    model.responder = handoff_for("\0", so.text("NOTHING"))
    cam = Cam(server.url)
    cam.send(type="goal", text="Check the boiler pressure")
    cam.next("state")
    assert cam.frame(jpeg(shapes_frame()))["type"] == "perception"
    name = f"camera:{cam.hello['stream_id']}"
    before = probe.kill(name)
    # The next frame after the death gets its perception at the first try.
    assert cam.frame(jpeg(shapes_frame()))["type"] == "perception"
    probe.restarted(name, before)
    # The camera keeps sending: the next frame is taken only once the one before it was
    # handed to the restarted actor.
    assert cam.frame(jpeg(shapes_frame()))["type"] == "perception"
    model.side_responder = lambda body: vlm("The gauge reads normal.") if "Is it fine?" in json.dumps(body) else None
    cam.send(type="ask", text="Is it fine?")
    answer = cam.next("answer")
    assert answer["say"] == "The gauge reads normal."
    asked = [r for r in model.side_requests if r["body"].get("model") == so.VISION and "Is it fine?" in json.dumps(r["body"])]
    assert asked and "Check the boiler pressure" in json.dumps(asked[-1]["body"])  # the goal came back
    cam.close()


@pytest.mark.parametrize("ended", ["exited", "killed"])
def test_a_camera_hand_off_after_its_conversations_actor_ended_reaches_the_conversation(
        server, client: httpx.Client, model, probe: Probe, ended: str) -> None:
    """The stream outlives its conversation's actor: ended for good (as an idle exit does), the
    next hand-off goes to the actor that holds the conversation now; killed (kill -9), it waits
    for the actor's restart in place. Either way both exchanges are kept."""
    from tests.test_e2e_camera import Cam, handoff_for, vlm
    from tests.vision_draw import jpeg, shapes_frame

    cam = Cam(server.url)
    session_id = cam.hello["session_id"]
    assert cam.frame(jpeg(shapes_frame()))["type"] == "perception"

    def ask(question: str, seen: str, follow_up: str) -> None:
        model.enqueue(vlm(seen), model=so.VISION)
        model.responder = handoff_for(question, so.text(follow_up))
        cam.send(type="ask", text=question)
        cam.next("answer")
        assert cam.next("agent")["text"] == follow_up

    ask("How many shapes?", "Two shapes.", "I noted the two shapes.")
    before = probe.end_session(session_id) if ended == "exited" else probe.kill(session_id, session=True)
    ask("Which shapes?", "A circle and a square.", "A circle and a square, noted.")
    now = probe.session(session_id)
    assert now.get("state") == "ALIVE" and now.get("pid") != before["pid"], (before, now)
    stored = client.get(f"/v1/sessions/{session_id}/messages").json()["data"]
    replies = [m["content"] for m in stored if m["role"] == "assistant"]
    assert replies == ["I noted the two shapes.", "A circle and a square, noted."], stored
    cam.close()


# -- the scheduler ------------------------------------------------------------------------


def test_the_scheduler_killed_mid_task_finishes_it_once_with_every_run_kept(client: httpx.Client, model) -> None:
    from tests.test_e2e_tasks import TaskModel, task

    tm = TaskModel()
    # The hang outlasts the kill below, well inside the fixture's 5 s provider timeout.
    tm.replies["Fault"] = [so.Reply(text="First run.\nSTATUS: done", hang=2.5),
                           so.text("Second run, finished.\nSTATUS: done")]
    model.responder = tm
    row = client.post("/v1/tasks", json={"title": "Fault", "goal": "Survive a kill"}).json()
    until(lambda: task(client, row["id"])["status"] == "running", timeout=60)
    # Mid-task: the first run's turn has begun in the task's conversation (its model call
    # hangs 2.5 s), not only been marked as running.
    def begun() -> bool:
        got = client.get(f"/v1/sessions/{row['conversation_id']}/messages")  # 404 until its turn opens it
        return got.status_code == 200 and any(m["content"].startswith("Background task: Fault")
                                              for m in got.json()["data"])

    until(begun, timeout=60)
    before = client.get("/v1/scheduler").json()
    os.kill(before["pid"], signal.SIGKILL)
    done = until(lambda: (t := task(client, row["id"]))["status"] in ("done", "failed") and t, timeout=120,
                 describe=lambda: str(task(client, row["id"])))
    assert done["status"] == "done" and done["runs"] == 2, done
    notices = [n for n in client.get("/v1/outbox").json()["data"]
               if n["kind"] == "task_done" and n["data"]["task_id"] == row["id"]]
    assert len(notices) == 1
    # Both runs' briefs and both reports are in the task's conversation, each once.
    texts = [m["content"] for m in messages(client, row["conversation_id"])]
    briefs = [t for t in texts if t.startswith("Background task: Fault")]
    assert len(briefs) == 2 and texts.count("Second run, finished.\nSTATUS: done") == 1
    assert texts.count("First run.\nSTATUS: done") <= 1
