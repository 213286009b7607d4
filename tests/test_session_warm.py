"""The per-process encoder lookup a spare session warms: looked up once, a failure not kept."""

from __future__ import annotations

import pytest

from actors.session import warm


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


async def test_warming_without_an_agent_still_reads_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []

    async def person(store: object, conversation: str) -> tuple[int, None]:
        read.append("person")
        return 1, None

    async def items(store: object) -> tuple[list[object], None]:
        read.append("items")
        return [], None

    async def no_encoder() -> None:
        return None

    monkeypatch.setattr(warm, "conversation_person", person)
    monkeypatch.setattr(warm, "active_items", items)
    monkeypatch.setattr(warm, "remote_encoder", no_encoder)
    spent = await warm.warm_process(object(), None)
    assert set(spent) == {"encoder", "store"} and sorted(read) == ["items", "person"]
