"""The background-task protocol and the runner, without Ray: scripted sessions (the events a
SessionActor streams) on a real SQLite store, and an injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actors.scheduler import protocol, tasks
from actors.scheduler.runner import RunnerSettings, TaskRunner, resolve_verdict
from actors.session.events import Done, ToolActivity, TurnError, TurnEvent
from actors.store.migrate import migrate
from actors.store.store import Store

NOW = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Scripted:
    """One session: its reply, its tools, an error, or a wait on `gate` before it answers."""

    text: str = ""
    tools: list[tuple[str, list[int]]] = field(default_factory=list)
    error: str | None = None
    gate: asyncio.Event | None = None


class FakeTurns:
    """The runner's view of the house, scripted: sessions by conversation, in order."""

    def __init__(self, judge: list[str | None] | None = None) -> None:
        self.script: list[Scripted] = []
        self.briefs: list[str] = []
        # What each session was told about its brief's trust: (sources, work_only).
        self.trust: list[tuple[list[str], bool]] = []
        self.opened: list[str] = []
        self.cancelled: list[str] = []
        self.distilled: list[str] = []
        self.judge_answers = list(judge or [])
        self.judged: list[list[dict[str, str]]] = []
        self._stop: dict[str, asyncio.Event] = {}

    async def open(self, conversation_id: str) -> None:
        self.opened.append(conversation_id)

    async def run(self, conversation_id: str, message: str, sources: list[str] | None = None,
                  work_only: bool = False) -> AsyncIterator[TurnEvent]:
        self.briefs.append(message)
        self.trust.append((list(sources or []), work_only))
        step = self.script.pop(0)
        stop = self._stop[conversation_id] = asyncio.Event()
        for name, files in step.tools:
            yield ToolActivity(name=name, status="start", arguments={})
            if stop.is_set():
                yield Done(session_id=conversation_id, message_id=None, text="", cancelled=True)
                return
            yield ToolActivity(name=name, status="done", result="ok", files=files)
        if step.gate is not None:
            waiter = asyncio.ensure_future(stop.wait())
            await asyncio.wait({waiter, asyncio.ensure_future(step.gate.wait())}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                yield Done(session_id=conversation_id, message_id=None, text="", cancelled=True)
                return
        if step.error:
            yield TurnError.of("provider_unavailable", step.error)
            return
        yield Done(session_id=conversation_id, message_id="m1", text=step.text)

    async def cancel(self, conversation_id: str) -> None:
        self.cancelled.append(conversation_id)
        if conversation_id in self._stop:
            self._stop[conversation_id].set()

    async def judge(self, messages: list[dict[str, str]]) -> str | None:
        self.judged.append(messages)
        return self.judge_answers.pop(0) if self.judge_answers else None

    async def distill(self, work: str, conversation_id: str) -> None:
        self.distilled.append(work)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'tasks.sqlite3'}")
    await migrate(store)
    yield store
    await store.close()


def runner(store: Store, turns: FakeTurns, clock: Clock, **settings: Any) -> TaskRunner:
    return TaskRunner(store, turns, "home#1", clock=clock, settings=RunnerSettings(**settings))


async def run_due(r: TaskRunner) -> list[int]:
    started = await r.tick()
    await r.drain()
    return started


# -- pure functions -----------------------------------------------------------------------------

@pytest.mark.parametrize("report, verdict", [
    ("All done.\nSTATUS: done", "done"),
    ("Progress so far.\n\nstatus: continue\n", "continue"),
    ("Here it is.\n**STATUS: done**", "done"),
    ("Here it is.\n`STATUS: DONE`.", "done"),
    ("STATUS: done\nBut then more text.", None),
    ("No status line at all.", None),
    ("", None),
])
def test_the_status_line_is_read_from_the_last_line(report: str, verdict: str | None) -> None:
    assert protocol.read_status(report) == verdict


def test_the_report_loses_its_status_line_and_the_notice_is_its_first_sentence() -> None:
    report = "# Findings\n\nThe cheapest flight is on Tuesday. It costs 120 EUR.\n\nSTATUS: done"
    assert protocol.strip_status(report) == "# Findings\n\nThe cheapest flight is on Tuesday. It costs 120 EUR."
    assert protocol.first_sentence(report) == "Findings"
    assert protocol.first_sentence("The cheapest flight is Tuesday. More.\nSTATUS: done") == "The cheapest flight is Tuesday."


@pytest.mark.parametrize("answer, verdict", [
    ('{"verdict": "deliverable"}', "done"), ('```json\n{"verdict": "progress"}\n```', "continue"),
    ("deliverable", "done"), ("PROGRESS", "continue"), ("no idea", None), (None, None),
])
def test_the_judges_answer_is_read_leniently(answer: str | None, verdict: str | None) -> None:
    assert protocol.parse_judgement(answer) == verdict


