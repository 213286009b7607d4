"""The per-process encoder lookup a spare session warms: looked up once, a failure not kept."""

from __future__ import annotations

import pytest

from actors.memory import live
from actors.session import warm
from actors.store.store import Store


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(warm, "_encoder", None)
    monkeypatch.setattr(warm, "_encoder_lock", None)


async def test_the_encoder_is_looked_up_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    async def lookup() -> str:
        calls.append(1)
        return "encoder"

    monkeypatch.setattr(warm, "remote_encoder", lookup)
    assert await warm.shared_encoder() == "encoder"
    assert await warm.shared_encoder() == "encoder"
    assert len(calls) == 1


async def test_no_encoder_is_remembered_but_a_failed_lookup_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[object] = [RuntimeError("embedder starting"), None]

    async def lookup() -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(warm, "remote_encoder", lookup)
    assert await warm.shared_encoder() is None  # the failure: lexical for this turn
    assert await warm.shared_encoder() is None  # looked up again: there is no encoder
    assert answers == []
    assert await warm.shared_encoder() is None  # and that answer is kept (no third lookup)


async def test_warming_without_an_agent_still_reads_the_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_encoder() -> None:
        return None

    monkeypatch.setattr(warm, "remote_encoder", no_encoder)
    live.reset()
    spent = await warm.warm_process(store, None)
    assert set(spent) == {"encoder", "store"}
    # The memory pool a first turn would have loaded is loaded now.
    assert live._pools[store.engine].index is not None
