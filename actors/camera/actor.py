"""CameraActor "camera:{id}": one per open camera stream, alive while the stream is.

It owns the stream's state (actors/camera/state.py), runs the vision model's looks with their
priority rules (actors/camera/scheduler.py) and context (actors/camera/context.py), the coach
timer, video review jobs and the hand-off to the agent, and pushes every event (typed, in
actors/camera/events.py) into per-listener queues that the gateway replica holding the socket
drains.
Frames never pass through it by value: it gets the object ref the gateway put, and reads the
bytes only when a look or the review history needs them.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import ray
from pydantic import BaseModel

from actors.camera import procedures
from actors.camera.context import ContextBuilder
from actors.camera.events import (
    Alert, Answer, CameraEvent, Coach, Job, Notice, State, Thinking, Viewer, WebRtc, parse_event,
)
from actors.camera.handoff import SessionLink
from actors.camera.look import fast_provider_free, look
from actors.camera.review_job import ask_for_report, review_frames, run_review
from actors.camera.scheduler import LookScheduler
from actors.camera.state import CameraState
from actors.common.background import spawn
from actors.common.errors import ErrorInfo
from actors.common.names import NAMESPACE, actor_name, find_actor_async
from actors.logmask import install_log_masking
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.router_actor import RemoteRouter, router_actor
from actors.recent_errors import report
from actors.session.confirmations import ConfirmationAnswer
from actors.settings import ProviderConfig
from actors.store.store import Store
from vision.frames import decode_jpeg, frame_for_vlm
from vision.perception import Perception, offline_answer
from vision.review import FrameHistory, ReviewReport, TimedFrame
from vision.vlm import VlmAnswer, build_messages

log = logging.getLogger(__name__)

QUEUE_LIMIT = 256
HISTORY_EVERY = 1.0  # seconds between frames kept for "review the last 90 s"


class CameraConfig(BaseModel):
    database_url: str
    vision: list[dict[str, Any]] = []
    timeout: float = 12.0
    review_timeout: float = 40.0
    idle_seconds: float = 120.0
    ocr_every: int = 3
    max_frame_bytes: int = 1_000_000


class CameraActorBase:
    """The actor's body, importable without the @ray.remote wrapper for in-process tests."""

    def __init__(self, stream_id: str, config: CameraConfig, session: Any = None, session_id: str = "") -> None:
        install_log_masking()
        self.stream_id = stream_id
        self.config = config
        # The conversation `session` holds (`session_id`): hand-offs find its actor again by it
        # when that one has exited while the stream went on.
        self.link = SessionLink(session, session_id, stream_id, self.push)
        self.store = Store.open(config.database_url)
        self.state = CameraState()
        configs = [ProviderConfig(**p) for p in config.vision]
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=16))
        self.providers = {p.name: OpenAICompatProvider(p.name, p.base_url, p.api_key, self.client) for p in configs}
        self.router = RemoteRouter(router_actor("vision", configs)) if configs else None
        # The owner's queue exists from the start: events made before its socket subscribes
        # (after a restart in place, the socket subscribes again a moment later) wait there.
        self.listeners: dict[str, asyncio.Queue[CameraEvent | None]] = {"owner": asyncio.Queue(QUEUE_LIMIT)}
        self.frame_ref: list[Any] | None = None
        self.history = FrameHistory()
        self._last_kept = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.looks = LookScheduler(self._spawn)
        self.contexts = ContextBuilder.from_store(self.store, self.state)
        self._jobs = itertools.count(1)
        self._viewers = itertools.count(1)
        self._last_activity = time.monotonic()
        self._timer: asyncio.Task[None] | None = None

    # -- plumbing -------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        # A fresh context: work the socket started must not be cancelled with the call that
        # started it (Ray propagates a caller's cancellation through the context).
        return spawn(coro, self._tasks, fresh_context=True)

    def push(self, event: CameraEvent | dict[str, Any], to: str | None = None) -> None:
        """Queue an event for one listener, or all; a listener too slow to drain its queue
        loses its oldest events rather than holding the stream's memory. A dict is checked
        against its kind's class first."""
        if isinstance(event, dict):
            event = parse_event(event)
        targets = [to] if to else list(self.listeners)
        for name in targets:
            queue = self.listeners.get(name)
            if queue is None:
                continue
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

    async def start(self) -> dict[str, Any]:
        if self._timer is None:
            self._timer = self._spawn(self._tick())
            await self._restore()
        self.listeners.setdefault("owner", asyncio.Queue(QUEUE_LIMIT))
        return self.frame_config()

    # -- what survives a restart ----------------------------------------------------------

    def _state_key(self) -> str:
        return f"camera:{self.stream_id}"

    async def _save(self) -> None:
        """The owner's settings for this stream (goal, procedure, coach) are kept in the store,
        so an actor restarted in place (killed, its node lost) picks them up again."""
        await self.store.set_kv(self._state_key(), {
            "goal": self.state.goal, "procedure_id": self.state.procedure_id, "coach_on": self.state.coach_on,
            "coach_interval": self.state.coach.interval})

    async def _restore(self) -> None:
        saved = await self.store.get_kv(self._state_key())
        if not saved:
            return
        if saved.get("procedure_id"):
            procedure = await procedures.get(self.store, saved["procedure_id"])
            if procedure is not None:
                self.state.set_procedure(saved["procedure_id"], procedure)
        self.state.goal = saved.get("goal", "")
        self.state.set_coach(bool(saved.get("coach_on")), saved.get("coach_interval"))
        log.info("camera %s restarted; settings restored from the store", self.stream_id)

    def pid(self) -> int:
        """This actor's process id (fault tests kill it)."""
        return os.getpid()

    async def events(self, listener: str = "owner") -> AsyncIterator[CameraEvent]:
        """A listener's events. A new subscription for the same listener takes over (what was
        queued moves with it) and ends the old one: a socket that subscribes again after a
        restart must not share its events with a stream whose reader is gone."""
        old = self.listeners.get(listener)
        queue: asyncio.Queue[CameraEvent | None] = asyncio.Queue(QUEUE_LIMIT)
        if old is not None:
            while not old.empty():
                item = old.get_nowait()
                if item is not None:
                    queue.put_nowait(item)
            old.put_nowait(None)
        self.listeners[listener] = queue
        while True:
            event = await queue.get()
            if event is None:
                return
            yield event

    async def close(self) -> None:
        for queue in self.listeners.values():
            queue.put_nowait(None)
        for task in list(self._tasks):
            task.cancel()
        try:
            await self.store.delete_kv(self._state_key())
        except Exception as exc:  # noqa: BLE001 - closing goes on; the row is only settings
            log.warning("camera %s: settings not cleared: %s", self.stream_id, exc)
        await self.client.aclose()
        await self.store.close()

    def frame_config(self) -> dict[str, Any]:
        instrument = self.state.instrument()
        return {"ocr_every": self.config.ocr_every,
                "instrument": instrument.model_dump() if instrument else None}

    async def _tick(self) -> None:
        """Once a second: the coach look when due, and exit after a long silence (a socket
        whose replica died never says goodbye)."""
        while True:
            await asyncio.sleep(1.0)
            if time.monotonic() - self._last_activity > self.config.idle_seconds:
                log.info("camera %s idle; exiting", self.stream_id)
                await self.close()
                ray.actor.exit_actor()
            if self.state.coach_on and self.state.coach.due() and self.frame_ref is not None:
                self.state.coach.looked()
                self._start_background("coach")

    # -- frames ---------------------------------------------------------------------------

    async def observe(self, perception: dict[str, Any], frame: list[Any], t: float | None = None) -> dict[str, Any]:
        """One frame's perception (the gateway ran it); returns the config for the next frame."""
        self._last_activity = time.monotonic()
        self.frame_ref = frame
        seen = Perception.model_validate(perception)
        notice = self.state.observe(seen)
        now = time.monotonic() if t is None else t
        if now - self._last_kept >= HISTORY_EVERY:
            self._last_kept = now
            self.history.add(now, await frame[0])
        if notice:
            self._start_background("notice", notice)
        return self.frame_config()

    async def observe_text(self, text: str) -> None:
        """The OCR lane's result for a recent frame."""
        self._last_activity = time.monotonic()
        notice = self.state.observe_text(text)
        if notice:
            self._start_background("notice", notice)

    async def _frame_b64(self) -> str:
        data: bytes = await self.frame_ref[0]  # type: ignore[index]
        image = await asyncio.to_thread(decode_jpeg, data)
        return base64.b64encode(await asyncio.to_thread(frame_for_vlm, image)).decode()

    # -- looks ----------------------------------------------------------------------------

    def _fallback(self) -> VlmAnswer:
        last = self.state.last or Perception(width=0, height=0, frame_index=0)
        return offline_answer(last, ocr_text=self.state.ocr_text, instrument=self.state.instrument())

    async def ask(self, question: str, source: str = "owner") -> dict[str, Any]:
        """A person's question: preempts any background look, always gets an answer (the
        `answer` event's fields, or the bare answer when no frame has arrived)."""
        self._last_activity = time.monotonic()
        return await self.looks.question(lambda: self._answer(question, source))

    async def _answer(self, question: str, source: str) -> dict[str, Any]:
        self.push(Thinking(question=question))
        if self.frame_ref is None:
            answer = VlmAnswer(say="No frame has arrived yet; point the camera and ask again.", status="unsure")
            self.push(Answer.of(question, answer, "none"))
            return answer.model_dump()
        started = time.monotonic()
        # The context's store reads and the frame's re-encoding, side by side.
        context, frame = await asyncio.gather(self.contexts.build(question), self._frame_b64())
        messages = build_messages(context, frame, mode="question", question=question)
        result = await look(self.router, self.providers, messages, timeout=self.config.timeout,
                            person_waiting=True, fallback=self._fallback)
        checked = self.state.check(result.answer, question)
        answer = checked.answer
        event = Answer.of(question, answer, result.source, crosscheck=checked.verdict,
                          elapsed_ms=round((time.monotonic() - started) * 1000, 1))
        self.push(event)
        self._after_verdict(answer, checked.advance)
        if source == "owner" and self.link.linked:
            self._spawn(self.link.hand_off(question, answer))
        return event.wire()

    def _after_verdict(self, answer: VlmAnswer, advance: Any) -> None:
        if answer.status in ("warning", "danger"):
            self.push(Alert(status=answer.status, say=answer.say))
        if advance is not None and advance.advanced:
            self.push(self._state_event())

    def _state_event(self) -> State:
        return State(**self.state.state())

    def _start_background(self, mode: str, text: str = "") -> None:
        """Coach and notice looks: one at a time, never while a question is being answered; a
        look that cannot start now is dropped, not queued."""
        self.looks.background(lambda: self._background_look(mode, text))

    async def _background_look(self, mode: str, text: str = "") -> None:
        if not await fast_provider_free(self.router):
            return
        try:
            context, frame = await asyncio.gather(self.contexts.build(text or self.state.goal), self._frame_b64())
            messages = build_messages(context, frame, mode=mode, question=text)  # type: ignore[arg-type]
            result = await look(self.router, self.providers, messages, timeout=self.config.timeout,
                                person_waiting=False, fallback=lambda: VlmAnswer(say="", status="ok"))
            if result.source != "model":
                return
            checked = self.state.check(result.answer, None)
            answer = checked.answer
            if mode == "coach":
                line = self.state.coach.line_to_say(answer, self.state.instrument())
                if line:
                    self.push(Coach(say=line, status=answer.status))
            elif answer.say.strip() and self.state.coach.suppressor.allow(answer.say):
                self.push(Notice(text=text, say=answer.say, status=answer.status))
            self._after_verdict(answer, checked.advance)
        except asyncio.CancelledError:
            pass  # a person asked meanwhile
        except Exception as exc:  # noqa: BLE001 - background boundary
            log.exception("%s look failed", mode)
            report(f"camera.{mode}", exc, request={"stream": self.stream_id})

    # -- the agent ------------------------------------------------------------------------

    async def confirm(self, confirmation_id: str, approve: bool, pin: str | None) -> ConfirmationAnswer | ErrorInfo:
        """The owner answers a confirmation the hand-off turn asked for (handoff.py)."""
        return await self.link.confirm(confirmation_id, approve, pin)

    # -- settings from the socket ---------------------------------------------------------

    async def set_procedure(self, procedure_id: int | None) -> State | ErrorInfo:
        procedure = await procedures.get(self.store, procedure_id) if procedure_id else None
        if procedure_id and procedure is None:
            return ErrorInfo(code="not_found", message=f"No procedure {procedure_id}.")
        self.state.set_procedure(procedure_id, procedure)
        await self._save()
        state = self._state_event()
        self.push(state)
        return state

    async def set_goal(self, goal: str) -> None:
        self.state.goal = goal[:300]
        await self._save()
        self.push(self._state_event())

    async def set_coach(self, on: bool, interval: float | None = None) -> None:
        self.state.set_coach(on, interval)
        await self._save()
        self.push(self._state_event())

    # -- video review ---------------------------------------------------------------------

    async def review(self, seconds: float = 90.0, question: str = "", file_id: int | None = None) -> int:
        """Start a review job; progress arrives as `job` events, the result as `report`."""
        job = next(self._jobs)
        # Queued is said here, before the job can run, so it always comes first on the socket.
        self.push(Job(job=job, stage="queued", progress=0.0))
        self._spawn(self._review(job, seconds, question, file_id))
        return job

    async def _review(self, job: int, seconds: float, question: str, file_id: int | None) -> None:
        def failed(exc: Exception) -> None:
            log.error("review failed", exc_info=exc)
            report("camera.review", exc, request={"stream": self.stream_id})

        async def ask(frames: list[TimedFrame]) -> ReviewReport:
            return await ask_for_report(self.router, self.providers, frames, goal=self.state.goal, question=question,
                                        timeout=self.config.review_timeout)

        await run_review(job, self.push, lambda: review_frames(self.store, self.history, seconds, file_id), ask, failed)

    # -- watch-only viewers (WebRTC signalling only) -------------------------------------

    async def add_viewer(self) -> str:
        viewer = f"viewer:{next(self._viewers)}"
        self.listeners[viewer] = asyncio.Queue(QUEUE_LIMIT)
        self.push(Viewer(viewer=viewer, joined=True), to="owner")
        return viewer

    async def remove_viewer(self, viewer: str) -> None:
        queue = self.listeners.pop(viewer, None)
        if queue is not None:
            queue.put_nowait(None)
            self.push(Viewer(viewer=viewer, joined=False), to="owner")

    async def signal(self, sender: str, message: dict[str, Any]) -> bool:
        """Relay an offer, answer or ICE candidate: a viewer's goes to the owner's socket, the
        owner's goes to the viewer it names."""
        target = "owner" if sender != "owner" else str(message.get("to", ""))
        if target not in self.listeners:
            return False
        fields = {k: v for k, v in message.items() if k not in ("type", "to", "from")}
        self.push(WebRtc(sender=sender, **fields), to=target)
        return True


# Restarted in place when killed: the socket's replica keeps the same handle, subscribes to
# its events again and calls `start`, which restores the stream's settings from the store.
@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class CameraActor(CameraActorBase):
    pass


def camera_actor(stream_id: str, config: CameraConfig, session: Any = None,
                 placement: dict[str, Any] | None = None, session_id: str = "") -> Any:
    """The stream's actor, handing off to `session` (conversation `session_id`); `placement`
    (actors.common.placement) says which node it prefers."""
    return CameraActor.options(name=f"camera:{stream_id}", namespace=NAMESPACE, get_if_exists=True,
                               **(placement or {})).remote(stream_id, config, session, session_id)


async def find_camera(stream_id: str) -> Any | None:
    return await find_actor_async(actor_name("camera", stream_id))