def test_without_a_judge_a_non_empty_report_is_the_deliverable() -> None:
    assert resolve_verdict("Here is the summary.", None) == "done"
    assert resolve_verdict("   ", None) == "continue"
    assert resolve_verdict("Here is the summary.", '{"verdict": "progress"}') == "continue"


def test_a_claimed_file_needs_a_tool_that_made_one() -> None:
    claim = "I've saved the report as a PDF.\nSTATUS: done"
    assert protocol.unbacked_file_claim(claim, [])
    assert protocol.unbacked_file_claim(claim, [{"name": "web_search", "status": "done", "files": []}])
    assert not protocol.unbacked_file_claim(claim, [{"name": "make_pdf", "status": "done", "files": [7]}])
    assert protocol.unbacked_file_claim(claim, [{"name": "make_pdf", "status": "error", "files": [7]}])
    # Not a claim about a file: no tool needed.
    assert not protocol.unbacked_file_claim("The answer is 42.\nSTATUS: done", [])
    assert not protocol.unbacked_file_claim("I could not save the file.", [])


def test_the_brief_says_stop_researching_from_the_third_session() -> None:
    row = tasks.Task(id=1, title="Flights", goal="Find the cheapest flight", status="running", runs=2,
                     notes="[session 1] looked at two sites", created=NOW, updated=NOW)
    second = protocol.brief(row, 2)
    assert "Find the cheapest flight" in second and "looked at two sites" in second
    assert "STATUS: done" in second and "Stop researching" not in second
    assert "Stop researching now" in protocol.brief(row, 3)
    assert "session 6 of at most 6" in protocol.brief(row, 6)


# -- the runner -----------------------------------------------------------------------------------

