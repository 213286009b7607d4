"""The person's own words for a time reach the tool in place of the date the local model worked
out (actors/providers/local/grounding.py): one time in the message, and only then."""

from __future__ import annotations

import pytest

from actors.providers.local.grounding import ground, person_time

REMIND = {"type": "object", "properties": {"text": {"type": "string"}, "at": {"type": "string"}}}


@pytest.mark.parametrize("message, phrase", [
    ("Remind me on Friday at 5pm to book the restaurant", "on friday at 5pm"),
    ("Ping me in half an hour about the tea", "in half an hour"),
    ("Remind me at 7pm to take my vitamins", "at 7pm"),
    ("In 45 minutes, remind me to take the laundry out", "in 45 minutes"),
    ("Remind me tomorrow at 9 to call the bank", "tomorrow at 9"),
    ("Remind me next Monday morning to submit the report", "next monday morning"),
    ("Set a reminder for tomorrow 08:15 to leave for the train", "tomorrow 08:15"),
    ("Call me in twenty minutes about the meeting", "in 20 minutes"),
])
def test_the_one_time_a_message_names(message: str, phrase: str) -> None:
    assert person_time(message) == phrase


@pytest.mark.parametrize("message", [
    "Remind me in 1 hour to call Ana and in 2 hours to call Ben",    # two times: the model's own
    "Remind me every Sunday at 6pm to plan the week",                # a repeat
    "Remind me to call mom",                                         # none
])
def test_no_single_time_leaves_the_models_value(message: str) -> None:
    assert person_time(message) is None
    assert ground({"text": "x", "at": "2026-12-07T17:00"}, REMIND, message)["at"] == "2026-12-07T17:00"


def test_only_a_tool_with_a_time_argument_is_touched() -> None:
    message = "Remind me on Friday at 5pm to book the restaurant"
    assert ground({"text": "book", "at": "2026-12-07T17:00:00"}, REMIND, message) == {
        "text": "book", "at": "on friday at 5pm"}
    calc = {"type": "object", "properties": {"expression": {"type": "string"}}}
    assert ground({"expression": "5*17"}, calc, message) == {"expression": "5*17"}


def test_a_call_without_a_time_gets_none_added() -> None:
    message = "Write me a short report about the 5pm meeting"
    assert ground({"text": "report"}, REMIND, message) == {"text": "report"}


def test_a_repeat_the_model_gave_is_the_persons_and_its_next_time_comes_first() -> None:
    schema = {"type": "object", "properties": {"text": {}, "at": {}, "repeat": {}}}
    said = "Remind me every Sunday at 6pm to plan the week"
    assert ground({"text": "plan", "at": "2026-12-07T18:00", "repeat": "weekly"}, schema, said) == {
        "text": "plan", "repeat": "every sunday at 6pm"}
    assert ground({"text": "mail", "at": "08:00", "repeat": "daily"}, schema,
                  "Remind me every weekday at 8 to check my email")["repeat"] == "every weekday at 8"
    # The model gave no repeat: it is not added.
    assert "repeat" not in ground({"text": "plan", "at": "18:00"}, schema, said)


def test_a_time_in_the_past_goes_to_the_tool_which_refuses_it() -> None:
    assert person_time("Remind me yesterday at 9am to call Bob") == "yesterday at 9am"


CHART = {"type": "object", "properties": {"kind": {}, "series": {}, "x": {}, "y": {}, "x_labels": {}}}


def test_a_chart_call_that_dropped_the_numbers_gets_the_persons_pairs() -> None:
    said = "Make a pie chart of my budget: rent 1200, food 400, transport 150, fun 250"
    sent = {"kind": "pie", "series": "rent, food, transport, fun", "x_labels": "Rent, Food, Transport, Fun"}
    assert ground(sent, CHART, said) == {"kind": "pie", "series": "rent 1200, food 400, transport 150, fun 250"}
    lines = "Bar chart please:\nApples 5\nPears 3\nPlums 8"
    assert ground({"kind": "bar", "series": "Apples, Pears, Plums", "x": "Fruits", "y": "Quantity"}, CHART,
                  lines) == {"kind": "bar", "series": "Apples 5\nPears 3\nPlums 8"}
    # Numbers the model did send are kept, and a message without pairs changes nothing.
    kept = {"kind": "bar", "series": {"rain": [40, 32, 55]}, "x_labels": ["Jan", "Feb", "Mar"]}
    assert ground(kept, CHART, "Make a bar chart of rainfall: Jan 40, Feb 32, Mar 55") == kept
    assert ground({"kind": "bar", "series": "a, b"}, CHART, "Make me a chart") == {"kind": "bar", "series": "a, b"}
