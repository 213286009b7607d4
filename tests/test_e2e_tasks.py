"""Background tasks through the real server: `POST /v1/tasks` due now reaches `done` with its
result in a conversation of its own, a cancelled running task stops, and a scheduler killed with
SIGKILL mid-task is restarted by Ray, recovers the row and finishes it once."""

from __future__ import annotations

import os
import signal

import httpx
import pytest

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY
from tests.waiting import until

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {OWNER_KEY}"}


class TaskModel:
    """Answers task briefs by their title; everything else gets the default reply."""

    def __init__(self) -> None:
        self.replies: dict[str, list[so.Reply]] = {}
        self.briefs: list[str] = []

    def __call__(self, body: dict) -> so.Reply | None:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        last = str(users[-1].get("content") or "") if users else ""
        if not last.startswith("Background task: "):
            return None
        self.briefs.append(last)
        title = last.splitlines()[0].removeprefix("Background task: ")
        queue = self.replies.get(title) or [so.text("Nothing scripted.\nSTATUS: done")]
        return queue.pop(0) if len(queue) > 1 else queue[0]


def task(client: httpx.Client, task_id: int) -> dict:
    answer = client.get(f"/v1/tasks/{task_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_task_due_now_is_done_with_its_result(client: httpx.Client, model) -> None:
    tm = TaskModel()
    tm.replies["Flights"] = [so.text("Tuesday is the cheapest day to fly, at 120 EUR. Wednesday costs 150.\n"
                                     "STATUS: done")]
    model.responder = tm
    made = client.post("/v1/tasks", json={"title": "Flights", "goal": "Find the cheapest day to fly to Lisbon"})
    assert made.status_code == 201, made.text
    row = made.json()
    assert row["status"] == "scheduled" and row["conversation_id"]

    done = until(lambda: (t := task(client, row["id"]))["status"] in ("done", "failed") and t, timeout=90,
                 describe=lambda: str(task(client, row["id"])))
    assert done["status"] == "done" and done["runs"] == 1, done
    assert done["result"] == "Tuesday is the cheapest day to fly, at 120 EUR. Wednesday costs 150."
    assert "Find the cheapest day to fly to Lisbon" in tm.briefs[0] and "STATUS: done" in tm.briefs[0]

    # Its own conversation, on the "task" channel, holds the brief and the report.
    # (Reading the messages flushes the session's buffered writes, the title among them.)
    texts = [m["content"] for m in client.get(f"/v1/sessions/{row['conversation_id']}/messages").json()["data"]]
    assert texts[0].startswith("Background task: Flights") and texts[-1].endswith("STATUS: done")
    sessions = client.get("/v1/sessions").json()["data"]
    [conv] = [s for s in sessions if s["id"] == row["conversation_id"]]
    assert conv["channel"] == "task" and conv["title"] == "Background task: Flights"

    notices = until(lambda: [n for n in client.get("/v1/outbox").json()["data"]
                             if n["kind"] == "task_done" and n["data"]["task_id"] == row["id"]], timeout=30)
    assert notices[0]["body"] == "Tuesday is the cheapest day to fly, at 120 EUR."

    status = client.get("/v1/scheduler").json()
    assert status["running"] is True and status["loops"]["tasks"] is True
    assert status["tasks"]["poll_seconds"] == 15 and status["tasks"]["parallel"] == 2

    bad = client.post("/v1/tasks", json={"title": "Bad", "goal": "g", "repeat": "61 * * * *"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"


def test_a_cancelled_running_task_stops_and_is_not_finished(client: httpx.Client, model) -> None:
    tm = TaskModel()
    # Shorter than the test server's provider timeout (5 s), so the router's health is untouched.
    tm.replies["Slow"] = [so.Reply(text="Too late.\nSTATUS: done", hang=4)]
    model.responder = tm
    row = client.post("/v1/tasks", json={"title": "Slow", "goal": "Take a long time"}).json()
    until(lambda: task(client, row["id"])["status"] == "running", timeout=60)
    gone = client.delete(f"/v1/tasks/{row['id']}")
    assert gone.status_code == 200 and gone.json()["status"] == "cancelled"
    until(lambda: not [r for r in client.get("/v1/scheduler").json()["tasks"]["running"]
                       if r["task_id"] == row["id"]], timeout=30)
    final = task(client, row["id"])
    assert (final["status"], final["result"]) == ("cancelled", None)


def test_a_scheduler_killed_mid_task_recovers_the_row_and_finishes_it_once(client: httpx.Client, model) -> None:
    tm = TaskModel()
    # The first session hangs while the scheduler is killed; the rescued one answers at once.
    tm.replies["Rescue"] = [so.Reply(text="First try.\nSTATUS: done", hang=4),
                            so.text("Rescued and finished.\nSTATUS: done")]
    model.responder = tm
    row = client.post("/v1/tasks", json={"title": "Rescue", "goal": "Survive a crash"}).json()
    until(lambda: task(client, row["id"])["status"] == "running", timeout=60)
    before = client.get("/v1/scheduler").json()
    os.kill(before["pid"], signal.SIGKILL)

    done = until(lambda: (t := task(client, row["id"]))["status"] in ("done", "failed") and t, timeout=120,
                 describe=lambda: str(task(client, row["id"])))
    assert done["status"] == "done" and done["runs"] == 2, done
    after = client.get("/v1/scheduler").json()
    assert after["pid"] != before["pid"] and row["id"] in after["tasks"]["recovered"]
    notices = [n for n in client.get("/v1/outbox").json()["data"]
               if n["kind"] == "task_done" and n["data"]["task_id"] == row["id"]]
    assert len(notices) == 1
