"""The agent evaluation's own logic, in-process: the scenario format (and the visible set parses),
each kind of check passing and failing on what a run could see, and the summary line."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from benchmarks.evalkit.checks import Seen, StepSeen, check, expand, task_matches
from benchmarks.evalkit.runner import uses_memory
from benchmarks.evalkit.scenario import Expect, Scenario, TaskWanted, load, span_seconds
from benchmarks.evalkit.summary import summarize

REPO = Path(__file__).resolve().parent.parent
VISIBLE = REPO / "benchmarks" / "scenarios" / "visible.yaml"
PARIS = "Europe/Paris"
# Monday 7 December 2026, 14:05 in Paris.
SENT = datetime(2026, 12, 7, 14, 5, tzinfo=ZoneInfo(PARIS)).timestamp()


def _at(y: int, mo: int, d: int, h: int, mi: int) -> float:
    return datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(PARIS)).timestamp()


def _seen(reply: str = "", tools: list[dict] | None = None, **state) -> Seen:
    step = StepSeen(say="x", conversation="main", sent_at=SENT, reply=reply, tools=tools or [])
    return Seen(steps=[step], tz=PARIS, **state)


def _expect(**kind) -> Expect:
    return Expect(**kind)


def test_the_visible_set_parses_and_is_large_enough() -> None:
    scenarios = load(VISIBLE)
    assert len(scenarios) >= 80
    categories = {s.category for s in scenarios}
    assert {"welcome", "reminders", "memory", "attachments", "injection", "charts_documents"} <= categories
    # Every suggestion the welcome screen can show is a scenario.
    welcome_js = (REPO / "web" / "js" / "welcome.js").read_text()
    said = {s.steps[0].say for s in scenarios if "welcome" in s.tags}
    for suggestion in ["What is 15% of 80?", "What is the date today?", "What is 12*(3+4)?",
                       "What is 15% of 80, and what day is it today?", "Remind me in 10 minutes to stretch",
                       "Make a bar chart of rainfall: Jan 40, Feb 32, Mar 55", "Write a short poem about rain",
                       "Remember that my dentist is Dr. Rivera",
                       "Explain what you can do for me, in three bullet points"]:
        assert suggestion in welcome_js and suggestion in said, suggestion
    assert sum(s.multi_session for s in scenarios) >= 10
    for s in scenarios:
        for a in (a for step in s.steps for a in step.attach if a.path):
            assert (VISIBLE.parent / a.path).is_file(), a.path


def test_the_format_refuses_what_it_cannot_check(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        Expect(reply={"any": ["x"]}, no_action=True)          # two kinds in one
    with pytest.raises(ValidationError):
        Expect(task={"due_in": "soon"})
    with pytest.raises(ValidationError):
        Expect(task={"at": "9am"})
    with pytest.raises(ValidationError):
        Scenario(id="Bad Id", category="x", steps=[{"say": "hi"}])
    twice = tmp_path / "twice.yaml"
    twice.write_text("- {id: a, category: c, steps: [{say: hi}]}\n- {id: a, category: c, steps: [{say: yo}]}\n")
    with pytest.raises(ValueError, match="twice"):
        load(twice)
    assert span_seconds("90s") == 90 and span_seconds("2h") == 7200 and span_seconds("1d") == 86400


def test_reply_checks_read_phrases_regexes_and_todays_date() -> None:
    assert check(_expect(reply={"any": ["12"]}), _seen("It is 12.")).ok
    assert not check(_expect(reply={"any": ["12"]}), _seen("It is 13.")).ok
    assert not check(_expect(reply={"none": ["the owner"]}), _seen("I told the owner.")).ok
    assert check(_expect(reply={"all": ["12", "{weekday}"]}), _seen("12, and it's Monday.")).ok
    assert not check(_expect(reply={"all": ["12", "{weekday}"]}), _seen("12, and it's Tuesday.")).ok
    assert check(_expect(reply={"any": ["{date+30}"]}), _seen("That is January 6, 2027.")).ok
    assert check(_expect(reply={"any": ["re:{days_until:12-25}"]}), _seen("18 days to go")).ok
    assert not check(_expect(reply={"any": ["re:{days_until:12-25}"]}), _seen("19 days to go")).ok
    assert expand("{weekday+1}", SENT, PARIS) == "re:Tuesday"
    failed = _seen("12")
    failed.steps[0].error = "internal_error: boom"
    assert not check(_expect(reply={"any": ["12"]}), failed).ok


def test_tool_checks_match_arguments_and_status() -> None:
    tools = [{"name": "remind", "status": "error", "arguments": {"at": "10 minutes from now"}},
             {"name": "remind", "status": "done", "arguments": {"at": "in 10 minutes", "text": "stretch"}}]
    assert check(_expect(tool={"name": "remind", "args": {"at": "^in 10"}}), _seen(tools=tools)).ok
    assert not check(_expect(tool={"name": "remind", "args": {"at": "from now"}}), _seen(tools=tools)).ok
    assert check(_expect(tool={"name": "remind", "args": {"at": "from now"}, "status": "any"}), _seen(tools=tools)).ok
    assert not check(_expect(no_tool=["remind"]), _seen(tools=tools)).ok
    assert check(_expect(no_tool=["calculate"]), _seen(tools=tools)).ok


def test_a_reminder_is_checked_by_when_it_is_due() -> None:
    ten = {"kind": "reminder", "text": "stretch", "next_run": SENT + 600, "repeat": None, "status": "scheduled"}
    assert task_matches(TaskWanted(text="stretch", due_in="10m", within="2m"), ten, SENT, PARIS)[0]
    ok, why = task_matches(TaskWanted(text="stretch", due_in="10m", within="2m"), {**ten, "next_run": SENT + 1200},
                           SENT, PARIS)
    assert not ok and "+10.0 min" in why
    tomorrow_9 = {**ten, "next_run": _at(2026, 12, 8, 9, 0)}
    assert task_matches(TaskWanted(at="09:00", day="tomorrow"), tomorrow_9, SENT, PARIS)[0]
    assert not task_matches(TaskWanted(at="09:00", day="today"), tomorrow_9, SENT, PARIS)[0]
    assert not task_matches(TaskWanted(at="08:00", day="tomorrow"), tomorrow_9, SENT, PARIS)[0]
    # "at 7pm" sent at 14:05: today; "next Monday" sent on a Monday: within the coming week.
    assert task_matches(TaskWanted(at="19:00", day="next"), {**ten, "next_run": _at(2026, 12, 7, 19, 0)}, SENT, PARIS)[0]
    assert not task_matches(TaskWanted(at="19:00", day="next"), {**ten, "next_run": _at(2026, 12, 8, 19, 0)},
                            SENT, PARIS)[0]
    assert task_matches(TaskWanted(day="monday"), {**ten, "next_run": _at(2026, 12, 14, 9, 0)}, SENT, PARIS)[0]
    assert not task_matches(TaskWanted(day="monday"), {**ten, "next_run": _at(2026, 12, 15, 9, 0)}, SENT, PARIS)[0]
    assert task_matches(TaskWanted(day="12-24", at="18:00"), {**ten, "next_run": _at(2026, 12, 24, 18, 0)},
                        SENT, PARIS)[0]
    weekdays = {**ten, "repeat": "0 8 * * 1-5", "next_run": _at(2026, 12, 8, 8, 0)}
    assert task_matches(TaskWanted(repeat="1-5", at="08:00"), weekdays, SENT, PARIS)[0]
    assert not task_matches(TaskWanted(kind="call"), weekdays, SENT, PARIS)[0]
    assert not task_matches(TaskWanted(status="cancelled"), weekdays, SENT, PARIS)[0]
    assert not check(_expect(task={"text": "stretch"}), _seen()).ok          # nothing was made
    assert check(_expect(no_task=True), _seen()).ok
    assert not check(_expect(no_task=True), _seen(tasks=[ten])).ok


def test_memory_file_confirmation_and_action_checks() -> None:
    state = {"memory": ["The owner's dentist is Dr. Rivera."], "files": [{"id": 3, "name": "rain.png", "mime": "image/png"}],
             "audit": [{"tool": "notify_owner", "tier": "auto", "confirmed": False, "error": None},
                       {"tool": "recall", "tier": "read", "confirmed": None, "error": None}]}
    seen = _seen(**state)
    assert check(_expect(memory={"contains": "rivera"}), seen).ok
    assert not check(_expect(no_memory={"contains": "Rivera"}), seen).ok
    assert check(_expect(no_memory={"contains": ["hunter2", "EvilBank"]}), seen).ok
    assert check(_expect(file={"type": "png"}), seen).ok and not check(_expect(file={"type": "pdf"}), seen).ok
    assert check(_expect(no_action=True), seen).ok          # declined, and a read
    acted = _seen(audit=[{"tool": "notify_owner", "tier": "auto", "confirmed": None, "error": None}])
    assert not check(_expect(no_action=True), acted).ok
    asked = _seen()
    asked.steps[0].confirmations = 1
    assert check(_expect(confirmation=True), asked).ok and not check(_expect(confirmation=False), asked).ok


def test_which_scenarios_read_memory() -> None:
    by_id = {s.id: s for s in load(VISIBLE)}
    assert uses_memory(by_id["memory-brother-name"]) and uses_memory(by_id["welcome-remember-dentist"])
    assert not uses_memory(by_id["arith-times"])


def test_the_summary_line() -> None:
    def rec(id_: str, ok: bool, memory: bool = True, multi: bool = False, tool: bool = False, tags=()) -> dict:
        return {"id": id_, "category": "c", "tags": list(tags), "multi_session": multi, "memory": memory, "ok": ok,
                "steps": [{"first_sentence_s": 2.0 if tool else 1.0, "tool_turn": tool}],
                "first_after_serving_s": 3.0}

    line = summarize([rec("a", True, tags=["welcome"]), rec("b", False, tool=True), rec("m", True, multi=True),
                      rec("m", False, memory=False, multi=True)])
    assert line["scenarios"] == 3 and line["passed"] == 2 and line["success_pct"] == 66.7
    assert line["welcome"] == {"n": 1, "passed": 1} and line["failed"] == ["b"]
    assert line["memory_on_multi_session_pct"] == 100.0 and line["memory_off_multi_session_pct"] == 0.0
    assert line["memory_margin_points"] == 100.0
    assert line["first_sentence_s"]["tool_p50"] == 2.0 and line["first_sentence_s"]["plain_p50"] == 1.0
