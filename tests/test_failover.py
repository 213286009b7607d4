"""Failover across providers with the router's rules, over real HTTP to the scripted server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from actors.providers.failover import LocalRouter, stream_with_failover
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.router_state import RouteEntry, RouterState
from actors.providers.types import AllProvidersFailed, ProviderError, TextDelta
from tests import scripted_openai as so


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def setup(model: so.ScriptedOpenAI) -> AsyncIterator[tuple[LocalRouter, dict, Clock, list[float]]]:
    clock = Clock()
    state = RouterState([RouteEntry(provider="p1", model="m1", base_url=model.base_url),
                         RouteEntry(provider="p2", model="m2", base_url=model.base_url)], clock=clock)
    slept: list[float] = []
    async with httpx.AsyncClient() as client:
        providers = {name: OpenAICompatProvider(name, model.base_url, "k", client) for name in ("p1", "p2")}
        yield LocalRouter(state), providers, clock, slept


async def run(setup, sleep_log: list[float] | None = None, waiting: bool = True) -> str:
    router, providers, clock, slept = setup

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    out = [d async for d in stream_with_failover(router, providers, [{"role": "user", "content": "q"}],
                                                 None, timeout=0.5, person_waiting=waiting, sleep=fake_sleep)]
    return "".join(d.text for d in out if isinstance(d, TextDelta))


def served_models(model: so.ScriptedOpenAI) -> list[str]:
    return [r["body"]["model"] for r in model.requests]


async def test_overload_moves_to_the_next_provider_and_rests_the_first(model, setup) -> None:
    model.enqueue(so.status(503), model="m1")
    model.enqueue(so.text("from two."), model="m2")
    assert await run(setup) == "from two."
    router, _, clock, _ = setup
    assert [e.key for e in router.state.candidates()] == ["p2/m2"]  # p1 rests 15 s
    clock.now += 15
    assert {e.key for e in router.state.candidates()} == {"p1/m1", "p2/m2"}


async def test_short_retry_after_waits_and_retries_the_same_provider(model, setup) -> None:
    model.enqueue(so.status(429, retry_after="2"), so.text("after waiting."), model="m1")
    assert await run(setup) == "after waiting."
    assert setup[3] == [2.0] and served_models(model) == ["m1", "m1"]


async def test_long_retry_after_rests_the_provider(model, setup) -> None:
    model.enqueue(so.status(429, retry_after="90"), model="m1")
    model.enqueue(so.text("two."), model="m2")
    assert await run(setup) == "two."
    assert [e.key for e in setup[0].state.candidates()] == ["p2/m2"]
    setup[2].now += 91
    assert "p1/m1" in [e.key for e in setup[0].state.candidates()]


async def test_retired_model_is_never_tried_again(model, setup) -> None:
    model.model_status["m1"] = 404
    model.enqueue(so.text("a."), so.text("b."), model="m2")
    await run(setup)
    setup[2].now += 10_000
    await run(setup)
    assert served_models(model) == ["m1", "m2", "m2"]


async def test_a_hang_times_out_and_benches_the_provider(model, setup) -> None:
    model.enqueue(so.hang(2), model="m1")
    model.enqueue(so.text("fast."), model="m2")
    assert await run(setup) == "fast."
    entry = next(e for e in setup[0].state.entries if e.key == "p1/m1")
    assert entry.ema == 30.0
    assert [e.key for e in setup[0].state.candidates()] == ["p2/m2"]


async def test_measured_latency_reorders_providers(model, setup) -> None:
    router = setup[0]
    router.state.record_success("p1/m1", 2.0)
    router.state.record_success("p2/m2", 0.1)
    model.enqueue(so.text("quick."), model="m2")
    assert await run(setup) == "quick."
    assert served_models(model) == ["m2"]


async def test_waiting_person_waits_for_a_provider_to_free_up(model, setup) -> None:
    model.enqueue(so.status(503), so.text("back."), model="m1")
    model.model_status["m2"] = 404
    assert await run(setup) == "back."
    assert setup[3] == [15.0]  # waited out the 15 s rest, then retried


async def test_everything_failing_raises_with_a_plain_reason(model, setup) -> None:
    model.enqueue(so.status(503), model="m1")
    model.enqueue(so.status(503), model="m2")
    with pytest.raises(AllProvidersFailed) as info:
        await run(setup, waiting=False)
    assert "overloaded" in str(info.value)


async def test_failure_after_output_is_not_retried_elsewhere(model, setup) -> None:
    model.enqueue(so.Reply(text="Half an ans", fail_after_text=True), model="m1")
    with pytest.raises(ProviderError):
        await run(setup)
    assert served_models(model) == ["m1"]


async def test_messages_with_images_skip_providers_that_take_too_few(model, setup) -> None:
    router, providers, _, _ = setup
    router.state.record_too_many_images("p1/m1", 1)  # learned: p1 takes none
    model.enqueue(so.text("I see a cat."), model="m2")
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]}]
    out = [d async for d in stream_with_failover(router, providers, messages, None, timeout=2)]
    assert "".join(d.text for d in out if isinstance(d, TextDelta)) == "I see a cat."
    assert served_models(model) == ["m2"]
    assert model.requests[0]["body"]["messages"][0]["content"][1]["type"] == "image_url"
