"""Procedures the owner defines, and the debouncer that advances their steps.

A procedure is a goal, ordered steps with acceptance criteria, and the instruments those steps
read. The VLM says ``step_complete`` per look; one excited verdict must not skip a step, so a
step advances only after two consecutive ``true`` verdicts.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

NAME_MAX = 80
TEXT_MAX = 400
MAX_STEPS = 50
MAX_CRITERIA = 10
MAX_INSTRUMENTS = 10


class Instrument(BaseModel):
    """An analogue dial: its value span, unit, and where the needle points at each end.

    Angles are degrees clockwise from 12 o'clock. The default is the common 270-degree gauge:
    the minimum at lower left (-135) and the maximum at lower right (+135).
    """

    name: str = Field(min_length=1, max_length=NAME_MAX)
    unit: str = Field(min_length=1, max_length=20)
    min_value: float
    max_value: float
    min_angle: float = Field(default=-135.0, ge=-360.0, le=360.0)
    max_angle: float = Field(default=135.0, ge=-360.0, le=360.0)
    # Optional safe band; a reading outside it is "out of range" for coach mode.
    safe_min: float | None = None
    safe_max: float | None = None

    @model_validator(mode="after")
    def _check(self) -> "Instrument":
        if self.max_value <= self.min_value:
            raise ValueError("max_value must be greater than min_value")
        if not 0 < self.sweep <= 360:
            raise ValueError("min_angle and max_angle must differ")
        if self.safe_min is not None and self.safe_max is not None and self.safe_min > self.safe_max:
            raise ValueError("safe_min must not exceed safe_max")
        return self

    @property
    def span(self) -> float:
        return self.max_value - self.min_value

    @property
    def sweep(self) -> float:
        """Degrees the needle travels clockwise from min to max (0 < sweep <= 360)."""
        sweep = (self.max_angle - self.min_angle) % 360.0
        return 360.0 if sweep == 0 and self.max_angle != self.min_angle else sweep

    def in_safe_range(self, value: float) -> bool:
        if self.safe_min is not None and value < self.safe_min:
            return False
        if self.safe_max is not None and value > self.safe_max:
            return False
        return True


class Step(BaseModel):
    title: str = Field(min_length=1, max_length=NAME_MAX)
    instruction: str = Field(default="", max_length=TEXT_MAX)
    acceptance_criteria: list[str] = Field(default_factory=list, max_length=MAX_CRITERIA)
    instrument: str | None = Field(default=None, description="name of the instrument this step reads")

    @model_validator(mode="after")
    def _criteria_short(self) -> "Step":
        for item in self.acceptance_criteria:
            if not item.strip() or len(item) > TEXT_MAX:
                raise ValueError(f"each acceptance criterion must be 1-{TEXT_MAX} characters")
        return self


class ProcedureCreate(BaseModel):
    """What the owner posts to define a procedure."""

    name: str = Field(min_length=1, max_length=NAME_MAX)
    goal: str = Field(default="", max_length=TEXT_MAX)
    steps: list[Step] = Field(min_length=1, max_length=MAX_STEPS)
    instruments: list[Instrument] = Field(default_factory=list, max_length=MAX_INSTRUMENTS)

    @model_validator(mode="after")
    def _references(self) -> "ProcedureCreate":
        names = [i.name for i in self.instruments]
        if len(set(names)) != len(names):
            raise ValueError("instrument names must be unique")
        for index, step in enumerate(self.steps):
            if step.instrument is not None and step.instrument not in names:
                raise ValueError(f"step {index + 1} names unknown instrument {step.instrument!r}")
        return self

    def instrument_for(self, step_index: int) -> Instrument | None:
        if not 0 <= step_index < len(self.steps):
            return None
        name = self.steps[step_index].instrument
        return next((i for i in self.instruments if i.name == name), None) if name else None


class StepAdvance(BaseModel):
    """What one verdict did to the procedure."""

    advanced: bool
    step_index: int = Field(description="the current step after this verdict")
    finished: bool
    pending: int = Field(description="consecutive step_complete verdicts on the current step")


class StepDebouncer:
    """Advances a procedure's current step after ``needed`` consecutive step_complete verdicts."""

    def __init__(self, step_count: int, *, needed: int = 2, start: int = 0) -> None:
        if step_count < 1:
            raise ValueError("a procedure has at least one step")
        if needed < 1:
            raise ValueError("needed must be at least 1")
        self.step_count = step_count
        self.needed = needed
        self.step_index = min(max(start, 0), step_count)
        self._streak = 0

    @property
    def finished(self) -> bool:
        return self.step_index >= self.step_count

    def observe(self, step_complete: bool) -> StepAdvance:
        """Feed one verdict about the current step."""
        advanced = False
        if self.finished:
            pass
        elif step_complete:
            self._streak += 1
            if self._streak >= self.needed:
                self.step_index += 1
                self._streak = 0
                advanced = True
        else:
            self._streak = 0
        return StepAdvance(
            advanced=advanced, step_index=self.step_index, finished=self.finished, pending=self._streak
        )

    def reset_streak(self) -> None:
        """Forget a half-built streak, e.g. when the owner moves to another step by hand."""
        self._streak = 0
