"""The relay's pure rules, without Ray or a network: envelopes, rate, caps, lifecycle, waiters,
the pairing token."""

from __future__ import annotations

import asyncio
import json

import pytest

from actors.relay import lifecycle
from actors.relay.core import SessionCore
from actors.relay.envelope import is_urgent, validate_post
from actors.relay.errors import RelayError
from actors.relay.lifecycle import SessionState
from actors.relay.limits import MinuteWindow, RelayLimits, hourly_retry
from actors.relay.pairing import Blob, PairingToken, TokenError, decode, new_key, new_uid
from actors.relay.waiters import Gone, WaiterHub

T0 = 1_800_000_000.0


def body(**message: object) -> bytes:
    base = {"role": "assistant", "name": "otter", "content": "hi"}
    return json.dumps({"message": {**base, **message}}).encode()


def code(exc: pytest.ExceptionInfo[RelayError]) -> str:
    return exc.value.code


def state(**limits: int) -> SessionState:
    return SessionState(uid="0123456789abcdef", key_hash="x", created=T0, last_write=T0,
                        limits=RelayLimits(**limits))


# -- envelope ---------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    b"not json", b"[]", b'{"metadata": {}}', body(role="system"), body(role="tool"),
    body(name=""), body(name="a" * 65), body(name="sp ace"), body(content=""), body(content=[]),
    body(content=[{"text": "no type"}]), body(content=[{"type": "text", "text": 3}]),
    body(content=[{"type": "file", "file": {"seq": 1}}]), body(content=7),
    json.dumps({"message": {"role": "user", "name": "a", "content": "x"}, "metadata": [1]}).encode(),
    json.dumps({"message": {"role": "user", "name": "a", "content": "x"}, "metadata": {"urgent": "yes"}}).encode(),
])
def test_invalid_posts_are_invalid_request(raw: bytes) -> None:
    with pytest.raises(RelayError) as exc:
        validate_post(raw)
    assert code(exc) == "invalid_request" and exc.value.status == 400


def test_valid_post_passes_unknown_parts_and_metadata_through() -> None:
    parts = [{"type": "text", "text": "x"}, {"type": "file", "file": {"name": "a", "seq": 2}},
             {"type": "hologram", "beam": [1, 2]}]
    raw = json.dumps({"message": {"role": "user", "name": "a" * 64, "content": parts},
                      "metadata": {"urgent": True, "attn": "human", "reply_to": 9, "mine": {"k": 1}}}).encode()
    message, metadata = validate_post(raw)
    assert message["content"][2] == {"type": "hologram", "beam": [1, 2]}
    assert metadata["mine"] == {"k": 1} and metadata["reply_to"] == 9
    assert validate_post(body())[1] == {}


# -- rate -------------------------------------------------------------------------------------

def test_minute_window_allows_exactly_per_minute_then_says_when() -> None:
    window = MinuteWindow(60)
    assert all(window.take(T0 + i * 0.1) is None for i in range(60))
    retry = window.take(T0 + 6.0)
    assert retry == 54
    assert window.take(T0 + 59.9) is not None
    assert window.take(T0 + 60.0) is None  # the first write of the burst left the window


def test_sessions_an_hour_counted_from_earlier_creations() -> None:
    assert hourly_retry([], T0, 2) is None
    assert hourly_retry([T0], T0 + 1, 2) is None
    assert hourly_retry([T0, T0 + 1], T0 + 2, 2) == 3598
    assert hourly_retry([T0, T0 + 1], T0 + 3600, 2) is None  # the first left the hour
    # Over the cap (a lowered cap after a restart): the slot frees when enough have left.
    assert hourly_retry([T0, T0 + 10, T0 + 20], T0 + 30, 2) == 3580
    assert hourly_retry([T0 - 3600, T0], T0 + 1, 1) == 3599
    assert all(hourly_retry([T0] * 100, T0, 0) is None for _ in range(3))


def test_a_seeded_window_resumes_the_minute() -> None:
    window = MinuteWindow(3)
    window.seed([T0 + 20, T0, T0 + 10, T0 - 5])  # more than fit: only the newest three count
    assert window.take(T0 + 30) == 30
    assert window.take(T0 + 60) is None
    fresh = MinuteWindow(3)
    fresh.seed([])
    assert all(fresh.take(T0) is None for _ in range(3))


