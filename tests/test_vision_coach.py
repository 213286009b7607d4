"""Coach mode and noticing writing, on a clock the test moves by hand."""

from __future__ import annotations

import pytest

from tests.test_router_state import FakeClock
from vision.coach import CoachGate, LineSuppressor, NoticeWatcher, coach_should_speak, words
from vision.procedure import Instrument
from vision.vlm import Reading, VlmAnswer


GAUGE = Instrument(name="boiler", unit="bar", min_value=0, max_value=4, safe_min=1, safe_max=2)


def _answer(say: str, status: str = "ok", value: float | None = None, step_complete: bool = False) -> VlmAnswer:
    reading = Reading(value=value, unit="bar", confidence=0.9) if value is not None else None
    return VlmAnswer(say=say, status=status, reading=reading, step_complete=step_complete)  # type: ignore[arg-type]


# -- coach mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "speaks"),
    [
        (_answer("All looks normal.", "ok"), False),
        (_answer("", "danger"), False),  # nothing to say, nothing said
        (_answer("I can't tell from here.", "unsure"), False),
        (_answer("The valve is open the wrong way.", "warning"), True),
        (_answer("Unplug it before touching the wires!", "danger"), True),
        (_answer("Step done: the valve is closed.", "ok", step_complete=True), True),
        (_answer("Pressure reads 0.6 bar.", "ok", value=0.6), True),  # under safe_min
        (_answer("Pressure reads 1.4 bar.", "ok", value=1.4), False),
    ],
)
def test_coach_speaks_only_for_mistakes_safety_range_or_finished_steps(answer: VlmAnswer, speaks: bool) -> None:
    assert coach_should_speak(answer, GAUGE) is speaks


def test_out_of_range_needs_an_instrument_with_a_safe_band() -> None:
    assert coach_should_speak(_answer("Reads 0.6 bar.", value=0.6), None) is False
    open_band = Instrument(name="x", unit="bar", min_value=0, max_value=4)
    assert coach_should_speak(_answer("Reads 0.6 bar.", value=0.6), open_band) is False


def test_coach_looks_are_spaced_by_the_interval() -> None:
    clock = FakeClock()
    gate = CoachGate(interval=10, clock=clock)
    assert gate.due()
    gate.looked()
    clock.advance(9.9)
    assert not gate.due()
    clock.advance(0.1)
    assert gate.due()


def test_repeated_coach_lines_are_suppressed_until_the_window_passes() -> None:
    clock = FakeClock()
    gate = CoachGate(interval=10, suppressor=LineSuppressor(window=60, clock=clock), clock=clock)
    warn = _answer("The valve is open the wrong way.", "warning")
    assert gate.line_to_say(warn) == "The valve is open the wrong way."
    clock.advance(10)
    assert gate.line_to_say(warn) is None
    clock.advance(10)
    # The same warning in slightly different words is still a repeat.
    assert gate.line_to_say(_answer("The valve is open the wrong way!", "warning")) is None
    assert gate.line_to_say(_answer("the valve is open the wrong way", "warning")) is None
    # A different problem gets through.
    assert gate.line_to_say(_answer("Your glove is torn.", "danger")) == "Your glove is torn."
    clock.advance(61)
    assert gate.line_to_say(warn) == "The valve is open the wrong way."


def test_silent_answers_are_not_remembered_as_said() -> None:
    clock = FakeClock()
    suppressor = LineSuppressor(clock=clock)
    gate = CoachGate(suppressor=suppressor, clock=clock)
    quiet = _answer("The valve is open the wrong way.", "ok")
    assert gate.line_to_say(quiet) is None
    assert gate.line_to_say(_answer("The valve is open the wrong way.", "warning")) is not None


def test_coach_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CoachGate(interval=0)


# -- noticing writing ---------------------------------------------------------------------------


def test_words_keep_numbers_and_contractions_whole() -> None:
    assert words("Is 42.5 kPa OK? Don't open!") == ["is", "42.5", "kpa", "ok", "don't", "open"]


def _feed(watcher: NoticeWatcher, clock: FakeClock, text: str, seconds: float, step: float = 0.5) -> list[str]:
    """Feed the same OCR text every ``step`` seconds for ``seconds``; return what fired."""
    fired = []
    elapsed = 0.0
    while elapsed <= seconds + 1e-9:
        got = watcher.observe(text)
        if got is not None:
            fired.append(got)
        clock.advance(step)
        elapsed += step
    return fired


def test_new_text_fires_once_it_has_been_stable_for_two_seconds() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    question = "Is this wire live?"
    assert watcher.observe(question) is None  # first sight
    clock.advance(1.9)
    assert watcher.observe(question) is None  # not yet two seconds
    clock.advance(0.1)
    assert watcher.observe(question) == "Is this wire live?"
    clock.advance(0.5)
    assert watcher.observe(question) is None  # fired once, now seen


def test_fewer_than_three_words_never_fire() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    assert _feed(watcher, clock, "EXIT", 5) == []
    assert _feed(watcher, clock, "Open here", 5) == []
    assert _feed(watcher, clock, "Open here now", 5) == ["Open here now"]


def test_text_that_keeps_changing_never_settles() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    texts = ["Writing a note now", "Is the oven at", "Please check the gauge", "What does this light mean"]
    for i in range(12):
        assert watcher.observe(texts[i % len(texts)]) is None
        clock.advance(0.5)


def test_ocr_flicker_of_one_word_still_counts_as_stable() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    a = "Should I close the red valve first"
    b = "Should I close the red valve flrst"  # OCR misreads one word in one frame
    fired = []
    for i in range(6):
        got = watcher.observe(a if i % 2 == 0 else b)
        fired += [got] if got else []
        clock.advance(0.5)
    assert len(fired) == 1


def test_mostly_seen_text_does_not_fire_again() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    watcher.mark_seen(["DANGER HIGH VOLTAGE KEEP OUT"])
    assert _feed(watcher, clock, "DANGER HIGH VOLTAGE KEEP OUT", 5) == []
    # Half or more of the words new is "mostly unseen" only when over half.
    assert _feed(watcher, clock, "DANGER HIGH VOLTAGE is it", 5) == []
    assert _feed(watcher, clock, "DANGER is this safe now", 5) == ["DANGER is this safe now"]


def test_triggers_are_at_least_fifteen_seconds_apart() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    start = clock.now
    assert _feed(watcher, clock, "What is this part called", 2.5) == ["What is this part called"]
    first_at = start + 2.0
    # Another new question right away: it waits for the spacing rather than being lost.
    fired_at = None
    text = "Where does the blue wire go"
    while clock.now < first_at + 20 and fired_at is None:
        if watcher.observe(text) is not None:
            fired_at = clock.now
        clock.advance(0.5)
    assert fired_at is not None
    assert fired_at - first_at >= 15.0
    assert fired_at - first_at < 15.5


def test_text_leaving_view_resets_stability() -> None:
    clock = FakeClock()
    watcher = NoticeWatcher(clock=clock)
    text = "Can you read this label"
    watcher.observe(text)
    clock.advance(1.5)
    watcher.observe("")  # hand covers it
    clock.advance(0.5)
    assert watcher.observe(text) is None  # stability starts again
    clock.advance(2.0)
    assert watcher.observe(text) == text
