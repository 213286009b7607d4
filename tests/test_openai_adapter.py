"""The OpenAI-compatible adapter against the scripted server over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from actors.providers.openai_compat import OpenAICompatProvider, parse_retry_after
from actors.providers.types import ProviderError, StreamEnd, TextDelta, ToolCall
from tests import scripted_openai as so


@pytest.fixture
async def provider(model: so.ScriptedOpenAI) -> AsyncIterator[OpenAICompatProvider]:
    async with httpx.AsyncClient() as client:
        yield OpenAICompatProvider("scripted", model.base_url, "sk-test-key\n", client)


async def collect(provider: OpenAICompatProvider, **kw) -> list:
    return [d async for d in provider.stream("scripted-model", [{"role": "user", "content": "hi"}], **kw)]


async def test_streams_text_in_pieces(model: so.ScriptedOpenAI, provider: OpenAICompatProvider) -> None:
    model.enqueue(so.text("Hello there. How are you?"))
    out = await collect(provider)
    texts = [d.text for d in out if isinstance(d, TextDelta)]
    assert len(texts) > 1 and "".join(texts) == "Hello there. How are you?"
    assert isinstance(out[-1], StreamEnd) and out[-1].finish_reason == "stop"


async def test_key_with_trailing_newline_still_authenticates(model: so.ScriptedOpenAI,
                                                            provider: OpenAICompatProvider) -> None:
    await collect(provider)
    assert model.requests[-1]["headers"]["authorization"] == "Bearer sk-test-key"


async def test_structured_tool_calls_are_joined(model: so.ScriptedOpenAI, provider: OpenAICompatProvider) -> None:
    model.enqueue(so.tools(("calculate", {"expression": "6*7"}), ("current_time", {"timezone": "UTC"})))
    tools = [{"type": "function", "function": {"name": "calculate", "parameters": {}}}]
    out = await collect(provider, tools=tools)
    calls = [d for d in out if isinstance(d, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("calculate", {"expression": "6*7"}), ("current_time", {"timezone": "UTC"})]
    assert model.requests[-1]["body"]["tools"] == tools


@pytest.mark.parametrize("reply,kind,retry_after", [
    (so.status(429, retry_after="2"), "rate_limit", 2.0),
    (so.status(503), "server", None),
    (so.status(500), "server", None),
    (so.status(404), "not_found", None),
    (so.status(401), "auth", None),
    (so.status(400, body='{"error": {"message": "too many images in request"}}'), "too_many_images", None),
])
async def test_failures_are_classified(model: so.ScriptedOpenAI, provider: OpenAICompatProvider,
                                       reply: so.Reply, kind: str, retry_after: float | None) -> None:
    model.enqueue(reply)
    with pytest.raises(ProviderError) as info:
        await collect(provider)
    assert info.value.kind == kind and info.value.retry_after == retry_after
    assert "sk-test-key" not in str(info.value) and "Traceback" not in info.value.plain()


async def test_a_hang_becomes_a_timeout(model: so.ScriptedOpenAI, provider: OpenAICompatProvider) -> None:
    model.enqueue(so.hang(3))
    with pytest.raises(ProviderError) as info:
        await collect(provider, timeout=0.3)
    assert info.value.kind == "timeout"


async def test_lists_models(model: so.ScriptedOpenAI, provider: OpenAICompatProvider) -> None:
    model.models = ["a-pro", "b-flash"]
    assert await provider.list_models() == ["a-pro", "b-flash"]


def test_retry_after_forms() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert 0 <= parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") <= 0.0 + 1e-9
