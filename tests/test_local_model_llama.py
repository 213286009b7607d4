"""The adapters against a real OpenAI-compatible server, not the scripted one: llama-cpp-python's
own server running SmolLM2-135M (fast; `make install-test` builds the runtime and fetches it).

Whole tool-using turns through the turn loop: a call the model wrote as text (the guard
recovers it), its result, then the answer on the same plain adapter, with the assistant's
tool-call message that this server refuses when its content is null; the made-up tools real
models write (double braces, a bare object) never run and never reach the person; the schema
router's own turn; and the learning lane's JSON."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.common.jsonish import find_object
from actors.providers.local import chatml
from actors.providers.local.adapter import LocalModelProvider
from actors.providers.local.catalog import choose
from actors.providers.local.learning import purpose
from actors.providers.local.llama_server import LlamaServer
from actors.providers.local.status import LocalStatus
from actors.providers.local.weights import ensure_weights
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.types import Delta, StreamEnd, TextDelta
from actors.session.core import system_prompt
from actors.session.loop import run_turn
from actors.tools.builtin import builtin_toolbox
from tests.server_proc import LOCAL_THREADS

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / ".venv" / "iriis-models"
SMOL = "smollm2-135m"


@pytest.fixture(scope="module")
async def llama() -> AsyncIterator[LlamaServer]:
    path = ensure_weights(choose(SMOL, False), MODELS)
    server = LlamaServer(path, SMOL, n_ctx=2048, threads=LOCAL_THREADS)
    await server.start(timeout=120)
    yield server
    server.stop()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


def provider(llama: LlamaServer, client: httpx.AsyncClient) -> tuple[LocalModelProvider, LocalStatus]:
    """The adapter on the test server, and the status it reads (kept, to check for errors)."""
    status = LocalStatus(state="ready", model=SMOL, base_url=llama.base_url)

    async def state() -> LocalStatus:
        return status

    return LocalModelProvider(state, client), status


def calculator_only():
    box = builtin_toolbox()
    box.specs = {k: v for k, v in box.specs.items() if k == "calculate"}
    return box


def prompt(question: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system_prompt()}, {"role": "user", "content": question}]


def grammar_call(name: str, arguments: str) -> str:
    """A GBNF grammar that makes the model write this call as text, with its own words in it."""
    return (f'root ::= "{{\\"name\\": \\"{name}\\", \\"arguments\\": {{{arguments}"'
            ' [a-zA-Z0-9 *]{1,12} "\\"}}"')


async def collect(events) -> list[Any]:
    return [e async for e in events]


async def test_null_content_is_what_this_server_refuses(llama: LlamaServer, client: httpx.AsyncClient) -> None:
    messages = [{"role": "user", "content": "12*7?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "84"}]
    raw = await client.post(f"{llama.base_url}/chat/completions", json={"model": SMOL, "messages": messages,
                                                                       "max_tokens": 8})
    assert raw.status_code != 200  # the bug the adapter must not trigger
    provider = OpenAICompatProvider("local", llama.base_url, None, client)
    out = [d async for d in provider.stream(SMOL, messages, None, 60, extra={"max_tokens": 8})]
    assert isinstance(out[-1], StreamEnd)


async def test_a_whole_tool_turn_on_the_plain_adapter(llama: LlamaServer, client: httpx.AsyncClient) -> None:
    """Step one: the model writes a calculate call as text (forced by a grammar, its words its
    own); the guard recovers it and it runs. Step two: the answer, on the same adapter, with
    the assistant's tool-call message in the history."""
    provider = OpenAICompatProvider("local", llama.base_url, None, client)
    steps: list[list[dict[str, Any]]] = []

    async def model(messages: list[dict[str, Any]], tools) -> AsyncIterator[Delta]:
        steps.append([dict(m) for m in messages])
        forced = messages[-1]["role"] == "user"
        # A fixed seed: the model's own words, drawn the same way every run (with a fresh seed
        # each time, one clean-clone run in six drew a reply with no call and failed).
        extra = ({"grammar": grammar_call("calculate", '\\"expression\\": \\"12*7'), "max_tokens": 40, "seed": 7}
                 if forced else {"max_tokens": 40, "seed": 7})
        async for delta in provider.stream(SMOL, messages, tools, 60, extra=extra):
            yield delta

    events = await collect(run_turn(model, prompt("What is 12*7?"), calculator_only()))
    tools = [(e.name, e.status) for e in events if e.type == "tool"]
    assert tools[:1] == [("calculate", "start")] and tools[1][0] == "calculate", events
    assert events[-1].type == "result" and events[-1].tools[0]["name"] == "calculate"
    assert '"name"' not in events[-1].text  # the markup never reached the reply
    second = steps[1]
    assert second[-2]["role"] == "assistant" and second[-2]["content"] is None and second[-1]["role"] == "tool"


@pytest.mark.parametrize("doubled", [True, False])
async def test_a_made_up_tool_written_as_markup_never_runs_or_shows(llama: LlamaServer, client: httpx.AsyncClient,
                                                                    doubled: bool) -> None:
    provider = OpenAICompatProvider("local", llama.base_url, None, client)

    async def model(messages: list[dict[str, Any]], tools) -> AsyncIterator[Delta]:
        grammar = grammar_call("lookup_camera", '\\"question\\": \\"')
        if not doubled:
            grammar = grammar.replace('"{{\\"name', '"{\\"name').replace('"\\"}}"', '"\\"}"')
        else:
            grammar = grammar.replace('"{{\\"name', '"{{{\\"name').replace('"\\"}}"', '"\\"}}}"')
        extra = {"grammar": grammar, "max_tokens": 40} if tools else {"max_tokens": 30}
        async for delta in provider.stream(SMOL, messages, tools, 60, extra=extra):
            yield delta

    events = await collect(run_turn(model, prompt("What is the capital of France?"), calculator_only()))
    assert not [e for e in events if e.type == "tool"]
    spoken = " ".join(e.text for e in events if e.type == "sentence")
    assert "lookup_camera" not in spoken and "lookup_camera" not in events[-1].text
    assert events[-1].type == "result" and events[-1].text


