"""The session actor's Ray-free cores, driven in-process through `tests/actor_harness.py`:
typed turn events and their wire bytes, turns one at a time, cancel, confirmations and the
PIN rule, and the learning plan."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from actors.common.errors import ErrorInfo
from actors.common.pins import PIN_PROBLEMS
from actors.devices.people import OWNER_ID
from actors.devices.privacy import event_for_reader
from actors.session import turns
from actors.session.confirmations import (
    ConfirmationAnswer,
    ConfirmationBook,
    ConfirmationNotFound,
    PinRefused,
    SessionRefusal,
    refusal_status,
)
from actors.session.events import (
    ConfirmAsked,
    ConfirmRequest,
    Done,
    Sentence,
    SessionStarted,
    ToolActivity,
    TurnError,
    TurnRequest,
    TurnResult,
    TurnScope,
    parse_event,
    sse,
)
from actors.session.learning import LearningPlan, work_summary
from actors.store.models import HEALTH_CHANNEL
from tests.actor_harness import (
    Ask,
    Fail,
    FakeAgent,
    Hold,
    SessionHarness,
    run_core_test,
)

PIN_ASK = ConfirmRequest(tool="send_email", arguments={"to": "ann@example.com"}, question="Send it?",
                         needs_pin=True, reason="")
YES_ASK = PIN_ASK.model_copy(update={"needs_pin": False})
TOOLS = [{"name": "calculate", "arguments": {"e": "2+2"}, "status": "done", "result": "4", "source": "builtin"}]


def reply(text: str = "Done.", tools: list[dict[str, Any]] | None = None) -> list[Any]:
    return [Sentence(text=text, index=0), TurnResult(text=text, tools=tools or [])]


def legacy_sse(kind: str, data: dict[str, Any]) -> str:
    """How the dict events were encoded before they were typed."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


# -- events on the wire ----------------------------------------------------------------------

WIRE = [
    (SessionStarted(session_id="s1", turn_id="t1"), "session", {"session_id": "s1", "turn_id": "t1"}),
    (Sentence(text="Zürich is cold.", index=2), "sentence", {"text": "Zürich is cold.", "index": 2}),
    (ToolActivity(name="calc", status="start", arguments={"e": "1+1"}), "tool",
     {"name": "calc", "status": "start", "arguments": {"e": "1+1"}}),
    (ToolActivity(name="calc", status="done", result="2", files=[3]), "tool",
     {"name": "calc", "status": "done", "result": "2", "files": [3]}),
    (ToolActivity(name="read_attachment", status="error", result="gone"), "tool",
     {"name": "read_attachment", "status": "error", "result": "gone"}),
    (ConfirmAsked(id="s1.ab", question="Send?", tool="send", arguments={"to": "x"}, needs_pin=False,
                  reason="why", expires_in=600.0), "confirm",
     {"id": "s1.ab", "question": "Send?", "tool": "send", "arguments": {"to": "x"}, "needs_pin": False,
      "reason": "why", "expires_in": 600.0}),
    (Done(session_id="s1", message_id=None, text="Half", cancelled=True), "done",
     {"session_id": "s1", "message_id": None, "text": "Half", "cancelled": True}),
    (TurnError.of("provider_error", "Cut short."), "error", {"code": "provider_error", "message": "Cut short."}),
]


@pytest.mark.parametrize(("event", "kind", "data"), WIRE, ids=[w[1] + str(i) for i, w in enumerate(WIRE)])
def test_each_event_kind_encodes_to_the_same_sse_bytes_as_before(event: Any, kind: str, data: dict[str, Any]) -> None:
    assert sse(event) == event.sse() == legacy_sse(kind, data)
    assert sse(parse_event(kind, data)) == legacy_sse(kind, data)


def test_the_error_event_carries_the_one_error_model() -> None:
    event = parse_event("error", {"code": "internal_error", "message": "x"})
    assert isinstance(event, TurnError) and event.error == ErrorInfo(code="internal_error", message="x")


