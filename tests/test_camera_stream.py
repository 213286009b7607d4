"""The camera stream's socket core and the actor's pure parts, without Ray and without a socket:
the frame-ack gate, the OCR lane, message dispatch, spoken questions through real HTTP to a
local speech server (one that fails, one that answers), the look scheduler, the look's context
and the typed events' wire JSON."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from actors.camera.context import ContextBuilder, owner_profile
from actors.camera.events import (
    Agent,
    Answer,
    CameraEvent,
    ErrorEvent,
    Job,
    PerceptionEvent,
    State,
    WebRtc,
    parse_event,
    wire,
)
from actors.camera.gate import FrameGate
from actors.camera.ocr_lane import OcrLane
from actors.camera.scheduler import LookScheduler
from actors.camera.state import CameraState
from actors.camera.stream import StreamCore
from actors.common.errors import ErrorInfo
from actors.session.confirmations import ConfirmationAnswer
from vision.vlm import Reading, VlmAnswer

JPEG = b"\xff\xd8\xff" + b"\0" * 32
DEADLINE = 5.0


# -- a local speech server ----------------------------------------------------------------------


class SpeechServer:
    """/fail/... answers 500; /ok/... answers a transcript. Records each request's path."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.paths.append(self.path)
                if self.path.startswith("/fail/"):
                    body, status = b'{"error": {"message": "scripted failure"}}', 500
                else:
                    body, status = b'{"text": "which platform is this"}', 200
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, prefix: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{prefix}/v1"

    def env(self, *prefixes: str) -> dict[str, str]:
        return {"IRIIS_PROVIDERS": json.dumps([
            {"name": prefix, "base_url": self.url(prefix), "models": ["stt"], "kinds": ["speech"]}
            for prefix in prefixes])}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def speech() -> Iterator[SpeechServer]:
    server = SpeechServer()
    yield server
    server.stop()


# -- fakes for the two ports ------------------------------------------------------------------


class FakeCamera:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.observed: list[tuple[dict[str, Any], Any]] = []
        self.texts: list[str] = []
        self.asked_event = asyncio.Event()

    async def start(self) -> dict[str, Any]:
        return {"ocr_every": 2, "instrument": None}

    async def ask(self, question: str) -> Any:
        self.asked.append(question)
        self.asked_event.set()
        return {}

    async def set_goal(self, goal: str) -> None: ...

    async def set_procedure(self, procedure_id: int | None) -> State | ErrorInfo:
        return ErrorInfo(code="not_found", message=f"No procedure {procedure_id}.")

    async def set_coach(self, on: bool, interval: float | None) -> None: ...

    async def review(self, seconds: float, question: str, file_id: int | None) -> int:
        return 7

    async def confirm(self, confirmation_id: str, approve: bool, pin: str | None) -> ConfirmationAnswer | ErrorInfo:
        if confirmation_id == "gone":
            return ErrorInfo(code="not_found", message="No confirmation gone.")
        return ConfirmationAnswer(id=confirmation_id, status="approved" if approve else "declined")

    async def signal(self, sender: str, message: dict[str, Any]) -> bool:
        return False

    async def observe(self, perception: dict[str, Any], frame: Any) -> dict[str, Any]:
        self.observed.append((perception, frame))
        return {"ocr_every": 2, "instrument": None}

    async def observe_text(self, text: str) -> None:
        self.texts.append(text)


class FakePerception:
    def __init__(self, release: asyncio.Event | None = None) -> None:
        self.release = release
        self.calls: list[tuple[int, dict[str, Any]]] = []

    def put(self, data: bytes) -> Any:
        return ("ref", len(data))

    async def perceive(self, frame: Any, index: int, **options: Any) -> dict[str, Any]:
        self.calls.append((index, options))
        if self.release is not None and options.get("ocr") is False:
            await self.release.wait()
        if options.get("detect") is False:
            return {"ocr_ran": True, "ocr_lines": [{"text": "EXIT"}], "timings_ms": {"ocr": 3.0}}
        return {"detections": [], "ocr_ran": False, "dial": None, "timings_ms": {"detect": 1.0}}