def test_only_client_messages_and_uploads_drew_from_the_rate() -> None:
    from actors.relay.envelope import drew_from_rate, epoch_of, iso_utc, stamp, system_message

    assert epoch_of(iso_utc(T0 + 0.7)) == T0
    assert drew_from_rate(stamp(1, T0, {"role": "user", "name": "a", "content": "x"}, {}))
    assert drew_from_rate(stamp(2, T0, *system_message("File a uploaded.", "file_uploaded")))
    assert not drew_from_rate(stamp(3, T0, *system_message("Nearly full.", "limit_warning")))


# -- caps and system messages -----------------------------------------------------------------

def post(core: SessionCore, now: float, text: str = "hi") -> list[dict]:
    plan = core.plan_post({"role": "user", "name": "a", "content": text}, {}, now)
    core.commit(plan)
    return plan.envelopes


def test_seq_is_contiguous_and_writes_count_as_activity() -> None:
    core = SessionCore(state())
    seqs = [post(core, T0 + i)[0]["seq"] for i in range(1, 4)]
    assert seqs == [1, 2, 3] and core.state.last_write == T0 + 3


def test_message_cap_warns_once_at_90_percent_and_refuses_at_the_cap() -> None:
    core = SessionCore(state(max_messages=10, messages_per_minute=1000))
    seen: list[dict] = []
    for i in range(8):
        seen += post(core, T0 + i)
    assert not [e for e in seen if e["metadata"].get("event") == "limit_warning"]
    ninth = post(core, T0 + 9)  # 9 of 10 is 90%: the warning rides along, as message 10
    assert [e["metadata"] for e in ninth[1:]] == [
        {"event": "limit_warning", "limit": "messages", "used": 9, "max": 10}]
    assert ninth[1]["message"]["role"] == "system" and ninth[1]["message"]["name"] == "iris"
    with pytest.raises(RelayError) as exc:
        post(core, T0 + 10)
    assert code(exc) == "limit_exceeded" and exc.value.status == 409
    # System messages count but are never refused: terminate still appends.
    plan = core.plan_terminate(T0 + 11)
    core.commit(plan)
    assert plan.envelopes[0]["seq"] == 11 and core.state.message_count == 11


def test_storage_cap_counts_files_and_overwrites_replace() -> None:
    core = SessionCore(state(max_storage_bytes=9000, max_file_bytes=8000, messages_per_minute=1000))
    plan = core.plan_file("a.bin", 5000, "application/octet-stream", None, T0)
    core.commit(plan)
    assert plan.file is not None and plan.file.seq == 1
    assert not any(e["metadata"].get("limit") == "storage" for e in plan.envelopes)
    plan = core.plan_file("a.bin", 8000, "text/plain", 5000, T0 + 1)  # same name: 5000 freed first
    core.commit(plan)
    assert plan.envelopes[-1]["metadata"]["event"] == "limit_warning"
    assert plan.envelopes[-1]["metadata"]["limit"] == "storage"
    with pytest.raises(RelayError) as exc:
        core.plan_file("b.bin", 2000, "text/plain", None, T0 + 2)
    assert code(exc) == "limit_exceeded"
    with pytest.raises(RelayError) as exc:
        core.plan_file("c.bin", 8001, "text/plain", None, T0 + 2)
    assert code(exc) == "payload_too_large"
    with pytest.raises(RelayError) as exc:
        core.plan_file("../x", 1, "text/plain", None, T0 + 2)
    assert code(exc) == "invalid_request"


def test_rate_limit_shared_by_posts_and_uploads() -> None:
    core = SessionCore(state(messages_per_minute=3))
    post(core, T0)
    core.commit(core.plan_file("f", 1, "text/plain", None, T0 + 1))
    post(core, T0 + 2)
    with pytest.raises(RelayError) as exc:
        post(core, T0 + 3)
    assert code(exc) == "rate_limited" and exc.value.status == 429 and exc.value.retry_after == 57
    with pytest.raises(RelayError):
        core.plan_file("g", 1, "text/plain", None, T0 + 3)
    assert post(core, T0 + 60)[0]["seq"] == 4


def test_a_refused_write_does_not_change_the_session() -> None:
    core = SessionCore(state(max_messages=1))
    post(core, T0)
    before = core.state.model_copy(deep=True)
    with pytest.raises(RelayError):
        post(core, T0 + 1)
    assert core.state == before