def test_another_reader_sees_no_tool_arguments_or_results() -> None:
    start, done, confirm = WIRE[2][0], WIRE[3][0], WIRE[5][0]
    assert event_for_reader(start, reader_is_person=False).data == {"name": "calc", "status": "start"}
    assert event_for_reader(done, reader_is_person=False).data == {"name": "calc", "status": "done", "files": [3]}
    assert "arguments" not in event_for_reader(confirm, reader_is_person=False).data
    assert event_for_reader(done, reader_is_person=True) is done
    sentence = WIRE[1][0]
    assert event_for_reader(sentence, reader_is_person=False) is sentence


def test_a_turn_request_carries_its_scope_and_step_cap() -> None:
    request = TurnRequest(messages=[], session_id="s1", turn_id="t1", scope=TurnScope(person=3, device=7))
    assert request.max_steps == 10 and request.attended and request.scope.model_dump() == {"person": 3, "device": 7}


# -- turns -------------------------------------------------------------------------------------


async def test_a_turn_streams_its_id_then_events_then_done_and_saves_the_reply() -> None:
    agent = FakeAgent([ToolActivity(name="calculate", status="start", arguments={}), *reply("It is 4.", TOOLS)])
    harness = await run_core_test(agent, send=["what is 2+2?"], expect=[["turn", "tool", "sentence", "done"]])
    user, assistant = harness.core.history
    assert (user.content, assistant.content, assistant.meta) == ("what is 2+2?", "It is 4.", {"tools": TOOLS})
    assert agent.requests[0].messages[-1] == {"role": "user", "content": "what is 2+2?"}


async def test_the_done_event_names_the_saved_message() -> None:
    harness = SessionHarness(FakeAgent(reply("Hi.")))
    events = await harness.chat("hello")
    assert isinstance(events[-1], Done) and events[-1].message_id == harness.core.history[-1].id
    assert events[0].type == "turn" and events[0].turn_id == harness.desk.current.turn_id


async def test_an_agent_error_ends_the_turn_and_saves_no_reply() -> None:
    agent = FakeAgent([Sentence(text="Let me", index=0), TurnError.of("provider_unavailable", "No model.")])
    harness = await run_core_test(agent, send=["hi"], expect=[["turn", "sentence", "error"]])
    assert [m.role for m in harness.core.history] == ["user"]
    assert harness.learned[0].nothing


async def test_a_broken_turn_ends_with_a_plain_internal_error() -> None:
    harness = SessionHarness(FakeAgent([Fail()]))
    events = await harness.chat("hi")
    assert [e.type for e in events] == ["turn", "error"] and events[-1].error.code == "internal_error"
    await harness.settle()
    assert len(harness.failures) == 1 and [m.role for m in harness.core.history] == ["user"]


async def test_turns_run_one_at_a_time() -> None:
    hold = Hold()
    harness = SessionHarness(FakeAgent([hold, *reply("First.")], reply("Second.")))
    first = harness.start("one")
    await asyncio.wait_for(hold.reached.wait(), 5)
    second = harness.start("two")
    assert harness.desk.waiting == 1 and harness.desk.current is first
    state = turns.state(harness.core, harness.desk, harness.book, started=0.0)
    assert state["running"] and state["queued"] == 1 and state["turn"]["turn_id"] == first.turn_id
    hold.released.set()
    await harness.collect(second)
    assert [m.content for m in harness.core.history] == ["one", "First.", "two", "Second."]


async def test_cancel_keeps_only_what_the_owner_heard() -> None:
    hold = Hold()
    agent = FakeAgent([Sentence(text="One.", index=0), Sentence(text="Two.", index=1), hold, *reply()])
    harness = SessionHarness(agent)
    turn = harness.start("tell me")
    await asyncio.wait_for(hold.reached.wait(), 5)
    assert harness.cancel(heard_index=0)
    events = await harness.collect(turn)
    done = events[-1]
    assert isinstance(done, Done) and done.cancelled and done.text == "One." and done.message_id is None
    assert harness.core.history[-1].content == "One." and harness.core.history[-1].meta == {"interrupted": True}
    assert not harness.cancel()  # nothing runs now
    await harness.settle()
    assert harness.learned[0].nothing


