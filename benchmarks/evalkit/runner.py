"""Running scenarios through a real server, as its owner would: `POST /v1/chat` streamed,
files uploaded with `POST /v1/files`, confirmations answered, and the outcomes read back from
the API (`/v1/tasks`, `/v1/calls`, `/v1/memory`, `/v1/files`, `/v1/audit`).

Scenarios share one server, so each reads only what it made: tasks and calls newer than its
start, the files its own turns made, the audit of its own conversations. A scenario that reads
memory (it spans conversations, is about memory, or checks it) starts from an empty memory once
what earlier scenarios were still learning has landed, and with memory on, what a step taught
is waited for before another conversation reads it and before the checks. A scenario on the
owner's mail and calendar (`needs_accounts`) starts from an empty memory too, and from the test
accounts put back to their seed; its mail and calendar checks read those accounts back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

import httpx

from benchmarks.evalkit.account_checks import AccountsSeen
from benchmarks.evalkit.checks import Seen, StepSeen, Verdict, check, fill
from benchmarks.evalkit.scenario import ACCOUNT_KINDS, Scenario, Step
from tests.sse import iter_events  # the suite's own SSE reader (benchmarks/load.py reuses tests/ too)

STATE_KINDS = ("task", "no_task", "memory", "no_memory", "file", "no_action", *ACCOUNT_KINDS)
MEMORY_KINDS = ("memory", "no_memory")


def uses_memory(scenario: Scenario) -> bool:
    """Whether the scenario reads memory: it spans conversations, is about memory, or checks it."""
    kinds = {e.kind for e in [*scenario.expect, *(x for s in scenario.steps for x in s.expect)]}
    return scenario.multi_session or scenario.category == "memory" or bool(kinds & set(MEMORY_KINDS))


class Accounts(Protocol):
    """The owner's test mail and calendar (benchmarks/evalkit/accounts.py `EvalAccounts`)."""

    def reset(self) -> None: ...

    def read(self) -> AccountsSeen: ...


