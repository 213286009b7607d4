"""The task runner, without Ray: poll, claim due rows, run each as a background session, and
write what the protocol decides, fenced on the claim.

Every 15 s (or at once when woken) it says it is alive, puts back rows left `running` by a dead
runner, and claims due rows while fewer than two of its own run. A task runs as one unattended
background turn in its own conversation (channel "task"); a reminder only queues its
notification. A session has 15 minutes; a task cancelled meanwhile is stopped at its next step.
The Ray side (the session actor, the agent's judge and playbook calls) comes in as `TaskTurns`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from actors.common.background import spawn
from actors.scheduler import protocol, tasks
from actors.scheduler.autonomy.actions import is_autonomy_task
from actors.scheduler.tasks import Task
from actors.session.events import Done, ToolActivity, TurnError, TurnEvent
from actors.store.models import OutboxItem
from actors.store.store import Store

log = logging.getLogger(__name__)

POLL_SECONDS = 15.0
PARALLEL = 2
TIMEOUT_SECONDS = 15 * 60.0
# A runner whose heartbeat is older than this is presumed dead (four missed polls).
STALE_AFTER_SECONDS = 4 * POLL_SECONDS
# How often a running task looks whether it was cancelled, besides at each tool step.
CANCEL_CHECK_SECONDS = 2.0
LAST_ERRORS = 20


class TaskTurns(Protocol):
    """What a task needs from the rest of the house."""

    async def open(self, conversation_id: str) -> None:
        """Make sure the task's conversation (channel "task") exists."""

    def run(self, conversation_id: str, message: str, sources: list[str] | None = None,
            work_only: bool = False) -> AsyncIterator[TurnEvent]:
        """One unattended background turn's events. `sources` names what the brief carries
        that is not the owner's words; `work_only` offers the owner-only work tools alone."""

    async def cancel(self, conversation_id: str) -> None:
        """Stop that conversation's running turn."""

    async def judge(self, messages: list[dict[str, str]]) -> str | None:
        """One plain model call (None: no model answered)."""

    async def distill(self, work: str, conversation_id: str) -> None:
        """Playbook distillation of finished work."""


@dataclass
class RunnerSettings:
    poll_seconds: float = POLL_SECONDS
    parallel: int = PARALLEL
    timeout: float = TIMEOUT_SECONDS
    stale_after: float = STALE_AFTER_SECONDS
    cancel_check: float = CANCEL_CHECK_SECONDS


@dataclass
class TaskRun:
    """What one run of a task produced (one turn in the task's conversation)."""

    text: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    stopped: bool = False      # the row was cancelled (or rescued) while it ran
    timed_out: bool = False


@dataclass
class Running:
    task: Task
    since: float
    job: asyncio.Task[Any]


def resolve_verdict(report: str, judged: str | None) -> protocol.Verdict:
    """The judge's verdict on a report without a STATUS line. With no judge answer (no model
    configured, or it failed) a non-empty report is taken as the deliverable: another session
    with the same model would not learn the protocol either."""
    return protocol.parse_judgement(judged) or ("done" if report.strip() else "continue")