async def test_a_plain_turn_stops_when_its_client_leaves_but_a_background_one_goes_on() -> None:
    plain_hold, background_hold = Hold(), Hold()
    harness = SessionHarness(FakeAgent([plain_hold, *reply()], [background_hold, *reply("Your report is ready.")]))
    plain = harness.start("quick")
    await asyncio.wait_for(plain_hold.reached.wait(), 5)
    harness.desk.client_left(plain.turn_id)
    assert (await harness.collect(plain))[-1].cancelled

    background = harness.start("long job", background=True)
    await asyncio.wait_for(background_hold.reached.wait(), 5)
    harness.desk.client_left(background.turn_id)
    background_hold.released.set()
    done = (await harness.collect(background))[-1]
    assert not done.cancelled and done.text == "Your report is ready."
    await harness.settle()
    assert [n.body for n in harness.notices] == ["Your report is ready."]


# -- confirmations and the PIN rule ------------------------------------------------------------


async def start_and_ask(harness: SessionHarness) -> tuple[Any, ConfirmAsked]:
    turn = harness.start("send the mail")
    follower = harness.desk.follow(turn)

    async def first_confirm() -> ConfirmAsked:
        async for event in follower:
            if isinstance(event, ConfirmAsked):
                return event
        raise AssertionError("no confirm event")

    return turn, await asyncio.wait_for(first_confirm(), 5)


async def test_a_confirmation_is_asked_on_the_stream_and_an_answer_resolves_it() -> None:
    agent = FakeAgent([Ask(YES_ASK), *reply("Sent.")])
    harness = SessionHarness(agent)
    turn, asked = await start_and_ask(harness)
    session, _, token = asked.id.partition(".")
    assert session == "s1" and token and asked.expires_in == harness.book.timeout
    assert [p["id"] for p in harness.book.listing()] == [asked.id]
    assert await harness.answer(asked.id, approve=True) == ConfirmationAnswer(id=asked.id, status="approved")
    await harness.collect(turn)
    assert agent.answers == [True] and len(harness.book) == 0


async def test_an_answered_or_unknown_confirmation_is_not_found() -> None:
    harness = SessionHarness(FakeAgent([Ask(YES_ASK), *reply()]))
    turn, asked = await start_and_ask(harness)
    assert (await harness.answer(asked.id, approve=False)).status == "declined"
    assert (await harness.answer(asked.id, approve=True)).code == "not_found"
    assert (await harness.answer("s1.nothing", approve=True)).code == "not_found"
    await harness.collect(turn)


@pytest.mark.parametrize(("pins", "pin", "code"), [
    ({OWNER_ID: "2468"}, None, "pin_required"),
    ({OWNER_ID: "2468"}, "1111", "wrong_pin"),
    ({}, "2468", "pin_not_set"),
])
async def test_a_pin_tier_yes_needs_the_right_pin(pins: dict[int, str], pin: str | None, code: str) -> None:
    harness = SessionHarness(FakeAgent([Ask(PIN_ASK), *reply()]), pins=pins)
    turn, asked = await start_and_ask(harness)
    refused = await harness.answer(asked.id, approve=True, pin=pin)
    assert isinstance(refused, ErrorInfo) and refused.code == code
    assert refused.message == PIN_PROBLEMS[code].message
    assert len(harness.book) == 1  # still pending: the owner may try again
    assert (await harness.answer(asked.id, approve=False)).status == "declined"  # a no needs no PIN
    await harness.collect(turn)


async def test_only_the_conversations_own_person_approves_with_their_pin() -> None:
    member = 7
    harness = SessionHarness(FakeAgent([Ask(PIN_ASK), *reply()]), person=member,
                             pins={OWNER_ID: "0000", member: "4321"})
    turn, asked = await start_and_ask(harness)
    assert (await harness.answer(asked.id, approve=True, pin="0000")).code == "wrong_pin"
    assert (await harness.answer(asked.id, approve=True, pin="4321")).status == "approved"
    await harness.collect(turn)
    await harness.settle()
    assert harness.learned[0].nothing  # a member's turn never feeds memory


async def test_an_unanswered_confirmation_times_out_as_a_no() -> None:
    agent = FakeAgent([Ask(YES_ASK), *reply()])
    harness = await run_core_test(agent, send=["send"], expect=[["turn", "confirm", "tool", "sentence", "done"]],
                                  timeout=0.01)
    assert agent.answers == [False] and len(harness.book) == 0


