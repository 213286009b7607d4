"""The camera stream's pure parts, without Ray: stream state (procedure steps, debouncing,
readings, OCR notices), the vision look with the router's rules over real HTTP to the scripted
server, knowledge excerpts, and frame checks at the socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from actors.camera.gate import BadFrame, check_frame
from actors.camera.knowledge import best_excerpts, passages
from actors.camera.look import fast_provider_free, look
from actors.camera.state import CameraState
from actors.providers.failover import LocalRouter
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.router_state import RouteEntry, RouterState
from tests import scripted_openai as so
from vision.dial import DialReading
from vision.perception import Perception
from vision.procedure import ProcedureCreate
from vision.vlm import Reading, VlmAnswer

PROCEDURE = ProcedureCreate.model_validate({
    "name": "Boiler", "goal": "Reach working pressure",
    "steps": [{"title": "Open valve", "acceptance_criteria": ["above 30 kPa"], "instrument": "gauge"},
              {"title": "Close cover"}],
    "instruments": [{"name": "gauge", "unit": "kPa", "min_value": 0, "max_value": 100}]})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def perception(**kw) -> Perception:
    return Perception(width=640, height=480, frame_index=kw.pop("frame_index", 1), **kw)


def dial(value: float) -> DialReading:
    return DialReading.model_validate({"value": value, "unit": "kPa", "confidence": 0.9, "angle": 0.0,
                                       "circle": {"cx": 320, "cy": 240, "r": 150}, "in_sweep": True})


def answer(value: float | None, complete: bool = False, status: str = "ok") -> VlmAnswer:
    reading = Reading(value=value, unit="kPa", confidence=0.9) if value is not None else None
    return VlmAnswer(say="reading", status=status, reading=reading, step_complete=complete)


def test_steps_advance_only_after_two_agreeing_verdicts() -> None:
    state = CameraState(clock=Clock())
    state.set_procedure(7, PROCEDURE)
    assert state.goal == "Reach working pressure" and state.instrument().unit == "kPa"
    state.observe(perception(dial=dial(40)))
    first = state.check(answer(41, complete=True), "done?")
    assert first.verdict == "agree" and not first.advance.advanced
    disputed = state.check(answer(90, complete=True), "done?")
    assert disputed.verdict == "disagree" and disputed.answer.status == "unsure" and not disputed.advance.advanced
    state.check(answer(40, complete=True), "done?")
    second = state.check(answer(40, complete=True), "done?")
    assert second.advance.advanced and state.state()["step"] == "Close cover"
    assert state.instrument() is None  # the second step reads no gauge
    assert [e.question for e in state.exchanges] == ["done?"] * 4
    assert list(state.readings)[0] == "gauge 40 kPa"


def test_the_context_carries_step_criteria_readings_and_capped_exchanges() -> None:
    state = CameraState(clock=Clock())
    state.set_procedure(1, PROCEDURE)
    state.observe(perception(dial=dial(35), ocr_ran=True,
                             ocr_lines=[{"text": "VALVE A", "confidence": 0.9, "box": {"x": 0, "y": 0, "w": 5, "h": 5}}]))
    for i in range(6):
        state.check(answer(None), f"question {i}")
    ctx = state.context(owner_profile="address: Sam", facts="Sam is a plumber", excerpts=["manual: open slowly"])
    assert ctx.step.startswith("1/2 Open valve") and ctx.acceptance_criteria == ["above 30 kPa"]
    assert ctx.ocr_text == "VALVE A" and ctx.readings == ["gauge 35 kPa"]
    assert [e.question for e in ctx.exchanges] == ["question 2", "question 3", "question 4", "question 5"]


def test_new_writing_fires_a_notice_once_stable_and_spaced() -> None:
    clock = Clock()
    state = CameraState(clock=clock)
    assert state.observe_text("what is this part called") is None
    clock.now += 2.1
    assert state.observe_text("what is this part called") == "what is this part called"
    clock.now += 3
    assert state.observe_text("how do I fit the new washer") is None
    clock.now += 2.1
    assert state.observe_text("how do I fit the new washer") is None  # within 15 s of the last
    clock.now += 15
    assert state.observe_text("how do I fit the new washer") == "how do I fit the new washer"


def test_excerpts_are_the_best_matching_passages_within_the_cap() -> None:
    manual = ("Safety first. " * 40) + "To bleed the radiator open the valve a quarter turn until water appears. " + (
        "Warranty terms apply. " * 40)
    docs = [("radiator.txt", manual), ("recipes.txt", "Bake the bread at 220 degrees for forty minutes.")]
    found = best_excerpts(docs, "how far do I open the bleed valve on the radiator?")
    assert found and found[0].startswith("radiator.txt: ") and "quarter turn" in found[0]
    assert all(len(e) <= 380 for e in found) and len(found) <= 3
    assert best_excerpts(docs, "zzz qqq") == []
    assert all(len(p) <= 380 for p in passages("word " * 1000))


def test_frames_are_checked_at_the_socket_at_and_over_the_limit() -> None:
    jpeg = b"\xff\xd8\xff" + b"\0" * 97
    assert check_frame(jpeg, 100) is None
    over = check_frame(jpeg + b"\0", 100)
    assert isinstance(over, BadFrame) and over.code == "frame_too_large"
    assert check_frame(b"\x89PNG\r\n" + b"\0" * 10, 100).code == "not_jpeg"


# ---- the look, through the router's rules over real HTTP --------------------------------

@pytest.fixture
async def router(model: so.ScriptedOpenAI) -> AsyncIterator[tuple[LocalRouter, dict, Clock]]:
    clock = Clock()
    state = RouterState([RouteEntry(provider="fast", model="v1", base_url=model.base_url, max_images=4),
                         RouteEntry(provider="slow", model="v2", base_url=model.base_url)], clock=clock)
    async with httpx.AsyncClient() as client:
        providers = {name: OpenAICompatProvider(name, model.base_url, "k", client) for name in ("fast", "slow")}
        yield LocalRouter(state), providers, clock


MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                          {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AA=="}}]}]


def offline() -> VlmAnswer:
    return VlmAnswer(say="No vision model answered.", status="unsure")


async def test_a_look_parses_the_answer_and_measures_the_provider(model, router) -> None:
    local, providers, _ = router
    model.enqueue(so.text('Sure: {"say": "A valve", "status": "OK", "reading": {"value": "40 kPa", "confidence": 85}}'),
                  model="v1")
    result = await look(local, providers, MESSAGES, timeout=2, person_waiting=True, fallback=offline)
    assert result.source == "model" and result.answer.say == "A valve" and result.answer.status == "ok"
    assert result.answer.reading == Reading(value=40, unit="kPa", confidence=0.85)
    assert local.state.entries[0].ema is not None


async def test_overload_rate_limits_and_retirement_fall_through_to_the_next_or_offline(model, router) -> None:
    local, providers, clock = router
    model.enqueue(so.status(503), model="v1")
    model.enqueue(so.text(json.dumps({"say": "from slow", "status": "ok"})), model="v2")
    assert (await look(local, providers, MESSAGES, timeout=2, person_waiting=False, fallback=offline)).answer.say == "from slow"
    assert [e.key for e in local.state.candidates(1)] == ["slow/v2"]  # fast rests 15 s
    model.model_status["v2"] = 404
    result = await look(local, providers, MESSAGES, timeout=2, person_waiting=False, fallback=offline)
    assert result.source == "offline" and result.answer.say == "No vision model answered."
    assert local.state.entries[1].retired


async def test_a_person_waits_for_a_provider_that_frees_up_within_35_seconds(model, router) -> None:
    local, providers, clock = router
    model.enqueue(so.status(503), model="v1")
    model.model_status["v2"] = 404
    model.enqueue(so.text(json.dumps({"say": "after the wait", "status": "ok"})), model="v1")
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    result = await look(local, providers, MESSAGES, timeout=2, person_waiting=True, fallback=offline, sleep=fake_sleep)
    assert result.answer.say == "after the wait" and slept == [15.0]
    # Without a person waiting, a resting provider means the fallback at once.
    model.enqueue(so.status(503), model="v1")
    assert (await look(local, providers, MESSAGES, timeout=2, person_waiting=False, fallback=offline)).source == "offline"


async def test_a_hang_rests_the_provider_and_too_many_images_lowers_its_limit(model, router) -> None:
    local, providers, _ = router
    model.enqueue(so.hang(3), model="v1")
    model.enqueue(so.text(json.dumps({"say": "slow but fine", "status": "ok"})), model="v2")
    result = await look(local, providers, MESSAGES, timeout=0.5, person_waiting=False, fallback=offline)
    assert result.answer.say == "slow but fine"
    fast = local.state.entries[0]
    assert fast.ema == 30.0 and fast.rest_until > 0
    assert not await fast_provider_free(local) or local.state.candidates(1)[0].key == "slow/v2"
    assert await fast_provider_free(None) is False
