"""Procedures the owner defines, and step debouncing (two consecutive step_complete verdicts)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vision.procedure import MAX_STEPS, ProcedureCreate, StepDebouncer


def _procedure(**over: object) -> dict[str, object]:
    body: dict[str, object] = {
        "name": "Bleed a radiator",
        "goal": "No air in the heating circuit",
        "steps": [
            {"title": "Turn the heating off", "acceptance_criteria": ["thermostat shows OFF"]},
            {"title": "Open the bleed valve", "acceptance_criteria": ["water, not air, comes out"]},
            {"title": "Check the pressure", "acceptance_criteria": ["1.0-1.5 bar"], "instrument": "boiler"},
        ],
        "instruments": [{"name": "boiler", "unit": "bar", "min_value": 0, "max_value": 4, "safe_min": 1, "safe_max": 2}],
    }
    body.update(over)
    return body


def test_a_valid_procedure_links_steps_to_instruments() -> None:
    proc = ProcedureCreate.model_validate(_procedure())
    assert proc.instrument_for(0) is None
    boiler = proc.instrument_for(2)
    assert boiler is not None and boiler.unit == "bar" and boiler.span == 4
    assert not boiler.in_safe_range(0.6) and boiler.in_safe_range(1.2)
    assert proc.instrument_for(9) is None


@pytest.mark.parametrize(
    "over",
    [
        {"steps": []},
        {"name": ""},
        {"steps": [{"title": "x", "instrument": "nowhere"}]},
        {"instruments": [{"name": "a", "unit": "u", "min_value": 0, "max_value": 1}] * 2},
        {"steps": [{"title": "x", "acceptance_criteria": ["   "]}]},
        {"steps": [{"title": "x", "acceptance_criteria": ["c" * 401]}]},
        {"steps": [{"title": "x"}] * (MAX_STEPS + 1)},
    ],
)
def test_invalid_procedures_are_refused(over: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ProcedureCreate.model_validate(_procedure(**over))


def test_limits_at_the_edge_are_accepted() -> None:
    proc = ProcedureCreate.model_validate(
        _procedure(steps=[{"title": "x", "acceptance_criteria": ["c" * 400]}] * MAX_STEPS, instruments=[])
    )
    assert len(proc.steps) == MAX_STEPS


def test_one_verdict_does_not_advance_two_consecutive_do() -> None:
    steps = StepDebouncer(3)
    first = steps.observe(True)
    assert not first.advanced and first.step_index == 0 and first.pending == 1
    second = steps.observe(True)
    assert second.advanced and second.step_index == 1 and second.pending == 0


def test_a_false_verdict_in_between_resets_the_streak() -> None:
    steps = StepDebouncer(3)
    verdicts = [True, False, True, False, True]
    assert not any(steps.observe(v).advanced for v in verdicts)
    assert steps.step_index == 0
    assert steps.observe(True).advanced


def test_a_streak_does_not_carry_over_to_the_next_step() -> None:
    steps = StepDebouncer(3)
    steps.observe(True)
    steps.observe(True)  # step 0 done
    third = steps.observe(True)  # first verdict on step 1
    assert not third.advanced and third.step_index == 1


def test_the_procedure_finishes_and_stays_finished() -> None:
    steps = StepDebouncer(2)
    results = [steps.observe(True) for _ in range(4)]
    assert [r.step_index for r in results] == [0, 1, 1, 2]
    assert results[-1].finished
    after = steps.observe(True)
    assert after.finished and not after.advanced and after.step_index == 2


def test_manual_moves_clear_a_half_streak() -> None:
    steps = StepDebouncer(3)
    steps.observe(True)
    steps.reset_streak()
    assert not steps.observe(True).advanced


def test_debouncer_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        StepDebouncer(0)
    with pytest.raises(ValueError):
        StepDebouncer(3, needed=0)
