"""A VLM's dial reading checked against the needle geometry."""

from __future__ import annotations

import pytest

from tests.vision_draw import dial_frame
from vision.crosscheck import DEFAULT_TOLERANCE, cross_check, format_value
from vision.dial import DialCircle, DialReading, read_dial
from vision.procedure import Instrument
from vision.vlm import Reading, VlmAnswer

GAUGE = Instrument(name="boiler", unit="bar", min_value=0, max_value=4)
CIRCLE = DialCircle(cx=320, cy=240, r=170)


def _geometric(value: float) -> DialReading:
    return DialReading(value=value, unit="bar", angle=0, confidence=0.9, in_sweep=True, circle=CIRCLE)


def _answer(value: float, unit: str = "bar", status: str = "ok", step_complete: bool = True) -> VlmAnswer:
    return VlmAnswer(
        say=f"The pressure is {value} {unit}.",
        status=status,  # type: ignore[arg-type]
        reading=Reading(value=value, unit=unit, confidence=0.9),
        step_complete=step_complete,
    )


def test_agreeing_readings_leave_the_answer_alone() -> None:
    answer = _answer(1.5)
    result = cross_check(answer, _geometric(1.55), GAUGE)
    assert result.verdict == "agree"
    assert result.answer == answer
    assert result.difference == pytest.approx(0.05 / 4)


def test_tolerance_at_under_and_over_the_span_fraction() -> None:
    edge = DEFAULT_TOLERANCE * GAUGE.span
    assert cross_check(_answer(2.0), _geometric(2.0 + edge * 0.99), GAUGE).verdict == "agree"
    assert cross_check(_answer(2.0), _geometric(2.0 + edge * 1.01), GAUGE).verdict == "disagree"


def test_disagreement_downgrades_to_unsure_and_says_what_the_needle_shows() -> None:
    result = cross_check(_answer(3.0, status="ok"), _geometric(1.2), GAUGE)
    assert result.verdict == "disagree"
    assert result.answer.status == "unsure"
    assert result.answer.step_complete is False  # a step is not finished on a disputed reading
    assert "1.200 bar" in result.answer.say
    assert result.answer.say.startswith("The pressure is 3.0 bar.")
    assert result.geometric_value == 1.2


def test_same_gap_is_fine_on_a_wide_gauge_and_not_on_a_narrow_one() -> None:
    wide = Instrument(name="w", unit="bar", min_value=0, max_value=100)
    assert cross_check(_answer(50), _geometric(52), wide).verdict == "agree"
    assert cross_check(_answer(50), _geometric(52), GAUGE).verdict == "disagree"


def test_a_different_unit_is_not_trusted() -> None:
    result = cross_check(_answer(150, unit="kPa"), _geometric(1.5), GAUGE)
    assert result.verdict == "unit_mismatch"
    assert result.answer.status == "unsure"


@pytest.mark.parametrize("unit", ["", "BAR", " bar ", "bar."])
def test_missing_or_differently_written_unit_counts_as_the_gauges(unit: str) -> None:
    assert cross_check(_answer(1.5, unit=unit), _geometric(1.5), GAUGE).verdict == "agree"


def test_nothing_to_compare_leaves_the_answer_alone() -> None:
    no_reading = VlmAnswer(say="Looks fine.", status="ok")
    assert cross_check(no_reading, _geometric(1.0), GAUGE).verdict == "not_checked"
    assert cross_check(_answer(1.0), None, GAUGE).verdict == "not_checked"
    assert cross_check(_answer(1.0), _geometric(1.0), None).answer.status == "ok"


def test_end_to_end_with_a_drawn_gauge() -> None:
    # Needle at +45 degrees on a 0-4 bar, 270-degree gauge: (45 + 135) / 270 * 4 = 2.667 bar.
    geometric = read_dial(dial_frame(45), GAUGE)
    assert geometric is not None
    assert cross_check(_answer(2.7), geometric, GAUGE).verdict == "agree"
    wrong = cross_check(_answer(3.5, status="warning"), geometric, GAUGE)
    assert wrong.verdict == "disagree" and wrong.answer.status == "unsure"


def test_values_are_shown_at_the_gauges_precision() -> None:
    assert format_value(2.66666, 4) == "2.667"
    assert format_value(45.678, 100) == "45.7"
    assert format_value(1234.5, 1000) == "1234"
