"""The VLM's context (capped) and its answer (repaired, never trusted, never raising)."""

from __future__ import annotations

import json

import pytest

from vision.vlm import (
    CAP_EXCERPT,
    CAP_FACTS,
    CAP_PROFILE,
    UNREADABLE_SAY,
    Exchange,
    VisionContext,
    VlmAnswer,
    build_context,
    build_messages,
    cap,
    normalise_confidence,
    parse_answer,
)

GOOD = {"say": "The gauge reads 42 kPa.", "status": "ok", "reading": {"value": 42, "unit": "kPa", "confidence": 0.9}, "step_complete": False}


def test_well_formed_reply_parses_as_is() -> None:
    answer = parse_answer(json.dumps(GOOD))
    assert answer.model_dump() == {
        "say": "The gauge reads 42 kPa.",
        "status": "ok",
        "reading": {"value": 42.0, "unit": "kPa", "confidence": 0.9},
        "step_complete": False,
    }


@pytest.mark.parametrize(
    "reply",
    [
        "Sure! Here is my answer:\n" + json.dumps(GOOD) + "\nLet me know if you need more.",
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "```\n" + json.dumps(GOOD) + "\n```",
        json.dumps(GOOD)[:-1] + ",}",  # trailing comma
        json.dumps(GOOD).replace('"', "'"),  # single quotes throughout
        "{'say': 'The gauge reads 42 kPa.', 'status': 'ok', 'reading': {'value': 42, 'unit': 'kPa', 'confidence': 0.9}, 'step_complete': False}",
        '{"note": "thinking"} then ' + json.dumps(GOOD),  # a stray object first
    ],
)
def test_prose_fences_and_slips_around_the_json_are_tolerated(reply: str) -> None:
    answer = parse_answer(reply)
    assert answer.say == "The gauge reads 42 kPa."
    assert answer.status == "ok"
    assert answer.reading is not None and answer.reading.value == 42 and answer.reading.unit == "kPa"


@pytest.mark.parametrize(
    ("status", "expected"),
    [("OK", "ok"), (" Warning ", "warning"), ("DANGER", "danger"), ("unsure", "unsure"),
     ("critical", "unsure"), ("fine-ish", "unsure"), ("", "unsure"), (None, "unsure"), (3, "unsure"),
     ("warn", "warning")],
)
def test_unknown_statuses_become_unsure(status: object, expected: str) -> None:
    assert parse_answer(json.dumps({"say": "x", "status": status})).status == expected


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [(0.8, 0.8), (85, 0.85), ("85%", 0.85), ("0.7", 0.7), ("62.5 %", 0.625), (100, 1.0), (1, 1.0),
     (150, 1.0), (-3, 0.0), ("high", 0.9), ("no idea", 0.5), (None, 0.5), (True, 0.5)],
)
def test_confidences_are_normalised_to_zero_one(confidence: object, expected: float) -> None:
    assert normalise_confidence(confidence) == pytest.approx(expected)
    reply = {"say": "x", "status": "ok", "reading": {"value": 1, "unit": "bar", "confidence": confidence}}
    reading = parse_answer(json.dumps(reply)).reading
    assert reading is not None and reading.confidence == pytest.approx(expected)


@pytest.mark.parametrize(
    ("reading", "expected"),
    [
        ({"value": "42.5 kPa", "confidence": 0.9}, (42.5, "kPa")),
        ({"value": "1,013", "unit": "hPa"}, (1013.0, "hPa")),
        ({"value": "3,5", "unit": "bar"}, (3.5, "bar")),
        (7.25, (7.25, "")),
        ("about 12 V", (12.0, "V")),
        ({"value": None, "unit": "kPa"}, None),
        ({"value": "unreadable"}, None),
        ({"value": "NaN"}, None),
        (["not", "a", "reading"], None),
        (None, None),
    ],
)
def test_readings_are_repaired_or_dropped(reading: object, expected: tuple[float, str] | None) -> None:
    parsed = parse_answer(json.dumps({"say": "x", "status": "ok", "reading": reading})).reading
    if expected is None:
        assert parsed is None
    else:
        assert parsed is not None and (parsed.value, parsed.unit) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), ("true", True), ("Yes", True), (1, True), (False, False), ("no", False), (0, False), (None, False), ("maybe", False)],
)
def test_step_complete_accepts_common_spellings(value: object, expected: bool) -> None:
    assert parse_answer(json.dumps({"say": "x", "status": "ok", "step_complete": value})).step_complete is expected