async def test_the_schema_router_turns_a_choice_into_a_real_tool_call(llama: LlamaServer,
                                                                      client: httpx.AsyncClient) -> None:
    local, status = provider(llama, client)
    sent: list[dict[str, Any]] = []

    async def model(messages: list[dict[str, Any]], tools) -> AsyncIterator[Delta]:
        sent.append({"tools": tools})
        async for delta in local.stream(SMOL, messages, tools, 60):
            yield delta

    events = await collect(run_turn(model, prompt("Use the calculate tool for 12*7"), calculator_only()))
    tools = [(e.name, e.status) for e in events if e.type == "tool"]
    assert tools == [("calculate", "start"), ("calculate", "done")]
    assert "84" in events[-1].tools[0]["result"]
    assert events[-1].type == "result" and events[-1].text.strip()
    assert not status.error


async def test_the_learning_lane_returns_schema_json(llama: LlamaServer, client: httpx.AsyncClient) -> None:
    learner = provider(llama, client)[0].learning()
    messages = [{"role": "system", "content": "Answer with ONE JSON object of observations about the owner."},
                {"role": "user", "content": "Owner: my sister is called Ana.\nAssistant: Noted."}]
    with purpose("reflection"):
        text = "".join(d.text for d in [d async for d in learner.stream(SMOL, messages, None, 60)]
                       if isinstance(d, TextDelta))
    found = find_object(text, {"observations", "people", "lesson", "open_loops"})
    assert found is not None and isinstance(found["observations"], list), text
    json.loads(text)  # whole: the schema's bounds end it before the token cap


def proc_state(pid: int) -> str:
    """The process's state letter: T while stopped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


async def test_a_chat_turn_pauses_the_learning_server_and_the_learning_call_still_finishes(
        llama: LlamaServer, client: httpx.AsyncClient) -> None:
    learning_server = LlamaServer(ensure_weights(choose(SMOL, False), MODELS), SMOL, n_ctx=2048, threads=LOCAL_THREADS)
    await learning_server.start(timeout=120)
    try:
        assert learning_server.proc is not None
        pid = learning_server.proc.pid
        status = LocalStatus(state="ready", model=SMOL, base_url=llama.base_url,
                             learning_url=learning_server.base_url)

        async def state() -> LocalStatus:
            return status

        seen: list[str] = []

        async def hold(paused: bool) -> None:
            learning_server.pause(paused)
            for _ in range(100):  # the signal is delivered a moment after kill() returns
                if (proc_state(pid) == "T") == paused:
                    break
                await asyncio.sleep(0.01)
            seen.append(proc_state(pid))

        chat = LocalModelProvider(state, client, hold=hold)

        async def reflect() -> str:
            messages = [{"role": "system", "content": "Answer with ONE JSON object of observations about the owner."},
                        {"role": "user", "content": "Owner: my sister is called Ana.\nAssistant: Noted."}]
            with purpose("reflection"):
                return "".join(d.text for d in [d async for d in chat.learning().stream(SMOL, messages, None, 60)]
                               if isinstance(d, TextDelta))

        learning = asyncio.create_task(reflect())
        await asyncio.sleep(0.3)  # the learning call is on its server
        reply = "".join(d.text for d in [d async for d in chat.stream(SMOL, prompt("Say hello."), None, 60)]
                        if isinstance(d, TextDelta))
        text = await asyncio.wait_for(learning, 120)
        # Stopped for the chat turn, then let go on; the chat turn answered meanwhile.
        assert seen[0] == "T" and seen[-1] != "T" and reply.strip(), (seen, reply)
        found = find_object(text, {"observations", "people", "lesson", "open_loops"})
        assert found is not None, text
    finally:
        learning_server.stop()
    assert not learning_server.running()


async def test_a_prompt_rendered_here_is_the_prompt_the_server_renders(llama: LlamaServer,
                                                                       client: httpx.AsyncClient) -> None:
    """The same tokens through `/completions` (rendered by chatml.py) as through the chat
    endpoint (rendered by the GGUF's own template): same count, same greedy continuation."""
    messages = [{"role": "system", "content": "You answer in one short sentence."},
                {"role": "user", "content": "What colour is the sky?"},
                {"role": "assistant", "content": '"Blue."'},
                {"role": "user", "content": "And grass?"}]
    settings = {"model": SMOL, "max_tokens": 12, "temperature": 0.0}
    chat = (await client.post(f"{llama.base_url}/chat/completions", timeout=60,
                              json={**settings, "messages": messages})).json()
    raw = (await client.post(f"{llama.base_url}/completions", timeout=60,
                             json={**settings, "prompt": chatml.render(messages)})).json()
    assert raw["usage"]["prompt_tokens"] == chat["usage"]["prompt_tokens"]
    assert raw["choices"][0]["text"] == chat["choices"][0]["message"]["content"]


async def test_an_answer_only_step_goes_on_with_no_grammar_from_its_first_token(
        llama: LlamaServer, client: httpx.AsyncClient) -> None:
    local, status = provider(llama, client)
    deltas = [d async for d in local.stream(SMOL, [{"role": "user", "content": "Say hello to me."}],
                                            builtin_toolbox().schemas(), 60)]
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert text.strip() and not text.lstrip().startswith(("{", '"')), text
    assert isinstance(deltas[-1], StreamEnd) and deltas[-1].finish_reason in ("stop", "length")
    assert not status.error
