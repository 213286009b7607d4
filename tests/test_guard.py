"""Tests for actors.providers.guard.ToolCallGuard."""

from __future__ import annotations

import random

import pytest

from actors.providers.guard import RecoveredCall, ToolCallGuard

Result = tuple[str, list[tuple[str, dict]]]


def _simple(text: str, calls: list[RecoveredCall]) -> Result:
    return text, [(c.name, c.arguments) for c in calls]


def run_whole(text: str, known: set[str] | None = None) -> Result:
    guard = ToolCallGuard(known)
    shown = guard.feed(text)
    rest, calls = guard.finish()
    return _simple(shown + rest, calls)


def run_streamed(text: str, seed: int, known: set[str] | None = None) -> Result:
    """Feed in random 1-3 character deltas, as a token stream would."""
    rng = random.Random(seed)
    guard = ToolCallGuard(known)
    shown: list[str] = []
    i = 0
    while i < len(text):
        step = rng.randint(1, 3)
        shown.append(guard.feed(text[i : i + step]))
        i += step
    rest, calls = guard.finish()
    return _simple("".join(shown) + rest, calls)


CASES: list[tuple[str, str, Result]] = [
    (
        "tool_call tag",
        'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\nDone.',
        ("Let me check.\n\nDone.", [("get_weather", {"city": "Paris"})]),
    ),
    (
        "tool_call with string arguments and parameters key",
        'A <tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call> B '
        '<tool_call>{"name": "b", "parameters": {"y": 2}}</tool_call> C',
        ("A  B  C", [("a", {"x": 1}), ("b", {"y": 2})]),
    ),
    (
        "lenient repair inside a tag",
        "<tool_call>{'name': 'timer', 'arguments': {'minutes': 5, 'loud': True,},}</tool_call>ok",
        ("ok", [("timer", {"minutes": 5, "loud": True})]),
    ),
    (
        "fenced json call",
        'Sure:\n```json\n{"name": "lights", "arguments": {"on": true}}\n```\nDone',
        ("Sure:\n\nDone", [("lights", {"on": True})]),
    ),
    (
        "bare fence with a list of calls",
        '```\n[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"k": 1}}]\n```',
        ("", [("a", {}), ("b", {"k": 1})]),
    ),
    (
        "function tag",
        'Calling <function=search>{"q": "cats"}</function> now.',
        ("Calling  now.", [("search", {"q": "cats"})]),
    ),
    (
        "function tag with parameter children inside tool_call",
        "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n"
        "<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>",
        ("", [("get_time", {"tz": "UTC", "n": 3})]),
    ),
    (
        "python_tag",
        'Hi <|python_tag|>{"name": "calc", "parameters": {"e": "1+1"}}<|eom_id|>',
        ("Hi ", [("calc", {"e": "1+1"})]),
    ),
    (
        "unclosed tag with complete json is recovered",
        'Trailing <tool_call>{"name": "t", "arguments": {}}',
        ("Trailing ", [("t", {})]),
    ),
    (
        "unclosed tag with cut json is dropped",
        'Trailing <tool_call>{"name": "t", "argu',
        ("Trailing ", []),
    ),
    (
        "malformed json in a confirmed tag is dropped",
        "a<tool_call>{name: oops}}</tool_call>b",
        ("ab", []),
    ),
    (
        "broken call-looking fence is dropped",
        'x\n```json\n{"name": "a", "arguments": {"k": }\n```\ny',
        ("x\n\ny", []),
    ),
    (
        "plain json fence passes",
        'Data:\n```json\n{"temp": 3}\n```\nok',
        ('Data:\n```json\n{"temp": 3}\n```\nok', []),
    ),
    (
        "tool definition in a fence passes",
        '```json\n{"name": "f", "description": "d", "parameters": {}}\n```',
        ('```json\n{"name": "f", "description": "d", "parameters": {}}\n```', []),
    ),
    (
        "code fence with < and backticks passes",
        "Code:\n```python\nif a < b: print(`x`)\n```\nend <3",
        ("Code:\n```python\nif a < b: print(`x`)\n```\nend <3", []),
    ),
    (
        "markup inside inline code passes",
        "Write `<tool_call>` to call.",
        ("Write `<tool_call>` to call.", []),
    ),
    (
        "angle brackets and backticks in prose",
        "x<3 and a < b, `like_this` and ``dbl`` plus <b>bold</b> and <|>.",
        ("x<3 and a < b, `like_this` and ``dbl`` plus <b>bold</b> and <|>.", []),
    ),
    (
        "stray closing tag and special token are hidden",
        "Done.</tool_call><|eot_id|>",
        ("Done.", []),
    ),
    ("dangling long partial marker dropped", "end <tool_ca", ("end ", [])),
    ("dangling short partial kept", "end <t", ("end <t", [])),
    ("empty", "", ("", [])),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_whole(text: str, expected: Result) -> None:
    assert run_whole(text) == expected


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", range(8))
def test_tiny_deltas_match_whole(text: str, expected: Result, seed: int) -> None:
    assert run_streamed(text, seed) == expected


def test_single_character_deltas() -> None:
    text = CASES[0][1] + " " + CASES[5][1] + " " + CASES[3][1]
    guard = ToolCallGuard()
    shown = "".join(guard.feed(ch) for ch in text)
    rest, calls = guard.finish()
    assert _simple(shown + rest, calls) == run_whole(text)
    assert [c.name for c in calls] == ["get_weather", "search", "lights"]


def test_text_flows_before_markup_ends() -> None:
    guard = ToolCallGuard()
    assert guard.feed("Let me look that up. ") == "Let me look that up. "
    assert guard.feed("<tool_") == ""
    assert guard.feed('call>{"name": "x", ') == ""
    assert guard.feed('"arguments": {}}</tool_call> Back') == " Back"
    rest, calls = guard.finish()
    assert rest == ""
    assert calls == [RecoveredCall(name="x", arguments={})]


def test_angle_released_once_ruled_out() -> None:
    guard = ToolCallGuard()
    assert guard.feed("x<") == "x"
    assert guard.feed("3 and a <") == "<3 and a "
    assert guard.feed(" b") == "< b"
    assert guard.finish() == ("", [])


def test_backtick_released_once_ruled_out() -> None:
    guard = ToolCallGuard()
    assert guard.feed("use `") == "use "
    assert guard.feed("x` now") == "`x` now"
    assert guard.feed(" ``") == " "
    assert guard.feed("`py\nprint(1)\n") == "```py\nprint(1)\n"
    assert guard.finish() == ("", [])


def test_unknown_name_fence_passes_when_names_given() -> None:
    text = 'Example:\n```json\n{"name": "rm_rf", "arguments": {}}\n```\n'
    assert run_whole(text, known={"lights"}) == (text, [])
    assert run_streamed(text, 3, known={"lights"}) == (text, [])
    assert run_whole(text, known={"rm_rf"}) == ("Example:\n\n", [("rm_rf", {})])


def test_known_names_do_not_filter_tags() -> None:
    text = '<tool_call>{"name": "other", "arguments": {}}</tool_call>'
    assert run_whole(text, known={"lights"}) == ("", [("other", {})])


def test_dropped_markup_is_recorded() -> None:
    guard = ToolCallGuard()
    guard.feed("<tool_call>not json</tool_call>")
    assert guard.finish() == ("", [])
    assert guard.dropped == ["not json"]


def test_finish_resets_calls_for_next_stream() -> None:
    guard = ToolCallGuard()
    guard.feed('<function=a>{}</function>')
    assert guard.finish()[1] == [RecoveredCall(name="a", arguments={})]
    guard.feed("plain")
    assert guard.finish() == ("", [])
