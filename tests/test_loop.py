"""One agent turn: streamed sentences, tool calls (structured and as markup), caps, empty replies."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from actors.providers.offline import NO_MODEL, OfflineModel
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.types import Delta, StreamEnd, TextDelta
from actors.session.events import TurnEvent
from actors.session.loop import APOLOGY, run_turn
from actors.tools.builtin import builtin_toolbox
from tests import scripted_openai as so


@pytest.fixture
async def scripted_model(model: so.ScriptedOpenAI) -> AsyncIterator[Any]:
    async with httpx.AsyncClient() as client:
        provider = OpenAICompatProvider("scripted", model.base_url, "k", client)

        def stream(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> AsyncIterator[Delta]:
            return provider.stream("scripted-model", messages, tools, timeout=5)
        yield stream


async def turn(model_fn: Any, text: str = "hi", **kw: Any) -> tuple[list[TurnEvent], list[dict[str, Any]]]:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": text}]
    events = [e async for e in run_turn(model_fn, messages, builtin_toolbox(), **kw)]
    return events, messages


def sentences(events: list[TurnEvent]) -> list[str]:
    return [e.data["text"] for e in events if e.type == "sentence"]


async def test_first_sentence_leaves_before_the_model_finishes() -> None:
    finished = asyncio.Event()

    async def slow_model(messages, tools) -> AsyncIterator[Delta]:
        for word in "The kettle is on. It will boil in a minute. Then tea.".split(" "):
            yield TextDelta(text=word + " ")
        finished.set()
        yield StreamEnd(finish_reason="stop")

    messages = [{"role": "user", "content": "tea?"}]
    async for event in run_turn(slow_model, messages, builtin_toolbox()):
        assert event.type == "sentence" and event.data["text"] == "The kettle is on."
        assert not finished.is_set()
        break


async def test_reply_streams_as_indexed_sentences(model, scripted_model) -> None:
    model.enqueue(so.text("Paris is the capital. It is on the Seine. Lovely city!"))
    events, _ = await turn(scripted_model)
    assert sentences(events) == ["Paris is the capital.", "It is on the Seine.", "Lovely city!"]
    assert [e.data["index"] for e in events if e.type == "sentence"] == [0, 1, 2]
    assert events[-1].type == "result" and events[-1].data["text"].startswith("Paris is the capital.")


async def test_structured_tool_call_runs_and_the_model_answers(model, scripted_model) -> None:
    model.enqueue(so.tools(("calculate", {"expression": "19*23"})), so.text("It is 437."))
    events, messages = await turn(scripted_model, "what is 19 times 23")
    tool_events = [(e.data["name"], e.data["status"]) for e in events if e.type == "tool"]
    assert tool_events == [("calculate", "start"), ("calculate", "done")]
    tool_msg = next(m for m in messages if m["role"] == "tool")
    assert "437" in tool_msg["content"] and 'untrusted="true"' in tool_msg["content"]
    second_request = model.requests[1]["body"]["messages"]
    assert second_request[-1]["role"] == "tool" and second_request[-2]["tool_calls"][0]["function"]["name"] == "calculate"
    assert sentences(events) == ["It is 437."]


@pytest.mark.parametrize("markup", [
    'Let me check. <tool_call>{"name": "calculate", "arguments": {"expression": "2**10"}}</tool_call>',
    'Let me check. <function=calculate>{"expression": "2**10"}</function>',
    'Let me check.\n```json\n{"name": "calculate", "arguments": {"expression": "2**10"}}\n```',
])
async def test_tool_call_written_as_text_is_recovered_and_never_spoken(model, scripted_model, markup) -> None:
    model.enqueue(so.text(markup), so.text("That makes 1024."))
    events, messages = await turn(scripted_model)
    spoken = " ".join(sentences(events))
    assert spoken == "Let me check. That makes 1024."
    assert "<" not in events[-1].data["text"] and "```" not in events[-1].data["text"]
    assert any(m["role"] == "tool" and "1024" in m["content"] for m in messages)


async def test_tool_errors_reach_the_model_not_the_user_as_a_crash(model, scripted_model) -> None:
    model.enqueue(so.tools(("calculate", {"expression": "1/0"})), so.text("That cannot be done."))
    events, messages = await turn(scripted_model)
    assert [e.data["status"] for e in events if e.type == "tool"] == ["start", "error"]
    assert "division by zero" in next(m for m in messages if m["role"] == "tool")["content"]


async def test_step_cap_ends_with_a_sentence_saying_so(model, scripted_model) -> None:
    model.default_reply = so.tools(("current_time", {}))
    events, _ = await turn(scripted_model, max_steps=3)
    assert sum(1 for e in events if e.type == "tool" and e.data["status"] == "start") == 3
    assert "more than 3 steps" in sentences(events)[-1]
    assert len(model.requests) == 3


async def test_empty_reply_is_retried_once_without_tools(model, scripted_model) -> None:
    model.enqueue(so.text(""), so.text("Here is my answer."))
    events, _ = await turn(scripted_model)
    assert sentences(events) == ["Here is my answer."]
    assert "tools" in model.requests[0]["body"] and "tools" not in model.requests[1]["body"]


async def test_two_empty_replies_give_a_fixed_apology(model, scripted_model) -> None:
    model.enqueue(so.text(""), so.text(""))
    events, _ = await turn(scripted_model)
    assert sentences(events) == [APOLOGY]


async def test_offline_model_does_arithmetic_with_the_tool() -> None:
    events, _ = await turn(OfflineModel().stream, "What is 12 * (3 + 4)?")
    assert [e.data["status"] for e in events if e.type == "tool"] == ["start", "done"]
    assert "84" in " ".join(sentences(events))


async def test_offline_model_tells_the_time() -> None:
    events, _ = await turn(OfflineModel().stream, "what time is it?")
    assert any(e.type == "tool" and e.data["name"] == "current_time" for e in events)
    assert sentences(events)[0].startswith("It is ")


async def test_offline_model_says_plainly_that_no_model_is_configured() -> None:
    events, _ = await turn(OfflineModel().stream, "Write me a poem about autumn")
    assert " ".join(sentences(events)) == NO_MODEL.replace("  ", " ")
    assert "OPENAI_API_KEY" in events[-1].data["text"]