class TaskRunner:
    def __init__(self, store: Store, turns: TaskTurns, runner_id: str, clock: Callable[[], float] = time.time,
                 settings: RunnerSettings | None = None, tz: Any = None,
                 on_error: Callable[[str, BaseException], None] | None = None) -> None:
        self.store, self.turns, self.id, self.clock = store, turns, runner_id, clock
        self.settings = settings or RunnerSettings()
        self.tz = tz
        self.on_error = on_error
        self.running: dict[int, Running] = {}
        self.errors: deque[dict[str, Any]] = deque(maxlen=LAST_ERRORS)
        self.last_poll: float | None = None
        self.recovered: list[int] = []
        self._woken = asyncio.Event()
        self._after: set[asyncio.Task[Any]] = set()

    # -- the loop -------------------------------------------------------------------------------

    async def serve_forever(self) -> None:
        """Poll until cancelled; a failed poll is recorded and the next one goes on."""
        while True:
            try:
                await self.tick()
            except Exception as exc:
                log.exception("task runner poll failed")
                self._error("poll", exc)
            self._woken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.settings.poll_seconds)

    def wake(self) -> None:
        """Poll now (a task was just created)."""
        self._woken.set()

    async def tick(self) -> list[int]:
        """One poll: heartbeat, recovery, then claims up to the free slots; the ids started."""
        now = self.clock()
        self.last_poll = now
        await tasks.beat(self.store, self.id, now)
        rescued = await tasks.recover(self.store, self.id, now, self.settings.timeout + self.settings.poll_seconds,
                                      self.settings.stale_after)
        if rescued:
            log.warning("recovered tasks left running by a dead runner: %s", rescued)
            self.recovered = (self.recovered + rescued)[-LAST_ERRORS:]
        started: list[int] = []
        while len(self.running) < self.settings.parallel:
            task = await tasks.claim_due(self.store, self.id, self.clock())
            if task is None:
                break
            job = asyncio.get_running_loop().create_task(self._guarded(task))
            self.running[task.id] = Running(task, self.clock(), job)
            job.add_done_callback(lambda _j, tid=task.id: self._done(tid))
            started.append(task.id)
        return started

    def _done(self, task_id: int) -> None:
        self.running.pop(task_id, None)
        # A slot came free: look for the next due row now rather than at the next poll.
        self._woken.set()

    async def drain(self) -> None:
        """Wait for the running tasks and their follow-ups (tests)."""
        while self.running or self._after:
            await asyncio.gather(*[r.job for r in self.running.values()], *self._after, return_exceptions=True)

    async def stop(self) -> None:
        """Stop the running sessions and hand their rows back, due now, for the next runner."""
        for running in list(self.running.values()):
            running.job.cancel()
            if running.task.conversation_id:
                with contextlib.suppress(Exception):
                    await self.turns.cancel(running.task.conversation_id)
        await asyncio.gather(*[r.job for r in self.running.values()], return_exceptions=True)
        await tasks.release(self.store, self.id, self.clock())

    def _error(self, where: str, exc: BaseException, task_id: int | None = None) -> None:
        self.errors.append({"at": self.clock(), "where": where, "task_id": task_id,
                            "error": f"{type(exc).__name__}: {exc}"[:500]})
        if self.on_error:
            self.on_error(f"scheduler.{where}", exc)

    async def _guarded(self, task: Task) -> None:
        try:
            await self.run_task(task)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("task %s failed", task.id)
            self._error("task", exc, task.id)
            outcome = protocol.unfinished(task, f"the session failed ({type(exc).__name__})", self.clock(),
                                          self.tz, error=str(exc)[:500])
            await self._write(task, outcome)

    # -- one task -------------------------------------------------------------------------------

    async def run_task(self, task: Task) -> protocol.Outcome | None:
        """Run one claimed row; the outcome written, or None when the claim was lost."""
        if task.kind == "reminder":
            return await self._remind(task)
        run = await self._run(task)
        now = self.clock()
        if run.stopped:
            return None
        if run.timed_out or run.error:
            why = (f"the session ran past {self.settings.timeout / 60:.0f} minutes and was stopped"
                   if run.timed_out else f"the session failed: {run.error}")
            return await self._write(task, protocol.unfinished(task, f"{run.text}\n({why})".strip(), now,
                                                               self.tz, error=why))
        verdict = protocol.read_status(run.text)
        if verdict is None:
            verdict = resolve_verdict(run.text, await self._judge(task, run.text))
        outcome = protocol.decide(task, run.text, verdict, run.tools, now, self.tz)
        return await self._write(task, outcome, distill=not run.tools)

    async def _run(self, task: Task) -> TaskRun:
        assert task.conversation_id is not None
        cid = task.conversation_id
        await self.turns.open(cid)
        if task.id in self.recovered:
            # Its dead runner's turn may still be going in the conversation: stop it first, so
            # the rescued session does not queue behind it (or repeat its work beside it).
            await self.turns.cancel(cid)
        out = TaskRun()
        watcher = asyncio.get_running_loop().create_task(self._watch(task, out))
        try:
            async with asyncio.timeout(self.settings.timeout):
                sources, work_only = await self._trust(task)
                async for event in self.turns.run(cid, protocol.brief(task, task.runs), sources, work_only):
                    if isinstance(event, ToolActivity):
                        if event.status == "start":
                            # A step is about to act: stop here if the owner cancelled meanwhile.
                            if not await tasks.is_open(self.store, task.id, self.id):
                                out.stopped = True
                                await self.turns.cancel(cid)
                        else:
                            out.tools.append({"name": event.name, "status": event.status,
                                              "files": list(event.files or [])})
                    elif isinstance(event, Done):
                        out.text = event.text
                        if event.cancelled and not out.stopped:
                            out.error = "the turn was stopped"
                    elif isinstance(event, TurnError):
                        out.error = event.error.message
        except TimeoutError:
            out.timed_out = True
            await self.turns.cancel(cid)
        finally:
            watcher.cancel()
        return out

    async def _trust(self, task: Task) -> tuple[list[str], bool]:
        """A brief the autonomy loop wrote is not the owner's words, and neither are notes
        carried from earlier sessions (written after reading whatever those sessions read):
        either taints the turn (`task:<id>`), so no action runs unattended. The loop's own
        tasks also get only the owner-only work tools."""
        work_only = await is_autonomy_task(self.store, task.id)
        carried = task.runs > 0 and bool(task.notes.strip())
        return ([f"task:{task.id}"] if work_only or carried else []), work_only

    async def _watch(self, task: Task, out: TaskRun) -> None:
        """Between steps too: a cancelled row stops its turn within `cancel_check` seconds."""
        while True:
            await asyncio.sleep(self.settings.cancel_check)
            if not await tasks.is_open(self.store, task.id, self.id):
                out.stopped = True
                await self.turns.cancel(task.conversation_id or "")
                return

    async def _judge(self, task: Task, report: str) -> str | None:
        try:
            return await self.turns.judge(protocol.judge_messages(task, report))
        except Exception as exc:  # noqa: BLE001 - a failed judge falls back to the default verdict
            self._error("judge", exc, task.id)
            return None

    async def _remind(self, task: Task) -> protocol.Outcome | None:
        now = self.clock()
        again = tasks.parse_repeat(task.repeat).next_after(now, self.tz) if task.repeat else None
        outcome = protocol.Outcome(status="scheduled" if again else "done", next_run=again,
                                   result=f"reminded at {now:.0f}", runs=0 if again else None)
        notice = OutboxItem(kind="reminder", title=f"Reminder: {task.title}", body=task.goal,
                            data={"task_id": task.id}, ts=now)
        if not await tasks.finish(self.store, task.id, self.id, now, status=outcome.status, result=outcome.result,
                                  next_run=outcome.next_run, runs=outcome.runs, notice=notice):
            return None
        return outcome

    async def _write(self, task: Task, outcome: protocol.Outcome, distill: bool = False) -> protocol.Outcome | None:
        """The fenced finish, then what follows a finished or abandoned task. `distill`: a
        finished session that ran tools is distilled by its session actor already (a background
        turn's rule, which also keeps turns that read outside content out of the playbook), so
        only a tool-less one is distilled here."""
        now = self.clock()
        written = await tasks.finish(self.store, task.id, self.id, now, status=outcome.status, result=outcome.result,
                                     notes=outcome.notes, error=outcome.error, next_run=outcome.next_run,
                                     runs=outcome.runs, notice=self._notice(task, outcome, now))
        if not written:
            log.info("task %s was cancelled or rescued while it ran; its outcome is dropped", task.id)
            return None
        if outcome.finished and distill:
            self._follow_up(self._distill(task, outcome))
        return outcome

    @staticmethod
    def _notice(task: Task, outcome: protocol.Outcome, now: float) -> OutboxItem | None:
        """The owner's notification of a finished or abandoned task (None for another session)."""
        data = {"task_id": task.id, "conversation_id": task.conversation_id}
        if outcome.finished:
            body = protocol.first_sentence(outcome.result or "") or "Your task is finished."
            return OutboxItem(kind="task_done", session_id=task.conversation_id, title=f"Task done: {task.title}",
                              body=body, data=data, ts=now)
        if outcome.gave_up:
            return OutboxItem(kind="task_failed", session_id=task.conversation_id,
                              title=f"Task not finished: {task.title}", body=outcome.error or "", data=data, ts=now)
        return None

    def _follow_up(self, coro: Any) -> None:
        spawn(coro, self._after)

    async def _distill(self, task: Task, outcome: protocol.Outcome) -> None:
        work = (f"Background task: {task.title}\nGoal: {task.goal[:600]}\n"
                f"Sessions: {task.runs}\nResult: {(outcome.result or '')[:1500]}")
        try:
            await self.turns.distill(work, task.conversation_id or "")
        except Exception as exc:  # noqa: BLE001 - learning is best effort; the task is done
            self._error("playbook", exc, task.id)

    # -- what GET /v1/scheduler shows -------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        due = await tasks.upcoming(self.store, limit=10)
        next_poll = (self.last_poll + self.settings.poll_seconds) if self.last_poll is not None else None
        return {
            "runner": self.id,
            "poll_seconds": self.settings.poll_seconds,
            "parallel": self.settings.parallel,
            "timeout_seconds": self.settings.timeout,
            "last_poll": self.last_poll,
            "next_poll": next_poll,
            "running": [{"task_id": r.task.id, "title": r.task.title, "since": r.since, "session": r.task.runs,
                         "conversation_id": r.task.conversation_id} for r in self.running.values()],
            "next_due": [{"task_id": t.id, "title": t.title, "kind": t.kind, "status": t.status,
                          "next_run": t.next_run} for t in due if t.status == "scheduled"],
            "recovered": list(self.recovered),
            "last_errors": list(self.errors)[::-1],
        }
