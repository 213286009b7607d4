"""`kill -9` of a RelayActor while a reader's long-poll is parked on it, through the real
`iriis relay serve`: the reader's /wait does not fail (it parks again on the restarted actor),
the next write succeeds at the first try and wakes it, and the log has every message once, in
order, with no seq skipped or reused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from actors.relay.pairing import decode
from tests.fault_probe import Probe
from tests.relay_proc import LongPoll, relay_serve
from tests.server_proc import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("relay-fault")
    proc, port = relay_serve(home, home / "data", {"IRIIS_RELAY_TLS_ADDR": f"127.0.0.1:{free_port()}"})
    try:
        token = decode(proc.wait_lines(1, 180)[0])
        probe = Probe(proc)
        try:
            yield {"url": f"http://127.0.0.1:{port}/s/{token.uid}", "uid": token.uid,
                   "auth": {"Authorization": f"Bearer {token.key}"}, "probe": probe}
        finally:
            probe.close()
    finally:
        proc.stop()


def post(relay: dict[str, Any], name: str, content: str) -> dict[str, Any]:
    answer = httpx.post(relay["url"], headers=relay["auth"], timeout=30,
                        json={"message": {"role": "user", "name": name, "content": content}})
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_a_relay_actor_killed_mid_long_poll_loses_and_repeats_nothing(relay: dict[str, Any]) -> None:
    probe: Probe = relay["probe"]
    name = f"relay:{relay['uid']}"
    head = post(relay, "writer", "before the kill")["seq"]

    reader = LongPoll(relay["url"], relay["auth"], head, wait=50, http_timeout=90)
    until(lambda: probe.call(name, "waiting") == 1, timeout=30)
    before = probe.kill(name)
    probe.restarted(name, before)
    # The reader's poll parked again on the restarted actor (loaded from the store).
    until(lambda: probe.call(name, "waiting") == 1, timeout=30)

    after = post(relay, "writer", "after the kill")
    assert after["seq"] == head + 1
    assert reader.join(60) and reader.status == 200, (reader.status, reader.body)
    assert [m["seq"] for m in reader.body["messages"]] == [head + 1]
    assert reader.body["messages"][0]["message"]["content"] == "after the kill"

    log = httpx.get(relay["url"], params={"since": 0}, headers=relay["auth"], timeout=30).json()
    contents = [m["message"]["content"] for m in log["messages"] if m.get("message", {}).get("name") == "writer"]
    assert contents == ["before the kill", "after the kill"]
    seqs = [m["seq"] for m in log["messages"]]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) and log["last_seq"] == head + 1
