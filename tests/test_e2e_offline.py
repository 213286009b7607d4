"""A fresh `iriis serve` with no configuration at all: SQLite, the offline default, the owner key
printed once, shutdown by SIGTERM or SIGINT losing nothing that was accepted, and a local model
that cannot load leaving the stand-in answering and saying why."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from actors.providers.local.catalog import CATALOG
from tests.server_proc import ServerProcess
from tests.sse import chat
from tests.test_local_model_e2e import local_row
from tests.waiting import until

IDLE_LOOK_EVERY = 3.0

pytestmark = pytest.mark.e2e


def bare_env() -> dict[str, str]:
    """The user's environment minus anything Iriis reads, as on a fresh machine."""
    drop = [k for k in os.environ if k.startswith(("IRIIS_", "OPENAI_")) or k in ("DATABASE_URL", "RAY_ADDRESS")]
    return {k: "" for k in drop}


# Two server starts and stops in a row (each a Ray start, up to a minute or two on a busy 2-core
# machine): more than the default hang guard allows for, not a speed goal.
@pytest.mark.timeout(600)
def test_fresh_install_answers_offline_and_survives_restarts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # Flushes only happen at shutdown in this test: the timer is far away.
    # The stand-in's own test: the local model (tests/test_local_model_e2e.py) stays off here.
    env = {**bare_env(), "IRIIS_FLUSH_SECONDS": "3600", "IRIIS_LOCAL_MODEL": "off"}
    first = ServerProcess(home, env).start()
    try:
        key = first.printed_key()
        assert key and key.startswith("iriis_")
        assert "offline default" in first.output()
        assert (home / "iriis.sqlite3").exists()
        with httpx.Client(base_url=first.url, timeout=60) as client:
            page = client.get("/")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assert client.get("/static/app.js").status_code == 200
            events = chat(client, key, "What is 15% of 80?")
            sid = events[0][1]["session_id"]
            assert [e for e, _ in events][-1] == "done"
            assert "12" in events[-1][1]["text"]
            poem = chat(client, key, "Write a poem about rain", session_id=sid)
            assert "No language model is configured" in poem[-1][1]["text"]
    finally:
        code = first.stop(signal.SIGTERM)
    assert code == 0
    # The 4 messages were written before each `done`: at most the conversation's batched
    # `updated` stamp is left for the shutdown flush (the restart below reads the messages back).
    assert re.search(r"flushed [01] buffered writes", first.output()), first.output()[-2000:]
    assert key not in first.output().replace(f"    {key}", "").replace(f"#key={key}", "")

    # The restart: idle conversations give their actor back after 2 s this time, and the local
    # model is on, with a damaged download of the default model: the stand-in says why.
    models = tmp_path / "models"
    models.mkdir()
    (models / CATALOG["qwen2.5-coder-1.5b"].filename).write_bytes(b"GGUF" + b"\0" * 4096)
    second = ServerProcess(home, {**env, "IRIIS_SESSION_IDLE_SECONDS": "2", "IRIIS_LOCAL_MODEL": "",
                                  "IRIIS_MODELS_DIR": str(models)}).start()
    auth = {"Authorization": f"Bearer {key}"}
    try:
        assert second.printed_key() is None  # printed once, on first run only
        with httpx.Client(base_url=second.url, timeout=60, headers=auth) as client:
            msgs = client.get(f"/v1/sessions/{sid}/messages")
            assert msgs.status_code == 200
            assert [m["role"] for m in msgs.json()["data"]] == ["user", "assistant", "user", "assistant"]
            row = until(lambda: (r := local_row(client))["state"] == "failed" and r, timeout=120, every=0.5,
                        describe=lambda: str(local_row(client)))
            assert row["key"] == "local/qwen2.5-coder-1.5b"
            assert "refusing a corrupt model file" in row["status"] and row["status"].startswith("local model: failed")
            poem = chat(client, key, "Write a poem about rain", session_id=sid)[-1][1]["text"]
            assert "offline stand-in" in poem and "refusing a corrupt model file" in poem
            before = client.get(f"/v1/sessions/{sid}/state").json()
            chat(client, key, "what is 2+2?", session_id=sid)

            def rebuilt() -> bool:
                # Reading the state is activity too: look less often than idle (2 s) plus the
                # 0.5 s check period, or the actor would never be idle long enough to exit.
                time.sleep(IDLE_LOOK_EVERY)
                state = client.get(f"/v1/sessions/{sid}/state").json()
                return state["actor_started"] > before["actor_started"]

            assert until(rebuilt, timeout=60)  # exited while idle, rebuilt on the next read
            msgs = client.get(f"/v1/sessions/{sid}/messages").json()["data"]
            assert len(msgs) == 8 and msgs[-1]["content"].startswith("2+2 = 4")  # the stand-in's sums
    finally:
        assert second.stop(signal.SIGINT) == 0
