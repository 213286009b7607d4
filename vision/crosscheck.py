"""Cross-checking a VLM dial reading against the needle geometry.

VLMs misread gauges confidently. When the frame's instrument could also be read geometrically,
the two values are compared as a fraction of the instrument's span; if they differ by more
than the tolerance, or the units differ, the answer is downgraded to unsure and says why.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from vision.dial import DialReading
from vision.procedure import Instrument
from vision.vlm import CAP_SAY, VlmAnswer, cap

# 4% of span: about one minor division on a gauge with 25 of them, a generous margin for the
# needle's width and camera angle, and much less than a VLM's typical "wrong number" error.
DEFAULT_TOLERANCE = 0.04

Verdict = Literal["agree", "disagree", "unit_mismatch", "not_checked"]


class CrossCheck(BaseModel):
    verdict: Verdict
    answer: VlmAnswer
    difference: float | None = None  # |vlm - geometric| / span
    geometric_value: float | None = None


def format_value(value: float, span: float) -> str:
    """``value`` with the precision a gauge of this span can show (four significant digits of the span)."""
    decimals = max(0, 3 - math.floor(math.log10(span))) if span > 0 else 2
    return f"{value:.{decimals}f}"


def _same_unit(a: str, b: str) -> bool:
    def norm(unit: str) -> str:
        return "".join(ch for ch in unit.lower() if ch.isalnum() or ch in "%°")

    return not a.strip() or norm(a) == norm(b)


def cross_check(
    answer: VlmAnswer,
    geometric: DialReading | None,
    instrument: Instrument | None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> CrossCheck:
    """Compare ``answer.reading`` with the geometric dial reading.

    Not checked (answer unchanged) when either reading or the instrument is missing. A VLM
    reading with no unit is taken to be in the instrument's unit.
    """
    if answer.reading is None or geometric is None or instrument is None:
        return CrossCheck(verdict="not_checked", answer=answer)
    if not _same_unit(answer.reading.unit, instrument.unit):
        note = (
            f"The model read {answer.reading.value:g} {answer.reading.unit}, but this gauge shows "
            f"{instrument.unit}; please check it yourself."
        )
        return CrossCheck(
            verdict="unit_mismatch",
            answer=_downgrade(answer, note),
            geometric_value=geometric.value,
        )
    difference = abs(answer.reading.value - geometric.value) / instrument.span
    if difference <= tolerance:
        return CrossCheck(
            verdict="agree", answer=answer, difference=difference, geometric_value=geometric.value
        )
    note = (
        f"The needle's position suggests about {format_value(geometric.value, instrument.span)} "
        f"{instrument.unit}, not {answer.reading.value:g}; please check the gauge."
    )
    return CrossCheck(
        verdict="disagree",
        answer=_downgrade(answer, note),
        difference=difference,
        geometric_value=geometric.value,
    )


def _downgrade(answer: VlmAnswer, note: str) -> VlmAnswer:
    say = f"{answer.say} {note}".strip() if answer.say else note
    # A step judged on a disputed reading is not complete either.
    return answer.model_copy(update={"status": "unsure", "say": cap(say, CAP_SAY), "step_complete": False})