# -- lifecycle --------------------------------------------------------------------------------

def test_lifecycle_active_read_only_purged_and_reads_never_count() -> None:
    s = state()
    assert lifecycle.phase(s, T0 + 86399) == "active"
    assert lifecycle.phase(s, T0 + 86400) == "read_only"
    assert lifecycle.phase(s, T0 + 2 * 86400 - 1) == "read_only"
    assert lifecycle.phase(s, T0 + 2 * 86400) == "purged"
    core = SessionCore(s)
    core.require_readable(T0 + 86400 + 5)
    with pytest.raises(RelayError) as exc:
        post(core, T0 + 86400)
    assert code(exc) == "session_read_only"
    with pytest.raises(RelayError) as exc:
        core.require_readable(T0 + 2 * 86400)
    assert code(exc) == "gone" and exc.value.status == 410


def test_expiring_is_due_ten_minutes_before_once_per_quiet_spell() -> None:
    core = SessionCore(state())
    assert core.plan_expiring(T0 + 86400 - 601) is None
    plan = core.plan_expiring(T0 + 86400 - 600)
    assert plan is not None and plan.envelopes[0]["metadata"] == {"event": "session_expiring"}
    core.commit(plan)
    assert core.plan_expiring(T0 + 86400 - 300) is None
    post(core, T0 + 86400 - 200)  # any write resets the clock and re-arms the warning
    assert lifecycle.phase(core.state, T0 + 86400 + 100) == "active"
    assert core.plan_expiring(T0 + 2 * 86400 - 200 - 600) is not None


def test_terminate_goes_read_only_at_once_and_is_idempotent() -> None:
    core = SessionCore(state())
    plan = core.plan_terminate(T0 + 100)
    core.commit(plan)
    assert [e["metadata"]["event"] for e in plan.envelopes] == ["session_terminated"]
    reply = core.terminate_reply()
    assert reply.status == "read-only" and reply.model_dump() == {"status": "read-only", "purge_at": reply.purge_at}
    again = core.plan_terminate(T0 + 200)
    core.commit(again)
    assert again.envelopes == [] and core.terminate_reply() == reply
    assert lifecycle.purge_at(core.state) == T0 + 100 + 86400
    assert core.plan_expiring(T0 + 86400 - 100) is None


# -- waiters ----------------------------------------------------------------------------------

def env(seq: int, urgent: bool = False) -> dict:
    return {"seq": seq, "metadata": {"urgent": True} if urgent else {}}


async def test_waiter_wakes_on_append_and_filters_urgent() -> None:
    hub = WaiterHub()
    plain = asyncio.create_task(hub.wait(3, lambda e: True, 5))
    urgent = asyncio.create_task(hub.wait(3, is_urgent, 5))
    await asyncio.sleep(0)
    assert len(hub) == 2
    assert hub.notify([env(4)]) == 1
    assert await asyncio.wait_for(plain, 5) == [env(4)]
    assert not urgent.done()
    hub.notify([env(5, urgent=True)])
    assert await asyncio.wait_for(urgent, 5) == [env(5, urgent=True)]
    assert len(hub) == 0


async def test_waiter_times_out_with_none_and_purge_fails_waiters() -> None:
    hub = WaiterHub()
    assert await hub.wait(0, lambda e: True, 0.01) is None
    parked = asyncio.create_task(hub.wait(0, lambda e: True, 5))
    await asyncio.sleep(0)
    hub.fail_all()
    with pytest.raises(Gone):
        await asyncio.wait_for(parked, 5)


# -- pairing token ----------------------------------------------------------------------------

def test_token_round_trip_and_malformed_tokens() -> None:
    token = PairingToken(blob=Blob(addrs=["10.0.0.1:7434"], fp="ab" * 32, local=7433), uid=new_uid(), key=new_key())
    text = token.encode()
    assert text.count(".") == 2
    assert decode(text) == token
    for bad in ("", "a.b", text + ".x", text.replace(token.uid, "XYZ"),
                "e30." + token.uid + "." + token.key,
                text.split(".")[0][:-4] + "." + token.uid + "." + token.key):
        with pytest.raises(TokenError):
            decode(bad)