async def test_a_done_task_keeps_its_result_notifies_and_distils(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Flights", "Find the cheapest flight", NOW)
    turns.script = [Scripted("The cheapest flight is on Tuesday. It costs 120 EUR.\nSTATUS: done",
                             tools=[("web_search", [])])]
    assert await run_due(runner(db, turns, clock)) == [row.id]
    done = await tasks.get_task(db, row.id)
    assert (done.status, done.runs, done.claimed_by) == ("done", 1, None)
    assert done.result == "The cheapest flight is on Tuesday. It costs 120 EUR."
    assert turns.opened == [row.conversation_id] and turns.judged == []
    [notice] = await db.list_outbox()
    assert (notice.kind, notice.body, notice.session_id) == ("task_done", "The cheapest flight is on Tuesday.",
                                                            row.conversation_id)
    assert notice.data == {"task_id": row.id, "conversation_id": row.conversation_id}
    # A session that ran tools is distilled by the session actor itself (background turns' rule).
    assert turns.distilled == []


async def test_a_finished_task_without_tools_is_distilled_here(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    await tasks.create_task(db, "Poem", "Write a short poem about rain", NOW)
    turns.script = [Scripted("Rain taps the glass.\nSTATUS: done")]
    await run_due(runner(db, turns, clock))
    assert len(turns.distilled) == 1 and "Write a short poem about rain" in turns.distilled[0]


async def test_continue_reschedules_a_minute_later_then_the_brief_says_deliver(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Flights", "Find the cheapest flight", NOW)
    r = runner(db, turns, clock)
    turns.script = [Scripted("Looked at two sites.\nSTATUS: continue"), Scripted("Three more.\nSTATUS: continue"),
                    Scripted("Tuesday is cheapest.\nSTATUS: done")]
    await run_due(r)
    after_one = await tasks.get_task(db, row.id)
    assert (after_one.status, after_one.next_run, after_one.runs) == ("scheduled", NOW + 60, 1)
    assert after_one.notes == "[session 1] Looked at two sites."
    assert await db.list_outbox() == []
    assert await run_due(r) == []            # not due yet
    clock.now += 60
    await run_due(r)
    clock.now += 60
    await run_due(r)
    assert "Looked at two sites." in turns.briefs[1] and "Stop researching" not in turns.briefs[1]
    assert "Stop researching now" in turns.briefs[2] and "Three more." in turns.briefs[2]
    done = await tasks.get_task(db, row.id)
    assert (done.status, done.runs, done.result) == ("done", 3, "Tuesday is cheapest.")
    assert [n.kind for n in await db.list_outbox()] == ["task_done"]
    # The owner's own brief is their words; notes carried from earlier sessions are not.
    assert turns.trust == [([], False), ([f"task:{row.id}"], False), ([f"task:{row.id}"], False)]


async def test_a_task_the_autonomy_loop_made_runs_tainted_with_the_work_tools_only(db: Store) -> None:
    from actors.scheduler.autonomy.actions import AUTONOMY_TASKS_KV

    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Read up", "Read about sourdough starters", NOW)
    await db.set_kv(AUTONOMY_TASKS_KV, [row.id])
    turns.script = [Scripted("Starters need feeding daily.\nSTATUS: done")]
    await run_due(runner(db, turns, clock))
    assert turns.trust == [([f"task:{row.id}"], True)]


async def test_six_sessions_then_failed_with_the_notes_kept(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Endless", "Research forever", NOW)
    r = runner(db, turns, clock)
    turns.script = [Scripted(f"Still researching {i}.\nSTATUS: continue") for i in range(1, 8)]
    for _ in range(7):
        await run_due(r)
        clock.now += 60
    failed = await tasks.get_task(db, row.id)
    assert (failed.status, failed.runs) == ("failed", protocol.MAX_SESSIONS)
    assert "[session 1] Still researching 1." in failed.notes and "[session 6] Still researching 6." in failed.notes
    assert failed.error == "not finished after 6 sessions"
    assert len(turns.briefs) == 6 and len(turns.script) == 1
    assert [n.kind for n in await db.list_outbox()] == ["task_failed"]
    assert turns.distilled == []


async def test_a_missing_status_line_goes_to_the_judge(db: Store) -> None:
    clock, turns = Clock(), FakeTurns(judge=['{"verdict": "progress"}', '{"verdict": "deliverable"}'])
    row = await tasks.create_task(db, "Summary", "Summarise the thread", NOW)
    r = runner(db, turns, clock)
    turns.script = [Scripted("I will look at the thread next."), Scripted("The thread agrees on Friday.")]
    await run_due(r)
    assert (await tasks.get_task(db, row.id)).status == "scheduled"
    assert "Summarise the thread" in turns.judged[0][1]["content"]
    clock.now += 60
    await run_due(r)
    done = await tasks.get_task(db, row.id)
    assert (done.status, done.result, len(turns.judged)) == ("done", "The thread agrees on Friday.", 2)


async def test_a_claimed_file_without_a_document_tool_is_refused(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Report", "Write a PDF report", NOW)
    r = runner(db, turns, clock)
    turns.script = [Scripted("I've saved the report as report.pdf.\nSTATUS: done"),
                    Scripted("I've saved the report as report.pdf.\nSTATUS: done", tools=[("make_pdf", [12])])]
    await run_due(r)
    refused = await tasks.get_task(db, row.id)
    assert refused.status == "scheduled" and "no document tool made one" in refused.notes
    assert "no document tool made one" in protocol.brief(refused, 2)
    clock.now += 60
    await run_due(r)
    assert (await tasks.get_task(db, row.id)).status == "done"


async def test_a_cancelled_running_task_stops_at_its_next_step(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Long", "Long work", NOW)
    gate = asyncio.Event()
    turns.script = [Scripted("never delivered\nSTATUS: done", gate=gate)]
    r = runner(db, turns, clock, cancel_check=0.05)
    await r.tick()
    await tasks.cancel_task(db, row.id, NOW + 1)
    await asyncio.wait_for(r.drain(), 5)
    assert turns.cancelled == [row.conversation_id]
    final = await tasks.get_task(db, row.id)
    assert (final.status, final.result) == ("cancelled", None)
    assert await db.list_outbox() == [] and turns.distilled == []


async def test_a_session_past_its_timeout_is_stopped_and_rescheduled(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Slow", "Slow work", NOW)
    turns.script = [Scripted("late", gate=asyncio.Event())]
    await asyncio.wait_for(run_due(runner(db, turns, clock, timeout=0.2)), 5)
    again = await tasks.get_task(db, row.id)
    assert again.status == "scheduled" and again.next_run == NOW + 60
    assert "ran past" in again.error and turns.cancelled == [row.conversation_id]


async def test_a_failed_turn_is_another_session_later(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "T", "G", NOW)
    turns.script = [Scripted(error="No configured model answered")]
    await run_due(runner(db, turns, clock))
    again = await tasks.get_task(db, row.id)
    assert again.status == "scheduled" and "No configured model answered" in again.error


async def test_at_most_two_run_at_once(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    ids = [(await tasks.create_task(db, f"t{i}", "g", NOW)).id for i in range(3)]
    gate = asyncio.Event()
    turns.script = [Scripted(f"r{i}\nSTATUS: done", gate=gate) for i in range(3)]
    r = runner(db, turns, clock)
    assert await r.tick() == ids[:2]
    assert await r.tick() == []
    status = await r.status()
    assert [x["task_id"] for x in status["running"]] == ids[:2]
    assert [x["task_id"] for x in status["next_due"]] == [ids[2]]
    gate.set()
    await r.drain()
    assert await r.tick() == [ids[2]]
    await r.drain()
    assert {t.status for t in await tasks.list_tasks(db)} == {"done"}


async def test_a_reminder_only_queues_its_notification(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Dentist", "Call the dentist", NOW, run_at=NOW + 300, kind="reminder")
    r = runner(db, turns, clock)
    await run_due(r)
    assert await db.list_outbox() == []
    clock.now += 300
    await run_due(r)
    [notice] = await db.list_outbox()
    assert (notice.kind, notice.title, notice.body) == ("reminder", "Reminder: Dentist", "Call the dentist")
    assert (await tasks.get_task(db, row.id)).status == "done" and turns.briefs == []


async def test_a_repeating_task_comes_round_again(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "Digest", "Morning digest", NOW, repeat="every 1h")
    turns.script = [Scripted("Nothing new today.\nSTATUS: done")]
    await run_due(runner(db, turns, clock))
    again = await tasks.get_task(db, row.id)
    assert (again.status, again.next_run, again.runs, again.result) == ("scheduled", NOW + 3600, 0, "Nothing new today.")


async def test_a_restarted_runner_recovers_what_its_earlier_incarnation_held(db: Store) -> None:
    clock, turns = Clock(), FakeTurns()
    row = await tasks.create_task(db, "T", "G", NOW)
    await tasks.claim_due(db, "home#dead", NOW)
    turns.script = [Scripted("Done now.\nSTATUS: done")]
    r = runner(db, turns, clock)
    # Recovered and claimed again in the same poll.
    assert await run_due(r) == [row.id]
    assert r.recovered == [row.id]
    assert turns.cancelled == [row.conversation_id]
    done = await tasks.get_task(db, row.id)
    assert (done.status, done.runs) == ("done", 2)


# -- through the real turn loop and the scripted model over HTTP ----------------------------------

class LoopTurns(FakeTurns):
    """A task's session as the AgentLoop runs it: `run_turn` with the background step cap against
    the scripted OpenAI-compatible server; the judge is a plain call to the same server."""

    def __init__(self, stream: Any, provider: Any) -> None:
        super().__init__()
        self.stream, self.provider = stream, provider

    async def run(self, conversation_id: str, message: str, sources: list[str] | None = None,
                  work_only: bool = False) -> AsyncIterator[TurnEvent]:
        from actors.session.events import TurnResult
        from actors.session.loop import MAX_BACKGROUND_STEPS, run_turn
        from actors.tools.builtin import builtin_toolbox

        self.briefs.append(message)
        messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": message}]
        async for event in run_turn(self.stream, messages, builtin_toolbox(), max_steps=MAX_BACKGROUND_STEPS):
            if isinstance(event, TurnResult):
                yield Done(session_id=conversation_id, message_id="m", text=event.text)
            else:
                yield event

    async def judge(self, messages: list[dict[str, str]]) -> str | None:
        from actors.providers.types import TextDelta

        self.judged.append(messages)
        return "".join([d.text async for d in self.provider.stream("scripted-model", messages, None, timeout=5)
                        if isinstance(d, TextDelta)])


@pytest.fixture
async def loop_turns(model: Any) -> AsyncIterator[LoopTurns]:
    import httpx

    from actors.providers.openai_compat import OpenAICompatProvider

    async with httpx.AsyncClient() as client:
        provider = OpenAICompatProvider("scripted", model.base_url, "k", client)

        def stream(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
            return provider.stream("scripted-model", messages, tools, timeout=5)
        yield LoopTurns(stream, provider)


async def test_status_lines_and_the_judge_through_the_scripted_model(db: Store, model: Any,
                                                                    loop_turns: LoopTurns) -> None:
    from tests import scripted_openai as so

    clock = Clock()
    row = await tasks.create_task(db, "Digest", "Summarise the week", NOW)
    r = runner(db, loop_turns, clock)
    model.enqueue(so.text("Read Monday and Tuesday so far.\nSTATUS: continue"),
                  so.text("I still need Friday."), so.text('{"verdict": "progress"}'),
                  so.text("The week was quiet: two meetings, one launch.\nSTATUS: done"))
    await run_due(r)
    assert (await tasks.get_task(db, row.id)).notes == "[session 1] Read Monday and Tuesday so far."
    clock.now += 60
    await run_due(r)
    second = await tasks.get_task(db, row.id)
    assert second.status == "scheduled" and "[session 2] I still need Friday." in second.notes
    assert len(loop_turns.judged) == 1
    clock.now += 60
    await run_due(r)
    done = await tasks.get_task(db, row.id)
    assert (done.status, done.runs, done.result) == ("done", 3, "The week was quiet: two meetings, one launch.")
    # The third session's brief, as the model received it over HTTP.
    third = model.requests[-1]["body"]["messages"][-1]["content"]
    assert "Stop researching now" in third and "I still need Friday." in third
