"""The typed events of a camera stream: one small class per kind, discriminated on `type`.

The CameraActor pushes them into its listeners' queues and the socket sends `event.wire()`;
the JSON is the one the dict events made before these classes existed. A field named in
`omit_if_unset` is left off the wire unless it was given (the OCR lane's perception event has
no detections; an answer with no frame has no cross-check).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from actors.common.errors import ErrorInfo
from vision.review import ReviewReport, TimelineEntry
from vision.vlm import Reading, Status, VlmAnswer


class _Event(BaseModel):
    type: str
    omit_if_unset: ClassVar[tuple[str, ...]] = ()

    def wire(self) -> dict[str, Any]:
        """The event as the socket sends it."""
        out = self.model_dump(mode="json", by_alias=True)
        for name in self.omit_if_unset:
            if name not in self.model_fields_set:
                field = type(self).model_fields[name]
                out.pop(field.alias or name, None)
        return out


class _Open(_Event):
    """An event whose payload comes from elsewhere (the session, the peer) as it is."""

    model_config = ConfigDict(extra="allow")


# -- the socket's own ----------------------------------------------------------------------

class Hello(_Event):
    type: Literal["hello"] = "hello"
    stream_id: str
    session_id: str | None = None
    max_frame_bytes: int | None = None
    ocr_every: int | None = None
    vision_model: bool | None = None
    viewer: str | None = None
    omit_if_unset = ("session_id", "max_frame_bytes", "ocr_every", "vision_model", "viewer")


class FrameAck(_Event):
    type: Literal["frame_ack"] = "frame_ack"
    frame: int


class ErrorEvent(ErrorInfo, _Event):
    """An `ErrorInfo` (code, message) on the stream, naming the frame when one caused it."""

    type: Literal["error"] = "error"
    frame: int | None = None
    omit_if_unset = ("frame",)

    @classmethod
    def of(cls, info: ErrorInfo, frame: int | None = None) -> ErrorEvent:
        if frame is None:
            return cls(code=info.code, message=info.message)
        return cls(code=info.code, message=info.message, frame=frame)


class PerceptionEvent(_Event):
    """What perception saw in one frame; the OCR lane sends only `ocr` and timings."""

    type: Literal["perception"] = "perception"
    frame: int
    detections: list[dict[str, Any]] | None = None
    ocr: str | None
    dial: dict[str, Any] | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    omit_if_unset = ("detections", "dial")

    @classmethod
    def of(cls, frame: int, perception: dict[str, Any]) -> PerceptionEvent:
        """The full event from the Perception deployment's dict."""
        return cls(frame=frame, detections=perception.get("detections", []), ocr=ocr_text(perception),
                   dial=perception.get("dial"), timings_ms=perception.get("timings_ms", {}))

    @classmethod
    def ocr_only(cls, frame: int, perception: dict[str, Any]) -> PerceptionEvent:
        return cls(frame=frame, ocr=ocr_text(perception), timings_ms=perception.get("timings_ms", {}))


def ocr_text(perception: dict[str, Any]) -> str | None:
    """The OCR lines as text, or None when OCR did not run on the frame."""
    if not perception.get("ocr_ran"):
        return None
    return "\n".join(line["text"] for line in perception.get("ocr_lines", []))


class Transcript(_Event):
    type: Literal["transcript"] = "transcript"
    text: str


class Pong(_Event):
    type: Literal["pong"] = "pong"


class Confirmation(_Open):
    """The session's answer to a confirmation: {id, status} or {error, message}."""

    type: Literal["confirmation"] = "confirmation"

    @classmethod
    def of(cls, answer: BaseModel) -> Confirmation:
        """The session's typed answer (`ConfirmationAnswer`, or an `ErrorInfo` refusal) as the
        socket writes it: {id, status}, or {error, message}."""
        if isinstance(answer, ErrorInfo):
            return cls(error=answer.code, message=answer.message)
        return cls(**answer.model_dump())


# -- the actor's ---------------------------------------------------------------------------

class Thinking(_Event):
    type: Literal["thinking"] = "thinking"
    question: str


class Answer(_Event):
    type: Literal["answer"] = "answer"
    question: str
    say: str
    status: Status
    reading: Reading | None = None
    step_complete: bool = False
    source: str
    crosscheck: str | None = None
    elapsed_ms: float | None = None
    omit_if_unset = ("crosscheck", "elapsed_ms")

    @classmethod
    def of(cls, question: str, answer: VlmAnswer, source: str, **extra: Any) -> Answer:
        return cls(question=question, **answer.model_dump(), source=source, **extra)


class Alert(_Event):
    type: Literal["alert"] = "alert"
    status: Status
    say: str


class State(_Event):
    """Where the procedure stands (CameraState.state())."""

    type: Literal["state"] = "state"
    goal: str
    coach: bool
    procedure_id: int | None
    frames: int
    procedure: str | None = None
    step_index: int | None = None
    steps: int | None = None
    finished: bool | None = None
    step: str | None = None
    omit_if_unset = ("procedure", "step_index", "steps", "finished", "step")


class Coach(_Event):
    type: Literal["coach"] = "coach"
    say: str
    status: Status


class Notice(_Event):
    type: Literal["notice"] = "notice"
    text: str
    say: str
    status: Status


class Confirm(_Open):
    """The agent asks before an action (the session's confirm event's data, as it is)."""

    type: Literal["confirm"] = "confirm"


class Agent(_Event):
    type: Literal["agent"] = "agent"
    text: str


class Job(_Event):
    type: Literal["job"] = "job"
    job: int
    stage: Literal["queued", "sampling", "asking", "done", "failed"]
    progress: float
    frames: int | None = None
    error: str | None = None
    omit_if_unset = ("frames", "error")


class Report(_Event):
    type: Literal["report"] = "report"
    job: int
    frames: int
    summary: str
    problems: list[str] = Field(default_factory=list)
    timeline: list[TimelineEntry] = Field(default_factory=list)

    @classmethod
    def of(cls, job: int, frames: int, report: ReviewReport) -> Report:
        return cls(job=job, frames=frames, **report.model_dump())


class Viewer(_Event):
    type: Literal["viewer"] = "viewer"
    viewer: str
    joined: bool


class WebRtc(_Open):
    """Signalling relayed between the owner and a viewer: `from` plus the sender's fields."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    type: Literal["webrtc"] = "webrtc"
    sender: str = Field(alias="from")


CameraEvent = Annotated[
    Hello | FrameAck | ErrorEvent | PerceptionEvent | Transcript | Pong | Confirmation | Thinking | Answer | Alert | State | Coach | Notice | Confirm | Agent | Job | Report | Viewer | WebRtc,
    Field(discriminator="type"),
]
_EVENTS: TypeAdapter[Any] = TypeAdapter(CameraEvent)


def parse_event(data: dict[str, Any]) -> CameraEvent:
    """A wire dict back into its typed event (raises pydantic.ValidationError)."""
    return _EVENTS.validate_python(data)


def wire(event: CameraEvent | dict[str, Any]) -> dict[str, Any]:
    """What the socket sends for ``event`` (a dict is checked against its kind first)."""
    return (parse_event(event) if isinstance(event, dict) else event).wire()
