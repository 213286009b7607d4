"""What one camera stream knows: goal, procedure and current step, recent readings, detections,
OCR text, the last four exchanges, and the coach and notice timers. Pure: the CameraActor
is a shell around it, and tests drive it with a fake clock.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from vision.coach import CoachGate, NoticeWatcher
from vision.crosscheck import cross_check
from vision.perception import Perception, context_fields
from vision.procedure import Instrument, ProcedureCreate, StepAdvance, StepDebouncer
from vision.vlm import MAX_EXCHANGES, Exchange, VisionContext, VlmAnswer

MAX_READINGS = 8
DEFAULT_COACH_INTERVAL = 10.0


class Checked(BaseModel):
    """An answer after the dial cross-check and the step debouncer."""

    answer: VlmAnswer
    verdict: str
    advance: StepAdvance | None = None


class CameraState:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.goal = ""
        self.procedure: ProcedureCreate | None = None
        self.procedure_id: int | None = None
        self.debouncer: StepDebouncer | None = None
        self.readings: deque[str] = deque(maxlen=MAX_READINGS)
        self.detections: list[str] = []
        self.ocr_text = ""
        self.exchanges: deque[Exchange] = deque(maxlen=MAX_EXCHANGES)
        self.last: Perception | None = None
        self.frames = 0
        self.coach_on = False
        self.coach = CoachGate(interval=DEFAULT_COACH_INTERVAL, clock=clock)
        self.notice = NoticeWatcher(clock=clock)

    # -- procedure ------------------------------------------------------------------------

    def set_procedure(self, procedure_id: int | None, procedure: ProcedureCreate | None) -> None:
        self.procedure_id, self.procedure = procedure_id, procedure
        self.debouncer = StepDebouncer(len(procedure.steps)) if procedure else None
        if procedure and procedure.goal and not self.goal:
            self.goal = procedure.goal
        if procedure:
            # Labels printed on the instruments are not news when OCR reads them.
            self.notice.mark_seen([i.name for i in procedure.instruments] + [i.unit for i in procedure.instruments])

    def set_coach(self, on: bool, interval: float | None = None) -> None:
        self.coach_on = on
        if interval is not None:
            self.coach = CoachGate(interval=interval, suppressor=self.coach.suppressor, clock=self.clock)

    @property
    def step_index(self) -> int | None:
        return self.debouncer.step_index if self.debouncer else None

    def instrument(self) -> Instrument | None:
        if self.procedure is None or self.debouncer is None:
            return None
        return self.procedure.instrument_for(self.debouncer.step_index)

    # -- frames ---------------------------------------------------------------------------

    def observe(self, perception: Perception) -> str | None:
        """Take one frame's perception; returns new writing to ask about when a notice fires."""
        self.frames += 1
        self.last = perception
        self.detections = [f"{d.label} {d.confidence:.2f}" for d in perception.detections[:15]]
        if perception.dial is not None:
            self.readings.append(f"gauge {perception.dial.value:.4g} {perception.dial.unit}")
        if not perception.ocr_ran:
            return None
        return self.observe_text(perception.ocr_text)

    def observe_text(self, text: str) -> str | None:
        """OCR text read from a recent frame (OCR runs in its own lane, not on every frame)."""
        self.ocr_text = text
        return self.notice.observe(text)

    # -- the model's view -----------------------------------------------------------------

    def context(self, owner_profile: str = "", facts: str = "", excerpts: list[str] | None = None) -> VisionContext:
        step = criteria = None
        if self.procedure and self.debouncer and not self.debouncer.finished:
            current = self.procedure.steps[self.debouncer.step_index]
            step = f"{self.debouncer.step_index + 1}/{len(self.procedure.steps)} {current.title}. {current.instruction}"
            criteria = current.acceptance_criteria
        fields: dict[str, Any] = context_fields(self.last, ocr_text=self.ocr_text) if self.last else {}
        fields["readings"] = list(self.readings)
        return VisionContext(owner_profile=owner_profile, facts=facts, goal=self.goal, step=step or "",
                             acceptance_criteria=criteria or [], excerpts=excerpts or [],
                             exchanges=list(self.exchanges), **fields)

    def check(self, answer: VlmAnswer, question: str | None) -> Checked:
        """Cross-check a dial reading, record the exchange, feed the debouncer."""
        result = cross_check(answer, self.last.dial if self.last else None, self.instrument())
        answer = result.answer
        if answer.reading is not None:
            self.readings.append(f"model {answer.reading.value:g} {answer.reading.unit}".strip())
        if question:
            self.exchanges.append(Exchange(question=question, answer=answer.say))
        advance = self.debouncer.observe(answer.step_complete) if self.debouncer else None
        return Checked(answer=answer, verdict=result.verdict, advance=advance)

    def state(self) -> dict[str, Any]:
        """The `state` event: where the procedure stands."""
        data: dict[str, Any] = {"goal": self.goal, "coach": self.coach_on, "procedure_id": self.procedure_id,
                                "frames": self.frames}
        if self.procedure and self.debouncer:
            index = self.debouncer.step_index
            data.update(procedure=self.procedure.name, step_index=index, steps=len(self.procedure.steps),
                        finished=self.debouncer.finished,
                        step=None if self.debouncer.finished else self.procedure.steps[index].title)
        return data