class Collector:
    """The socket's send: keeps the wire JSON, and lets a test wait for a kind of event."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()

    async def __call__(self, event: CameraEvent) -> None:
        async with self._changed:
            self.sent.append(event.wire())
            self._changed.notify_all()

    async def next(self, kind: str, **match: Any) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.sent if e["type"] == kind and all(e.get(k) == v for k, v in match.items())),
                        None)

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(found), DEADLINE)
        return found()  # type: ignore[return-value]


def core(env: dict[str, str] | None = None, perception: FakePerception | None = None
         ) -> tuple[StreamCore, FakeCamera, Collector]:
    camera, sent = FakeCamera(), Collector()
    stream = StreamCore(camera, perception or FakePerception(), sent, limit=1000, frame_config={"ocr_every": 2},
                        environ=env or {})
    return stream, camera, sent


def audio_message() -> str:
    return json.dumps({"type": "audio", "data": base64.b64encode(b"\x1aE\xdf\xa3 webm").decode(),
                       "mime": "audio/webm"})


# -- spoken questions -------------------------------------------------------------------------


async def test_a_failing_speech_provider_sends_the_client_an_error_event_with_its_code(speech: SpeechServer) -> None:
    stream, camera, sent = core(speech.env("fail"))
    assert await stream.on_text(audio_message())
    error = await sent.next("error")
    assert error["code"] == "speech_failed"
    assert set(error) == {"type", "code", "message"}
    assert camera.asked == [] and not [e for e in sent.sent if e["type"] == "transcript"]
    await stream.idle()


async def test_speech_fails_over_to_the_next_provider_then_asks(speech: SpeechServer) -> None:
    speech.paths.clear()
    stream, camera, sent = core(speech.env("fail", "ok"))
    assert await stream.on_text(audio_message())
    assert (await sent.next("transcript"))["text"] == "which platform is this"
    await asyncio.wait_for(camera.asked_event.wait(), DEADLINE)
    assert camera.asked == ["which platform is this"]
    assert speech.paths == ["/fail/v1/audio/transcriptions", "/ok/v1/audio/transcriptions"]


async def test_speech_without_a_provider_or_with_bad_base64_is_refused_by_code(speech: SpeechServer) -> None:
    stream, _, sent = core({})
    await stream.on_text(audio_message())
    assert (await sent.next("error"))["code"] == "speech_not_configured"
    stream, _, sent = core(speech.env("ok"))
    await stream.on_text(json.dumps({"type": "audio", "data": "not base64!!"}))
    assert (await sent.next("error"))["code"] == "bad_audio"


# -- text messages ----------------------------------------------------------------------------


async def test_a_malformed_message_is_a_bad_message_error_and_breaks_the_protocol() -> None:
    stream, _, sent = core()
    assert not await stream.on_text('{"type": "ask", "text": ""}')
    assert sent.sent[-1]["code"] == "bad_message" and sent.sent[-1]["message"].startswith("ask.text")


async def test_messages_are_dispatched_and_answered_in_their_wire_shape() -> None:
    stream, camera, sent = core()
    assert await stream.on_text('{"type": "ping"}')
    assert await stream.on_text('{"type": "review", "seconds": 30}')
    assert await stream.on_text('{"type": "confirm", "id": "c1", "approve": false}')
    assert await stream.on_text('{"type": "confirm", "id": "gone", "approve": true}')
    assert await stream.on_text('{"type": "procedure", "id": 9}')
    assert await stream.on_text('{"type": "webrtc", "to": "viewer:3", "sdp": "x"}')
    assert await stream.on_text('{"type": "ask", "text": "what is this?"}')
    await asyncio.wait_for(camera.asked_event.wait(), DEADLINE)
    assert sent.sent == [
        {"type": "pong"},
        {"type": "confirmation", "id": "c1", "status": "declined"},
        # A refusal keeps the confirmation's wire shape ({error, message}), not the error event's.
        {"type": "confirmation", "error": "not_found", "message": "No confirmation gone."},
        {"type": "error", "code": "not_found", "message": "No procedure 9."},
        {"type": "error", "code": "no_viewer", "message": "No viewer 'viewer:3'."},
    ]
    assert camera.asked == ["what is this?"]


# -- frames: the ack gate and the OCR lane ----------------------------------------------------


async def test_frames_are_acked_as_work_starts_and_a_third_unacked_frame_breaks_the_protocol() -> None:
    release = asyncio.Event()
    stream, camera, sent = core(perception=FakePerception(release))
    assert stream.on_frame(JPEG)
    await sent.next("frame_ack", frame=1)
    assert stream.on_frame(JPEG)  # one may wait
    assert not stream.on_frame(JPEG)  # a second waiting one may not
    release.set()
    await sent.next("perception", frame=2, detections=[])
    await stream.idle()
    assert [e["frame"] for e in sent.sent if e["type"] == "frame_ack"] == [1, 2]
    assert len(camera.observed) == 2


async def test_a_bad_frame_is_numbered_acked_and_reported_with_its_frame() -> None:
    stream, _, sent = core()
    assert stream.on_frame(b"\x89PNG" + b"\0" * 10)
    error = await sent.next("error")
    assert error == {"type": "error", "code": "not_jpeg", "message": "Frames must be JPEG images.", "frame": 1}
    assert sent.sent[0] == {"type": "frame_ack", "frame": 1}


async def test_the_ocr_lane_reads_every_nth_frame_and_reports_only_its_text() -> None:
    stream, camera, sent = core()
    for _ in range(3):
        assert stream.on_frame(JPEG)
        await stream.idle()
    lane = [e for e in sent.sent if e["type"] == "perception" and "detections" not in e]
    assert lane == [{"type": "perception", "frame": 1, "ocr": "EXIT", "timings_ms": {"ocr": 3.0}},
                    {"type": "perception", "frame": 3, "ocr": "EXIT", "timings_ms": {"ocr": 3.0}}]
    assert camera.texts == ["EXIT", "EXIT"]


async def test_the_ocr_lane_skips_frames_while_busy() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def read(index: int, frame: Any) -> None:
        started.set()
        await release.wait()

    lane = OcrLane(read)
    assert lane.offer(1, "f1", every=1)
    await asyncio.wait_for(started.wait(), DEADLINE)
    assert not lane.offer(2, "f2", every=1)  # busy: dropped, not queued
    release.set()
    await asyncio.wait_for(lane.task, DEADLINE)  # type: ignore[arg-type]
    assert not lane.offer(3, "f3", every=5) and lane.offer(6, "f6", every=5)
    lane.cancel()


async def test_the_gate_numbers_frames_in_arrival_order() -> None:
    seen: list[tuple[str, int]] = []

    async def ack(index: int) -> None:
        seen.append(("ack", index))

    async def work(index: int, item: Any) -> None:
        seen.append(("work", index))

    gate = FrameGate(100, ack, work)
    assert gate.offer(JPEG) and gate.offer(JPEG)
    await gate.idle()
    assert seen == [("ack", 1), ("work", 1), ("ack", 2), ("work", 2)]


# -- the look scheduler -----------------------------------------------------------------------


def scheduler() -> LookScheduler:
    return LookScheduler(lambda coro: asyncio.get_running_loop().create_task(coro))


async def test_a_question_preempts_the_background_look() -> None:
    looks = scheduler()
    running, cancelled = asyncio.Event(), asyncio.Event()

    async def coach() -> None:
        running.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    assert looks.background(coach)
    await asyncio.wait_for(running.wait(), DEADLINE)

    async def answer() -> str:
        return "answered"

    assert await looks.question(answer) == "answered"
    await asyncio.wait_for(cancelled.wait(), DEADLINE)
    assert looks.asking == 0


async def test_background_looks_are_dropped_while_one_runs_or_a_question_is_answered() -> None:
    looks = scheduler()
    release, fourth = asyncio.Event(), asyncio.Event()
    started: list[str] = []

    async def look(name: str) -> None:
        started.append(name)
        if name == "fourth":
            fourth.set()
        await release.wait()

    assert looks.background(lambda: look("first"))
    assert not looks.background(lambda: look("second"))  # one at a time: dropped, not queued
    in_question = asyncio.Event()

    async def answer() -> None:
        in_question.set()
        await release.wait()

    question = asyncio.get_running_loop().create_task(looks.question(answer))
    await asyncio.wait_for(in_question.wait(), DEADLINE)
    assert not looks.background(lambda: look("third"))  # never beside a question
    release.set()
    await asyncio.wait_for(question, DEADLINE)
    assert looks.background(lambda: look("fourth"))
    await asyncio.wait_for(fourth.wait(), DEADLINE)
    assert started == ["first", "fourth"]


# -- the look's context -----------------------------------------------------------------------


async def test_the_context_has_the_profile_and_best_excerpt_and_reads_documents_once() -> None:
    loads = 0

    async def persona() -> dict[str, Any]:
        return {"address": "Sam", "purpose": "repairs", "secret": "never shown", "avoid": ""}

    async def items() -> list[Any]:
        return []

    async def documents() -> list[tuple[str, str]]:
        nonlocal loads
        loads += 1
        return [("boiler.txt", "The boiler valve must be opened slowly to 30 kPa."),
                ("cake.txt", "Whisk eggs and sugar until pale.")]

    state = CameraState()
    state.goal = "open the boiler valve"
    builder = ContextBuilder(state, persona=persona, items=items, documents=documents, clock=lambda: 1000.0)
    context = await builder.build("how far do I open the valve?")
    assert context.owner_profile == "address: Sam; purpose: repairs"
    assert context.goal == "open the boiler valve"
    assert context.excerpts and "boiler valve" in context.excerpts[0]
    await builder.build("again")
    assert loads == 1
    assert owner_profile(None) == ""


# -- the typed events on the wire -------------------------------------------------------------


def test_events_keep_the_wire_json_of_the_dicts_they_replace() -> None:
    answer = VlmAnswer(say="42 kPa", status="ok", reading=Reading(value=42, unit="kPa", confidence=0.9))
    assert Answer.of("gauge?", answer, "model", crosscheck="agrees", elapsed_ms=12.5).wire() == {
        "type": "answer", "question": "gauge?", "say": "42 kPa", "status": "ok",
        "reading": {"value": 42.0, "unit": "kPa", "confidence": 0.9}, "step_complete": False,
        "source": "model", "crosscheck": "agrees", "elapsed_ms": 12.5}
    assert "crosscheck" not in Answer.of("q", answer, "none").wire()
    assert State(**CameraState().state()).wire() == {"type": "state", "goal": "", "coach": False,
                                                     "procedure_id": None, "frames": 0}
    assert Job(job=1, stage="failed", progress=1.0, error="no frames").wire() == {
        "type": "job", "job": 1, "stage": "failed", "progress": 1.0, "error": "no frames"}
    assert WebRtc(sender="viewer:1", sdp="v=0", kind="offer").wire() == {
        "type": "webrtc", "from": "viewer:1", "sdp": "v=0", "kind": "offer"}
    assert PerceptionEvent.of(4, {"detections": [], "timings_ms": {}}).wire() == {
        "type": "perception", "frame": 4, "detections": [], "ocr": None, "dial": None, "timings_ms": {}}
    assert ErrorEvent.of(ErrorInfo(code="x", message="y")).wire() == {"type": "error", "code": "x", "message": "y"}


def test_dict_events_are_checked_against_their_kind() -> None:
    assert isinstance(parse_event({"type": "agent", "text": "Done."}), Agent)
    assert wire({"type": "confirm", "id": "s.1", "tool": "run_shell"}) == {"type": "confirm", "id": "s.1",
                                                                            "tool": "run_shell"}
    with pytest.raises(ValueError):
        parse_event({"type": "coach", "say": "x"})  # no status


# -- a review job -----------------------------------------------------------------------------


async def test_a_review_job_reports_progress_then_its_report() -> None:
    from actors.camera.review_job import run_review
    from vision.review import ReviewReport, TimedFrame

    pushed: list[dict[str, Any]] = []
    frames = [TimedFrame(t=0.0, image=None), TimedFrame(t=1.0, image=None)]  # type: ignore[arg-type]

    async def sample() -> list[TimedFrame]:
        return frames

    async def ask(sampled: list[TimedFrame]) -> ReviewReport:
        return ReviewReport(summary="Fine.", timeline=[{"t": 1.0, "event": "opened"}])

    await run_review(3, lambda e: pushed.append(e.wire()), sample, ask, failed=lambda exc: None)
    assert [(e["type"], e.get("stage")) for e in pushed] == [
        ("job", "sampling"), ("job", "asking"), ("job", "done"), ("report", None)]
    assert pushed[1]["frames"] == 2
    assert pushed[-1] == {"type": "report", "job": 3, "frames": 2, "summary": "Fine.", "problems": [],
                          "timeline": [{"t": 1.0, "event": "opened"}]}


async def test_a_review_job_fails_with_its_reason_or_plainly_when_something_broke() -> None:
    from actors.camera.review_job import FAILED_LOGGED, run_review

    pushed: list[dict[str, Any]] = []
    broken: list[Exception] = []

    async def missing() -> list[Any]:
        raise ValueError("no file 9")

    async def crash() -> list[Any]:
        raise RuntimeError("bug")

    async def never(sampled: list[Any]) -> Any:
        raise AssertionError("not asked")

    await run_review(1, lambda e: pushed.append(e.wire()), missing, never, failed=broken.append)
    await run_review(2, lambda e: pushed.append(e.wire()), crash, never, failed=broken.append)
    failures = [e for e in pushed if e.get("stage") == "failed"]
    assert [(e["job"], e["error"]) for e in failures] == [(1, "no file 9"), (2, FAILED_LOGGED)]
    assert [type(exc) for exc in broken] == [RuntimeError]
