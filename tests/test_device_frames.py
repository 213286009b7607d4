"""The typed device frames, no Ray and no socket: every frame parses into its class, limits hold
at their edges, broken frames raise the error class that decides between an error frame and a
4400 close, and the server's frames encode to exactly the JSON the contract shows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors.common.errors import ErrorInfo
from actors.devices.calls import CallReply, CallTable, refuse_call
from actors.devices.frames import (BadFrame, BadHello, ByeFrame, CallFrame, Close, ErrorFrame, EventFrame, Hello,
                                   PingFrame, PongFrame, ProtocolError, PushedEvent, ResultFrame, UnknownFrame,
                                   decode_server_frame, encode, parse_frame)
from actors.devices.grants import catalogue_info, skill_split
from actors.devices.protocol import EventRate, error_frame, result_text, sanitize_event, welcome
from actors.devices.settings import DeviceLimits

LIMITS = DeviceLimits()


def tool(name: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "d", "parameters": params or {"type": "object"}, **extra}


def hello(kind: str = "mac", tools: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"type": "hello", "kind": kind, "label": "Test box", "version": "0.1",
                       "tools": tools if tools is not None else [tool("files_read")]})


def params_of(size: int) -> dict[str, Any]:
    base = {"type": "object", "properties": {"p": {"type": "string", "description": ""}}}
    base["properties"]["p"]["description"] = "x" * (size - len(json.dumps(base, separators=(",", ":")).encode()))
    assert len(json.dumps(base, separators=(",", ":")).encode()) == size
    return base


# -- from the device ---------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "cls"), [
    (hello(), Hello),
    ('{"type": "result", "id": "c1", "ok": true, "content": {"summary": "s"}}', ResultFrame),
    ('{"type": "event", "event": "task_done", "title": "t"}', EventFrame),
    ('{"type": "ping"}', PingFrame),
    ('{"type": "pong", "extra": 1}', PongFrame),
    ('{"type": "bye"}', ByeFrame),
    ('{"type": "sing"}', UnknownFrame),
])
def test_each_frame_type_parses_into_its_own_class(raw: str, cls: type) -> None:
    assert type(parse_frame(raw, LIMITS, "mac")) is cls


@pytest.mark.parametrize("raw", [None, "hello?", "[1]", '{"type": 3}', '{"kind": "mac"}', b"\xff\xfe"])
def test_what_is_not_a_json_object_with_a_string_type_is_a_plain_protocol_error(raw: Any) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_frame(raw, LIMITS, "mac")
    assert not isinstance(caught.value, (BadHello, BadFrame))


@pytest.mark.parametrize("tools", [
    [tool(f"files_t{i:02d}") for i in range(40)],
    [tool("files_big", params=params_of(8192))],
    [tool("f" + "a" * 40)],
    [tool("abc")],
    [tool("files_x", tier=0), tool("files_y", tier=3)],
])
def test_hellos_at_the_limits_parse(tools: list[dict[str, Any]]) -> None:
    frame = parse_frame(hello(tools=tools), LIMITS, "mac")
    assert isinstance(frame, Hello) and len(frame.tools) == len(tools)


@pytest.mark.parametrize(("tools", "kind", "says"), [
    ([tool(f"files_t{i:02d}") for i in range(41)], "mac", "at most 40 tools"),
    ([tool("files_big", params=params_of(8193))], "mac", "8193 bytes"),
    ([tool("f" + "a" * 41)], "mac", "must match"),
    ([tool("ab")], "mac", "must match"),
    ([tool("files_read", tier=4)], "mac", "tier"),
    ([tool("files_read", tier=-1)], "mac", "tier"),
    ([tool("files_read", tier="2")], "mac", "tier"),
    ([tool("files_read", params={"type": "string"})], "mac", "type object"),
    ([{"name": "files_read", "parameters": {"type": "object"}}], "mac", "description"),
    ([tool("files_read"), tool("files_read")], "mac", "unique"),
    ([tool("files_read")], "android", "paired as 'mac'"),
])
def test_a_hello_over_or_under_a_limit_is_a_bad_hello(tools: list[dict[str, Any]], kind: str, says: str) -> None:
    with pytest.raises(BadHello) as caught:
        parse_frame(hello(kind=kind, tools=tools), LIMITS, "mac")
    assert says in str(caught.value)


def test_a_hello_without_a_context_only_checks_its_shape() -> None:
    again = Hello.model_validate(parse_frame(hello(), LIMITS, "mac").model_dump())
    assert again.skills() == ["files"] and again.offers("files_read") and not again.offers("files_x")


@pytest.mark.parametrize(("frame", "says"), [
    ({"event": "party"}, "event must be one of"),
    ({"event": "task_done", "title": 3}, "title and text must be strings"),
    ({"event": "task_done", "title": "t", "data": []}, "data must be a JSON object"),
    ({"event": "task_done", "title": "t", "data": {"x": "y" * 4100}}, "at most 4 KB"),
])
def test_a_broken_event_is_a_bad_frame_not_a_bad_hello(frame: dict[str, Any], says: str) -> None:
    with pytest.raises(BadFrame) as caught:
        parse_frame(json.dumps({"type": "event", **frame}), LIMITS, "mac")
    assert says in str(caught.value) and not isinstance(caught.value, BadHello)


def test_an_event_at_its_limits_is_cut_not_refused() -> None:
    frame = parse_frame(json.dumps({"type": "event", "event": "task_done", "title": "a" * 121,
                                    "text": "b" * 1001, "data": None}), LIMITS, "mac")
    event = sanitize_event(frame, LIMITS)
    assert (len(event.title), len(event.text), event.data) == (120, 1000, {})
    with pytest.raises(ProtocolError, match="needs a title or a text"):
        sanitize_event(parse_frame('{"type": "event", "event": "task_done", "title": "<b></b>"}', LIMITS), LIMITS)


def test_a_result_only_succeeds_on_ok_true_and_an_id_that_is_not_text_matches_nothing() -> None:
    odd = parse_frame('{"type": "result", "id": 7, "ok": 1, "error": "no"}', LIMITS)
    assert isinstance(odd, ResultFrame) and odd.id is None and odd.ok is False
    assert result_text(odd) == (False, "no")
    assert result_text(ResultFrame(id="a", ok=True, content={"summary": "S", "text": "T"})) == (True, "S\nT")


# -- from the server -----------------------------------------------------------------------------

def test_server_frames_encode_to_the_contracts_json() -> None:
    assert encode(welcome(3, "Office Mac", ["files"], "Iriis", LIMITS)) == {
        "type": "welcome", "deviceId": 3, "label": "Office Mac", "skills": ["files"], "assistant": "Iriis",
        "wakePhrase": "Hey Iriis", "maxTools": 40}
    assert encode(CallFrame(id="9b0c", tool="file_read", args={"path": "~"}, here=True)) == {
        "type": "call", "id": "9b0c", "tool": "file_read", "args": {"path": "~"}, "here": True}
    assert encode(PushedEvent(event="task_done", title="T", text="x", data={"id": 1}, from_=4)) == {
        "type": "event", "event": "task_done", "title": "T", "text": "x", "data": {"id": 1}, "from": 4}
    assert encode(error_frame("bad")) == {"type": "error", "error": "bad"}
    assert encode(PingFrame()) == {"type": "ping"} and encode(PongFrame()) == {"type": "pong"}


def test_encoded_server_frames_decode_back_into_their_classes() -> None:
    for frame in (welcome(1, "x", [], "Iriis", LIMITS), CallFrame(id="a", tool="t", args={}, here=False),
                  PushedEvent(event="task_done", title="t", text="", from_=2), ErrorFrame(error="e"), PingFrame()):
        assert decode_server_frame(encode(frame)) == frame


# -- the policy beside the actor -------------------------------------------------------------------

def test_a_call_is_refused_when_offline_or_for_a_tool_not_offered() -> None:
    offered = parse_frame(hello(), LIMITS, "mac")
    assert refuse_call(None, False, "files_read").error.code == "device_offline"
    assert refuse_call(offered, False, "files_read").error.code == "device_offline"
    assert refuse_call(offered, True, "files_x").error == ErrorInfo(
        code="unknown_tool", message="the device offers no tool named 'files_x'")
    assert refuse_call(offered, True, "files_read") is None


async def test_call_replies_carry_error_info_with_stable_codes() -> None:
    table = CallTable(1)
    call_id, future = table.open()
    assert table.open() is None and table.busy().error.code == "device_busy"
    assert table.resolve(call_id, ResultFrame(id=call_id, ok=False, error="no file"))
    assert (await future) == CallReply.failed("device_failed", "no file")
    call_id, future = table.open()
    assert not table.resolve(None, ResultFrame(ok=True)) and not table.resolve("other", ResultFrame(ok=True))
    table.fail_all("replaced")
    assert (await future).error.code == "device_disconnected"
    call_id, future = table.open()
    assert (await table.wait(call_id, future, 0.01)).error.code == "device_timeout"
    assert CallReply(ok=True, content={"summary": "Read a."}).text() == "Read a."


def test_the_event_rate_says_when_to_send_again() -> None:
    rate = EventRate(30)
    assert rate.refusal(100.0) is None
    refused = rate.refusal(110.0)
    assert refused is not None and refused.code == "event_rate" and "again in 20 s" in refused.message
    assert rate.refusal(130.0) is None


def test_skills_split_into_on_and_off_and_the_catalogue_never_sees_off_tools() -> None:
    offered = parse_frame(hello(tools=[tool("files_read"), tool("clip_read", skill="clipboard")]), LIMITS, "mac")
    assert skill_split(offered, ["files", "calls"]) == (["files"], ["clipboard"])
    assert catalogue_info(3, 1, "mac", "Stored", offered, ["files"]) == {
        "id": 3, "person": 1, "label": "Test box", "kind": "mac", "on": ["files"], "off": ["clipboard"]}


def test_a_close_is_not_a_frame() -> None:
    assert Close(code=4000, reason="replaced").model_dump() == {"code": 4000, "reason": "replaced"}
    assert isinstance(parse_frame('{"type": "close"}', LIMITS), UnknownFrame)


async def test_the_provider_reads_a_call_reply_and_raises_its_error_message() -> None:
    from actors.common.toolspec import ToolError
    from actors.devices.provider import CALL_SCOPE, DeviceProvider

    class Handle:
        def __init__(self, reply: CallReply) -> None:
            self.reply = reply
            self.call = self

        async def remote(self, tool: str, arguments: dict[str, Any], here: bool) -> CallReply:
            return self.reply

    info = {"id": 3, "person": 1, "label": "Desk", "kind": "mac", "on": ["files"], "off": []}
    token = CALL_SCOPE.set({"person": 1, "device": 3})
    try:
        done = DeviceProvider(info, {}, Handle(CallReply(ok=True, content={"summary": "S", "text": "T"})))
        assert (await done.call("device3_files", "files_read", {})).text == "S\nT"
        busy = DeviceProvider(info, {}, Handle(CallTable(0).busy()))
        with pytest.raises(ToolError, match="the device is busy"):
            await busy.call("device3_files", "files_read", {})
    finally:
        CALL_SCOPE.reset(token)


async def test_a_read_waits_through_a_restart_but_an_action_is_never_sent_twice() -> None:
    from ray.exceptions import ActorUnavailableError

    from actors.common.toolspec import ToolError, ToolSpec
    from actors.devices.provider import CALL_SCOPE, DeviceProvider

    class Restarting:
        """The first call finds the actor restarting; later ones reach it."""
        def __init__(self) -> None:
            self.call = self
            self.asked: list[str] = []

        async def remote(self, tool: str, arguments: dict[str, Any], here: bool) -> CallReply:
            self.asked.append(tool)
            if len(self.asked) == 1:
                raise ActorUnavailableError("restarting", None)
            return CallReply(ok=True, content={"summary": "S", "text": "T"})

    def spec(name: str, tier: int) -> ToolSpec:
        return ToolSpec(name=name, description="", parameters={"type": "object"}, tier=tier, source="device3_files")

    info = {"id": 3, "person": 1, "label": "Desk", "kind": "mac", "on": ["files"], "off": []}
    servers = {"device3_files": [spec("files_read", 0), spec("files_delete", 2)]}
    token = CALL_SCOPE.set({"person": 1, "device": None})
    try:
        read = Restarting()
        assert (await DeviceProvider(info, servers, read).call("device3_files", "files_read", {})).text == "S\nT"
        assert read.asked == ["files_read", "files_read"]
        action = Restarting()
        with pytest.raises(ToolError, match="may or may not have run"):
            await DeviceProvider(info, servers, action).call("device3_files", "files_delete", {})
        assert action.asked == ["files_delete"]
    finally:
        CALL_SCOPE.reset(token)
