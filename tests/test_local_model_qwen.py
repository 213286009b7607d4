"""The default local model (Qwen2.5-Coder-1.5B) through the real `iriis serve` with no key: a
plain answer, arithmetic through the calculator, and a memory stored when asked. Few, short
prompts: on 2 cores it reads prompts at ~70 tokens/s."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server_proc import ServerProcess
from tests.sse import chat
from tests.test_local_model_e2e import KEY, MODELS, bare_env, local_row
from tests.waiting import until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    # IRIIS_LOCAL_MODEL unset: the default model, as on a fresh machine.
    server = ServerProcess(tmp_path_factory.mktemp("qwen") / "home", bare_env(IRIIS_MODELS_DIR=str(MODELS))).start()
    client = httpx.Client(base_url=server.url, timeout=300, headers={"Authorization": f"Bearer {KEY}"})
    try:
        until(lambda: local_row(client)["state"] == "ready", timeout=300, every=1.0,
              describe=lambda: str(local_row(client)))
        assert local_row(client)["key"] == "local/qwen2.5-coder-1.5b"
        yield client
    finally:
        client.close()
        server.kill()


def test_a_plain_question(qwen: httpx.Client) -> None:
    events = chat(qwen, KEY, "What is the capital of France?", timeout=300)
    assert events[-1][0] == "done" and "Paris" in events[-1][1]["text"]
    assert not [d for e, d in events if e == "tool"], [d for e, d in events if e == "tool"]


def test_arithmetic_goes_through_the_calculator(qwen: httpx.Client) -> None:
    events = chat(qwen, KEY, "what is 12*7?", timeout=300)
    assert ("calculate", "done") in [(d["name"], d["status"]) for e, d in events if e == "tool"], events
    assert "84" in events[-1][1]["text"]


def test_remember_stores_a_memory_item(qwen: httpx.Client) -> None:
    events = chat(qwen, KEY, "remember that my sister is called Ana", timeout=300)
    assert ("remember", "done") in [(d["name"], d["status"]) for e, d in events if e == "tool"], events
    items = qwen.get("/v1/memory").json()["data"]
    assert any("Ana" in item["text"] for item in items), items