def test_prose_only_reply_becomes_an_unsure_answer_that_keeps_the_words() -> None:
    answer = parse_answer("The valve looks closed, but the light is poor.")
    assert answer.status == "unsure"
    assert answer.say == "The valve looks closed, but the light is poor."
    assert answer.reading is None and answer.step_complete is False


@pytest.mark.parametrize(
    "reply",
    ["", "   ", None, 42, ["a"], b"bytes", "{", "{{{{", '{"say": ', "[" * 5000 + "]" * 5000, "{" * 5000],
)
def test_unparseable_replies_become_unsure_and_never_raise(reply: object) -> None:
    answer = parse_answer(reply)
    assert isinstance(answer, VlmAnswer)
    assert answer.status == "unsure"
    assert answer.say
    assert answer.step_complete is False


def test_empty_reply_says_it_could_not_be_read() -> None:
    assert parse_answer("").say == UNREADABLE_SAY
    assert parse_answer(None).say == UNREADABLE_SAY


def test_json_without_schema_keys_is_treated_as_prose() -> None:
    answer = parse_answer('{"answer": "yes"}')
    assert answer.status == "unsure"


def test_say_is_capped_and_non_string_say_is_dropped() -> None:
    long = parse_answer(json.dumps({"say": "word " * 1000, "status": "ok"}))
    assert len(long.say) <= 600
    assert parse_answer(json.dumps({"say": {"nested": 1}, "status": "ok"})).say == ""


def test_the_later_of_two_answers_wins() -> None:
    first = {"say": "It is 40.", "status": "ok"}
    second = {"say": "Correction: it is 42.", "status": "warning"}
    answer = parse_answer(json.dumps(first) + "\nActually:\n" + json.dumps(second))
    assert answer.say == "Correction: it is 42." and answer.status == "warning"


# -- the context ------------------------------------------------------------------------------


def test_cap_cuts_at_a_word_break_within_the_limit() -> None:
    text = "alpha beta gamma delta epsilon"
    assert cap(text, 100) == text
    cut = cap(text, 20)
    assert len(cut) <= 20 and cut.endswith("…") and cut.startswith("alpha beta")
    assert cap("  spaced \n\n out  ", 50) == "spaced out"


def _full_context() -> VisionContext:
    return VisionContext(
        owner_profile="P" * 5000,
        facts="F " * 5000,
        goal="Bleed the radiator " * 50,
        step="Open the bleed valve " * 50,
        acceptance_criteria=["water, not air, comes out " * 20, "gauge between 1 and 1.5 bar"],
        readings=[f"{i}: {i / 10} bar" for i in range(40)],
        detections=["person 0.91", "bottle 0.55"] * 40,
        ocr_text="TEXT " * 1000,
        excerpts=["E1 " * 500, "E2 " * 500, "E3 " * 500, "E4 should not appear"],
        exchanges=[Exchange(question=f"q{i} " * 100, answer=f"a{i} " * 200) for i in range(7)],
    )


def test_context_caps_each_field() -> None:
    text = build_context(_full_context())
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line and not line.startswith("- "))
    assert len(fields["Owner"]) <= CAP_PROFILE
    assert len(fields["Known facts"]) <= CAP_FACTS
    for i in (1, 2, 3):
        assert len(fields[f"Excerpt {i} from the owner's documents"]) <= CAP_EXCERPT
    assert "Excerpt 4" not in text and "E4" not in text
    # The newest readings survive the cap, the oldest go.
    assert "39: 3.9 bar" in text and "0: 0.0 bar" not in text
    # Only the last four exchanges, oldest first.
    assert [line.split()[2] for line in text.splitlines() if line.startswith("- Q:")] == ["q3", "q4", "q5", "q6"]
    # The whole prompt stays small enough for a free tier.
    assert len(text) < 7000


def test_empty_fields_are_left_out() -> None:
    text = build_context(VisionContext(goal="Check the oil", ocr_text="  "))
    assert text == "Goal: Check the oil"


@pytest.mark.parametrize("mode", ["question", "coach", "notice"])
def test_messages_carry_schema_context_and_image(mode: str) -> None:
    messages = build_messages(
        VisionContext(goal="Check the oil"), "QUJD", mode=mode, question="What does the dipstick say?"  # type: ignore[arg-type]
    )
    assert messages[0]["role"] == "system" and '"step_complete"' in messages[0]["content"]
    parts = messages[1]["content"]
    assert parts[1]["image_url"]["url"] == "data:image/jpeg;base64,QUJD"
    assert "Goal: Check the oil" in parts[0]["text"]
    if mode == "coach":
        assert "silent" in messages[0]["content"]
        assert "dipstick" not in parts[0]["text"]
    else:
        assert "dipstick" in parts[0]["text"]