class Runner:
    """Runs scenarios one after another against the server `client` talks to (its base URL
    and owner key set). `memory`: whether this run has memory on (the server's setting);
    `accounts`: the test mail and calendar the server was started with, if any."""

    def __init__(self, client: httpx.Client, memory: bool = True, pin: str | None = None,
                 turn_timeout: float = 300.0, learn_timeout: float = 240.0, tz: str = "UTC",
                 accounts: Accounts | None = None) -> None:
        self.client = client
        self.accounts = accounts
        self.memory = memory
        self.pin = pin
        self.turn_timeout = turn_timeout
        self.learn_timeout = learn_timeout
        self.tz = tz
        self._earlier: set[str] = set()   # conversations of earlier scenarios (maybe still learning)

    # -- reading the server back ---------------------------------------------------------------

    def _data(self, path: str, **params: Any) -> list[dict[str, Any]]:
        resp = self.client.get(path, params=params)
        resp.raise_for_status()
        return resp.json()["data"]

    def _marks(self) -> dict[str, int]:
        """The newest id of each kind of thing, before the scenario makes any."""
        def top(path: str) -> int:
            return max((int(r["id"]) for r in self._data(path, limit=1000)), default=0)
        return {"tasks": top("/v1/tasks"), "calls": top("/v1/calls")}

    def _state(self, marks: dict[str, int], sessions: set[str], steps: list[StepSeen], accounts: bool) -> Seen:
        tasks = [{"kind": t["kind"], "text": t["title"], "goal": t.get("goal", ""), "next_run": t.get("next_run"),
                  "repeat": t.get("repeat"), "status": t.get("status")}
                 for t in self._data("/v1/tasks", limit=1000) if int(t["id"]) > marks["tasks"]]
        tasks += [{"kind": "call", "text": c.get("reason", ""), "goal": c.get("opening") or "", "next_run": c.get("at"),
                   "repeat": c.get("repeat"), "status": c.get("status")}
                  for c in self._data("/v1/calls", limit=1000) if int(c["id"]) > marks["calls"]]
        memory = [m["text"] for m in self._data("/v1/memory", active="true", limit=2000)]
        files = [self._file(i) for s in steps for i in s.files]
        audit = [a for a in self._data("/v1/audit", limit=1000) if a.get("session_id") in sessions]
        mine = self.accounts.read() if accounts and self.accounts is not None else None
        return Seen(steps=list(steps), tasks=tasks, memory=memory, files=files, audit=audit, tz=self.tz,
                    accounts=mine)

    def _file(self, file_id: int) -> dict[str, Any]:
        """A made file's name and type, from its download's headers (the body is not read)."""
        with self.client.stream("GET", f"/v1/files/{file_id}") as resp:
            found = re.search(r'filename\*?=(?:UTF-8\'\')?"?([^";]+)', resp.headers.get("content-disposition", ""))
            name = unquote(found.group(1)) if found else ""
            return {"id": file_id, "name": name, "mime": resp.headers.get("content-type", "")}

    def clear_memory(self) -> int:
        """Forget every memory item (so one scenario's facts cannot answer another's)."""
        gone = 0
        for item in self._data("/v1/memory", limit=2000):
            if self.client.delete(f"/v1/memory/{item['id']}").status_code in (200, 204):
                gone += 1
        return gone

    def wait_settled(self, session_id: str) -> None:
        """Until the conversation has no turn running and no learning under way."""
        deadline = time.monotonic() + self.learn_timeout
        while time.monotonic() < deadline:
            try:
                resp = self.client.get(f"/v1/sessions/{session_id}/state")
            except httpx.TimeoutException:
                continue   # a server slowed by something beside it: ask again, until the deadline
            if resp.status_code == 404:
                return
            state = resp.json()
            if not state.get("running") and not state.get("learning"):
                return
            time.sleep(0.5)

    # -- one step ------------------------------------------------------------------------------

    def _upload(self, step: Step, base: Path | None) -> list[str]:
        tokens = []
        for a in step.attach:
            data = a.text.encode() if a.text is not None else ((base or Path(".")) / str(a.path)).read_bytes()
            resp = self.client.post("/v1/files", files={"file": (a.name, data)})
            resp.raise_for_status()
            tokens.append(resp.json()["attachment"])
        return tokens

    def _answer(self, confirm: dict[str, Any], approve: bool) -> None:
        body: dict[str, Any] = {"approve": approve}
        if approve and confirm.get("needs_pin") and self.pin:
            body["pin"] = self.pin
        self.client.post(f"/v1/confirmations/{confirm['id']}", json=body)

    @contextmanager
    def _chat(self, body: dict[str, Any], began: float, seen: StepSeen) -> Iterator[httpx.Response | None]:
        """`POST /v1/chat`, streamed. A 503 with Retry-After (every conversation process busy) is
        waited out and sent again, as a client should, up to the turn's timeout; the wait counts
        in the step's times and in `busy_503s`. None (with `seen.error`) for any other refusal."""
        while True:
            with self.client.stream("POST", "/v1/chat", json=body, timeout=self.turn_timeout) as resp:
                if resp.status_code == 200:
                    yield resp
                    return
                retry = resp.headers.get("retry-after")
                text = resp.read()[:300]
                if resp.status_code != 503 or retry is None or time.monotonic() - began > self.turn_timeout:
                    seen.error = f"HTTP {resp.status_code}: {text!r}"
                    yield None
                    return
            seen.busy_503s += 1
            time.sleep(max(0.5, float(retry)))

    def send(self, step: Step, session_id: str | None, base: Path | None) -> StepSeen:
        seen = StepSeen(say=fill(step.say, time.time(), self.tz), conversation=step.conversation)
        message = "\n".join([seen.say, *self._upload(step, base)])
        body: dict[str, Any] = {"message": message}
        if session_id:
            body["session_id"] = session_id
        seen.sent_at = time.time()
        began = time.monotonic()
        starts: dict[str, dict[str, Any]] = {}
        try:
            with self._chat(body, began, seen) as resp:
                if resp is None:
                    return seen
                for kind, data in iter_events(resp):
                    if kind == "session":
                        seen.session_id = data.get("session_id", seen.session_id)
                    elif kind == "sentence" and seen.first_sentence_s is None:
                        seen.first_sentence_s = time.monotonic() - began
                    elif kind == "tool":
                        if data.get("status") == "start":
                            starts[data["name"]] = data.get("arguments") or {}
                        else:
                            seen.tools.append({"name": data["name"], "status": data.get("status"),
                                               "arguments": starts.pop(data["name"], {})})
                            seen.files += [int(f) for f in data.get("files") or []]
                    elif kind == "confirm":
                        seen.confirmations += 1
                        self._answer(data, step.confirm)
                    elif kind == "done":
                        seen.reply = data.get("text", "")
                        seen.session_id = data.get("session_id", seen.session_id)
                    elif kind == "error":
                        seen.error = f"{data.get('code')}: {data.get('message')}"
        except httpx.HTTPError as exc:
            seen.error = f"{type(exc).__name__}: {exc}"
        seen.total_s = time.monotonic() - began
        if seen.first_sentence_s is None and seen.reply:
            seen.first_sentence_s = seen.total_s
        return seen

    # -- one scenario --------------------------------------------------------------------------

    def run(self, scenario: Scenario) -> dict[str, Any]:
        """Run `scenario`; its record: every check's verdict, the steps as seen, timings."""
        began = time.monotonic()
        about_memory, accounts = uses_memory(scenario), scenario.needs_accounts
        if self.memory and (about_memory or accounts):
            # A clean slate: what earlier scenarios are still learning lands first, then goes.
            for session_id in self._earlier:
                self.wait_settled(session_id)
            self._earlier.clear()
            self.clear_memory()
        if accounts and self.accounts is not None:
            self.accounts.reset()
        marks = self._marks()
        sessions: dict[str, str] = {}
        steps: list[StepSeen] = []
        verdicts: list[tuple[str, Verdict]] = []
        for n, step in enumerate(scenario.steps):
            seen = self.send(step, sessions.get(step.conversation), scenario.base_dir())
            steps.append(seen)
            if seen.session_id:
                sessions.setdefault(step.conversation, seen.session_id)
            following = scenario.steps[n + 1] if n + 1 < len(scenario.steps) else None
            # What this step taught memory is what a later conversation (or a check) reads.
            if seen.session_id and self.memory and about_memory and (
                    following is None or following.conversation != step.conversation):
                self.wait_settled(seen.session_id)
            if step.expect:
                state = self._state(marks, set(sessions.values()), steps, accounts) if any(
                    e.kind in STATE_KINDS for e in step.expect) else Seen(steps=list(steps), tz=self.tz)
                verdicts += [(f"step {n + 1}", check(e, state, seen)) for e in step.expect]
        self._earlier |= set(sessions.values())
        expected = scenario.expect if self.memory or scenario.expect_without_memory is None \
            else scenario.expect_without_memory
        if expected:
            state = self._state(marks, set(sessions.values()), steps, accounts)
            verdicts += [("end", check(e, state)) for e in expected]
        return {
            "id": scenario.id, "category": scenario.category, "tags": scenario.tags, "accounts": accounts,
            "multi_session": scenario.multi_session, "memory": self.memory,
            "ok": bool(verdicts) and all(v.ok for _, v in verdicts),
            "checks": [{"at": at, "kind": v.kind, "ok": v.ok, "why": v.why} for at, v in verdicts],
            "steps": [{"say": s.say, "conversation": s.conversation, "reply": s.reply, "tools": s.tools,
                       "confirmations": s.confirmations, "first_sentence_s": s.first_sentence_s,
                       "busy_503s": s.busy_503s,
                       "total_s": round(s.total_s, 2), "error": s.error,
                       "tool_turn": bool(s.tools)} for s in steps],
            "seconds": round(time.monotonic() - began, 2),
        }
