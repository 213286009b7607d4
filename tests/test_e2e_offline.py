"""A fresh `iriis serve` with no configuration at all: SQLite, the offline default, the owner key
printed once, and shutdown by SIGTERM or SIGINT losing nothing that was accepted."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.server_proc import ServerProcess
from tests.sse import chat
from tests.waiting import until

IDLE_LOOK_EVERY = 3.0

pytestmark = pytest.mark.e2e


def bare_env() -> dict[str, str]:
    """The user's environment minus anything Iriis reads, as on a fresh machine."""
    drop = [k for k in os.environ if k.startswith(("IRIIS_", "OPENAI_")) or k in ("DATABASE_URL", "RAY_ADDRESS")]
    return {k: "" for k in drop}


# Three server starts and stops in a row (each a Ray start, up to a minute on a busy 2-core
# machine): the default 300 s hang guard is too tight for that, not a speed goal.
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

    second = ServerProcess(home, env).start()
    try:
        assert second.printed_key() is None  # printed once, on first run only
        with httpx.Client(base_url=second.url, timeout=60) as client:
            msgs = client.get(f"/v1/sessions/{sid}/messages", headers={"Authorization": f"Bearer {key}"})
            assert msgs.status_code == 200
            assert [m["role"] for m in msgs.json()["data"]] == ["user", "assistant", "user", "assistant"]
            chat(client, key, "what time is it?", session_id=sid)
    finally:
        assert second.stop(signal.SIGINT) == 0

    # This time idle conversations give their actor back after 2 s.
    third = ServerProcess(home, {**env, "IRIIS_SESSION_IDLE_SECONDS": "2"}).start()
    auth = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(base_url=third.url, timeout=60) as client:
            msgs = client.get(f"/v1/sessions/{sid}/messages", headers=auth)
            assert len(msgs.json()["data"]) == 6
            before = client.get(f"/v1/sessions/{sid}/state", headers=auth).json()
            chat(client, key, "what is 2+2?", session_id=sid)

            def rebuilt() -> bool:
                # Reading the state is activity too: look less often than idle (2 s) plus the
                # 0.5 s check period, or the actor would never be idle long enough to exit.
                time.sleep(IDLE_LOOK_EVERY)
                state = client.get(f"/v1/sessions/{sid}/state", headers=auth).json()
                return state["actor_started"] > before["actor_started"]

            assert until(rebuilt, timeout=60)  # exited while idle, rebuilt on the next read
            msgs = client.get(f"/v1/sessions/{sid}/messages", headers=auth).json()["data"]
            assert len(msgs) == 8 and msgs[-1]["content"].startswith("2+2 = 4")
    finally:
        third.stop()