async def test_a_finished_turn_declines_what_it_left_pending() -> None:
    book = ConfirmationBook("s1", token=iter(["a", "b", "c"]).__next__)
    first, second, other = book.open("t1", YES_ASK), book.open("t1", YES_ASK), book.open("t2", YES_ASK)
    assert [first.id, second.id, other.id] == ["s1.a", "s1.b", "s1.c"]
    assert book.decline_turn("t1") == 2
    assert first.future.result() is False and not other.future.done()
    with pytest.raises(ConfirmationNotFound):
        book.resolve(first.id, True)


def test_refusals_are_one_family_with_their_http_status() -> None:
    assert isinstance(PinRefused("wrong_pin"), SessionRefusal) and isinstance(ConfirmationNotFound(), SessionRefusal)
    assert refusal_status(ConfirmationNotFound().info()) == 404
    for code, problem in PIN_PROBLEMS.items():
        info = PinRefused(code).info()
        assert (info.code, refusal_status(info), info.message) == (code, problem.status, problem.message)


# -- the learning plan ---------------------------------------------------------------------


def exchange(user: str = "Please remember I moved to Lyon last month", reply_text: str = "Noted.",
             tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"session_id": "s1", "user": user, "reply": reply_text, "tools": tools or []}


def test_a_telling_exchange_is_reflected_on_and_chit_chat_is_not() -> None:
    plan = LearningPlan()
    assert plan.after_turn(exchange(), background=False, cancelled=False, channel="chat").reflect is not None
    assert plan.after_turn(exchange("hi", "Hello!"), background=False, cancelled=False, channel="chat").nothing


def test_health_checks_cancelled_turns_and_device_output_never_feed_memory() -> None:
    plan = LearningPlan()
    assert plan.after_turn(exchange(), False, False, HEALTH_CHANNEL).nothing
    assert plan.after_turn(exchange(), False, True, "chat").nothing
    assert plan.after_turn(None, False, False, "chat").nothing
    device_tools = [{"name": "run_tests", "status": "done", "result": "ok", "source": "device3_dev"}]
    assert plan.after_turn(exchange(tools=device_tools), False, False, "chat").nothing
    assert plan.work == []


def test_a_background_task_distils_at_once_and_chat_work_waits_for_the_session_end() -> None:
    plan = LearningPlan()
    assert plan.after_turn(exchange(tools=TOOLS), True, False, "chat").distill == work_summary(exchange(tools=TOOLS))
    assert plan.after_turn(exchange(tools=TOOLS), False, False, "chat").distill is None
    assert plan.end_work_session() is None and plan.work == []  # one tool-using turn is not a work session
    plan.after_turn(exchange("first", tools=TOOLS), False, False, "chat")
    plan.after_turn(exchange("second", tools=TOOLS), False, False, "chat")
    work = plan.end_work_session()
    assert work is not None and "Asked: first" in work and "Asked: second" in work and plan.work == []


def test_a_work_summary_names_the_ask_each_tool_and_the_reply() -> None:
    assert work_summary(exchange("add them", "It is 4.", TOOLS)) == (
        "Asked: add them\nTools: calculate -> done: 4\nReplied: It is 4.")


def test_a_written_reply_cut_off_while_its_audio_played_keeps_only_what_was_heard() -> None:
    from actors.session.core import SessionCore

    core = SessionCore("s-heard")
    core.create()
    core.add("user", "Tell me the forecast.")
    reply = core.add("assistant", "The forecast has three parts. Then rain, wind and sun.")
    user = core.history[0]
    assert core.keep_heard(user.id, "Tell") is None                      # only a reply can be cut
    assert core.keep_heard(reply.id, "") is None                         # nothing heard: unchanged
    assert core.keep_heard(reply.id, reply.content + " more") is None    # nothing to cut
    fixed = core.keep_heard(reply.id, " The forecast has three parts. ")
    assert fixed is not None and fixed.id == reply.id
    assert fixed.content == "The forecast has three parts." and fixed.meta["interrupted"] is True
    assert core.history[-1] == fixed
    assert core.buffer.unsaved_messages >= 1
