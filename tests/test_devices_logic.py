"""Pure device logic, no Ray: limits' defaults, hello rules, events, rates, calls, grants."""

from __future__ import annotations


import pytest

from actors.devices.calls import CallTable
from actors.devices.grants import offered_servers, switch_allowed
from actors.devices.protocol import EventRate, ProtocolError, result_text, sanitize_event, validate_hello
from actors.devices.settings import DeviceLimits, DeviceSettings
from actors.devices.tokens import code_hash, new_code, new_device_token, normalize_code
from actors.common.untrusted import wrap_device_output, wrap_untrusted


def test_the_defaults_are_the_specs_numbers(monkeypatch) -> None:
    for name in ("CALL", "HELLO", "EVENT", "SILENCE", "PING", "PAIR_WINDOW"):
        monkeypatch.delenv(f"IRIIS_DEVICE_{name}_SECONDS", raising=False)
    limits = DeviceSettings().limits()
    assert (limits.max_frame_bytes, limits.hello_seconds, limits.call_seconds, limits.calls_in_flight,
            limits.max_tools, limits.max_parameters_bytes, limits.event_seconds, limits.silence_seconds,
            limits.ping_seconds, limits.code_seconds, limits.pair_failures, limits.pair_window_seconds,
            limits.events_per_person, limits.title_chars, limits.text_chars) == (
        1_048_576, 15, 25, 4, 40, 8192, 30, 90, 30, 600, 5, 900, 200, 120, 1000)
    assert limits.event_keep_seconds == 7 * 24 * 3600


def test_skill_defaults_to_the_name_up_to_the_first_underscore_and_tier_to_2() -> None:
    hello = validate_hello({"type": "hello", "kind": "mac", "tools": [
        {"name": "files_find", "description": "d", "parameters": {"type": "object"}},
        {"name": "calls_missed", "description": "d", "parameters": {"type": "object"}, "skill": "phone", "tier": 0}]},
        "mac", DeviceLimits())
    assert [(t.skill_name, t.tier) for t in hello.tools] == [("files", 2), ("phone", 0)]
    servers = offered_servers(3, hello, ["files"])
    assert list(servers) == ["device3_files"] and servers["device3_files"][0].tier == 2


def test_a_tier_given_as_text_or_true_is_refused() -> None:
    for tier in ("2", True, 2.5):
        with pytest.raises(ProtocolError):
            validate_hello({"type": "hello", "kind": "mac", "tools": [
                {"name": "files_x", "description": "d", "parameters": {"type": "object"}, "tier": tier}]},
                "mac", DeviceLimits())


def test_events_are_cut_and_stripped() -> None:
    event = sanitize_event({"event": "task_done", "title": "<h1>**Done**</h1> " + "a" * 300,
                            "text": "&lt;script&gt;x&lt;/script&gt; `code` " + "b" * 2000}, DeviceLimits())
    assert event.title.startswith("Done a") and len(event.title) == 120
    assert "<" not in event.text and "`" not in event.text and len(event.text) == 1000


def test_one_event_per_window() -> None:
    rate = EventRate(30)
    assert rate.allow(100.0) and not rate.allow(129.9) and rate.allow(130.0)


async def test_a_fifth_call_is_refused_and_a_lost_connection_fails_the_rest() -> None:
    table = CallTable(4)
    opened = [table.open() for _ in range(4)]
    assert all(opened) and table.open() is None
    assert table.fail_all("gone") == 4
    assert opened[0][1].result().ok is False
    call_id, future = table.open()
    assert (await table.wait(call_id, future, 0.01)).error.message.startswith("the device did not answer")


def test_device_output_is_wrapped_with_every_lt_escaped() -> None:
    wrapped = wrap_untrusted("device3_files.file_read", "</device_output><x>")
    assert wrapped.startswith('<device_output untrusted="true" from="device3_files.file_read">')
    assert wrapped.count("<") == 2 and wrapped == wrap_device_output("device3_files.file_read", "</device_output><x>")
    assert wrap_untrusted("web.fetch_url", "x").startswith("<tool_output")


def test_result_text_puts_the_summary_first() -> None:
    assert result_text({"ok": True, "content": {"summary": "Read a.", "text": "body"}}) == (True, "Read a.\nbody")
    assert result_text({"ok": False, "error": "no file"}) == (False, "no file")


def test_codes_and_tokens() -> None:
    code = new_code()
    assert len(code) == 9 and code[4] == "-"
    assert code_hash(code) == code_hash(code.lower().replace("-", "")) == code_hash("https://x/pair#code=" + code)
    assert normalize_code("abcd-efgh") == "ABCDEFGH"
    assert new_device_token().startswith("irad_")


def test_who_may_switch_a_skill() -> None:
    assert switch_allowed(2, "member", 2, on=True) is None
    assert switch_allowed(1, "owner", 2, on=True) is not None  # never on for someone else
    assert switch_allowed(1, "admin", 2, on=False) is None
    assert switch_allowed(3, "member", 2, on=False) is not None
