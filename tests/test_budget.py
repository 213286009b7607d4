"""One turn's tool results stay within budget; the newest results and earlier turns are kept whole."""

from __future__ import annotations

from typing import Any

import pytest

from actors.common.budget import (
    KEEP_RECENT,
    OLD_RESULT_KEEP,
    RESULT_CAP,
    TURN_TOOL_BUDGET,
    cap_result,
    compact_tool_messages,
    is_shortened,
    turn_tool_chars,
)


def _tool(text: str, call_id: str = "c") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _turn(sizes: list[int], history: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """History, then a user message, then one assistant call and result per size."""
    messages: list[dict[str, Any]] = list(history or [])
    messages.append({"role": "user", "content": "look things up"})
    for i, size in enumerate(sizes):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}"}]})
        # Each result starts with its index so tests can tell which was kept.
        messages.append(_tool((f"r{i}:" + "x" * size)[:size], f"c{i}"))
    return messages


def _results(messages: list[dict[str, Any]]) -> list[str]:
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [m["content"] for m in messages[last_user + 1:] if m["role"] == "tool"]


def test_constants_match_the_agreed_budget() -> None:
    assert (RESULT_CAP, TURN_TOOL_BUDGET, OLD_RESULT_KEEP, KEEP_RECENT) == (4000, 60000, 1500, 3)


def test_cap_result_leaves_short_text_alone() -> None:
    assert cap_result("short") == "short"
    assert cap_result("x" * RESULT_CAP) == "x" * RESULT_CAP


def test_cap_result_cuts_and_says_how_much() -> None:
    out = cap_result("a" * 10 + "b" * 5, cap=10)
    assert out.startswith("a" * 10)
    assert "b" not in out
    assert "5 more characters" in out


def test_cap_result_default_cap() -> None:
    out = cap_result("y" * (RESULT_CAP + 123))
    assert out.startswith("y" * RESULT_CAP)
    assert "123 more characters" in out


def test_under_budget_nothing_changes() -> None:
    messages = _turn([10000] * 5)
    before = [dict(m) for m in messages]
    assert compact_tool_messages(messages) == 0
    assert messages == before


def test_exactly_at_budget_nothing_changes() -> None:
    messages = _turn([15000] * 4)
    assert turn_tool_chars(messages) == TURN_TOOL_BUDGET
    assert compact_tool_messages(messages) == 0
    assert all(len(r) == 15000 for r in _results(messages))


def test_over_budget_older_results_are_shortened_recent_three_kept() -> None:
    sizes = [20000, 15000, 10000, 9000, 8000, 7000]
    messages = _turn(sizes)
    originals = _results(messages)
    assert compact_tool_messages(messages) == 3
    results = _results(messages)
    for old, new, size in zip(originals[:3], results[:3], sizes[:3]):
        assert new.startswith(old[:OLD_RESULT_KEEP])
        assert is_shortened(new)
        assert f"[shortened: {size - OLD_RESULT_KEEP} characters dropped" in new
    assert results[3:] == originals[3:]


def test_one_over_budget_triggers_shortening() -> None:
    messages = _turn([15000, 15000, 15000, 15001])
    assert compact_tool_messages(messages) == 1
    results = _results(messages)
    assert is_shortened(results[0])
    assert [len(r) for r in results[1:]] == [15000, 15000, 15001]


def test_small_older_results_are_not_padded_with_a_note() -> None:
    messages = _turn([1000, 30000, 30000, 30000])
    assert compact_tool_messages(messages) == 0
    assert _results(messages)[0] == ("r0:" + "x" * 1000)[:1000]


def test_earlier_turns_tool_messages_are_untouched() -> None:
    history = [
        {"role": "user", "content": "earlier question"},
        _tool("h" * 50000, "old1"),
        _tool("h" * 50000, "old2"),
        {"role": "assistant", "content": "earlier answer"},
    ]
    messages = _turn([5000, 5000], history=history)
    # History alone is far over budget, but it is not this turn's.
    assert compact_tool_messages(messages) == 0
    messages = _turn([30000, 20000, 6000, 6000], history=history)
    assert compact_tool_messages(messages) == 1
    assert messages[1]["content"] == "h" * 50000
    assert messages[2]["content"] == "h" * 50000


def test_second_pass_is_idempotent() -> None:
    messages = _turn([30000, 30000, 30000, 30000, 30000])
    assert compact_tool_messages(messages) == 2
    snapshot = [dict(m) for m in messages]
    # Still over budget because of the three kept whole, yet nothing more to do.
    assert turn_tool_chars(messages) > TURN_TOOL_BUDGET
    assert compact_tool_messages(messages) == 0
    assert messages == snapshot


def test_new_results_later_in_the_turn_shorten_the_ones_that_left_the_recent_window() -> None:
    messages = _turn([30000, 30000, 30000, 30000])
    assert compact_tool_messages(messages) == 1
    messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": "c9"}]})
    messages.append(_tool("n" * 100, "c9"))
    assert compact_tool_messages(messages) == 1
    results = _results(messages)
    assert [is_shortened(r) for r in results] == [True, True, False, False, False]
    assert results[0].count("[shortened:") == 1


def test_list_content_parts_are_counted_and_shortened() -> None:
    messages = _turn([20000, 20000, 20000])
    messages.insert(2, {"role": "tool", "tool_call_id": "p", "content": [{"type": "text", "text": "p" * 5000}]})
    assert compact_tool_messages(messages) == 1
    assert messages[2]["content"].startswith("p" * OLD_RESULT_KEEP)
    assert is_shortened(messages[2]["content"])


@pytest.mark.parametrize("content", [None, ""])
def test_empty_tool_results_count_as_zero(content: Any) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "a", "content": content}]
    assert turn_tool_chars(messages) == 0
    assert compact_tool_messages(messages) == 0
