"""The device WebSocket's frames as typed models: one class per `type`, one union per direction.

`DeviceFrame` is what a device may send (hello, result, event, ping, pong, bye; any other type
parses as `UnknownFrame`, which the socket answers with an error frame). `ServerFrame` is what
the server sends (welcome, call, event, error, ping, pong). `encode` turns a server frame into
the JSON object the wire has always carried: field order and names (`deviceId`, `from` ...) are
the contract's.

The rules with their own wording (a hello's tools, an event's fields) raise `ProtocolError`
straight out of validation, so a device reads the same sentence it always did; a hello that
breaks a rule raises `BadHello`, which closes the connection with 4400.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError,
                      ValidationInfo, field_validator, model_validator)

from actors.common.errors import IriisError
from actors.devices.settings import DeviceLimits

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{2,40}$")
SKILL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
EVENT_KINDS: tuple[str, ...] = ("watch_done", "task_progress", "task_done", "task_failed", "task_reply")
DEFAULT_TIER = 2
EVENT_DATA_BYTES = 4096


class ProtocolError(IriisError):
    """A frame that breaks the protocol; the message is safe to show the device."""

    code = "bad_frame"


class BadHello(ProtocolError):
    """A hello that breaks a rule: the device gets the error frame, then a 4400 close."""


class BadFrame(ProtocolError):
    """A frame of a known type (not a hello) that breaks its type's rules: an error frame."""


class _Frame(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


# -- from the device --------------------------------------------------------------------------

class DeviceTool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    description: str = Field(min_length=1, max_length=2000)
    parameters: dict[str, Any]
    skill: str | None = None
    tier: int = Field(default=DEFAULT_TIER, ge=0, le=3, strict=True)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOOL_NAME.match(value):
            raise ValueError(f"tool name {value!r} must match {TOOL_NAME.pattern}")
        return value

    @field_validator("skill")
    @classmethod
    def _skill(cls, value: str | None) -> str | None:
        if value is not None and not SKILL_NAME.match(value):
            raise ValueError(f"skill {value!r} must match {SKILL_NAME.pattern}")
        return value

    @property
    def skill_name(self) -> str:
        """The grant the tool belongs to: its own `skill`, else its name up to the first `_`."""
        return self.skill or self.name.split("_", 1)[0]


class Hello(_Frame):
    """The device's first frame. Validated with context `{"limits", "kind"}` (as `parse_frame`
    and `validate_hello` do) it also enforces the tool count, the parameters' shape and size,
    the paired kind and unique names; without a context it only checks the shape."""

    type: Literal["hello"] = "hello"
    kind: str
    label: str = Field(default="", max_length=100)
    version: str = Field(default="", max_length=40)
    tools: list[DeviceTool] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, data: Any, info: ValidationInfo) -> Any:
        limits = (info.context or {}).get("limits")
        if limits is None or not isinstance(data, dict):
            return data
        tools = data.get("tools", [])
        if not isinstance(tools, list):
            raise BadHello("tools must be a list")
        if len(tools) > limits.max_tools:
            raise BadHello(f"a hello offers at most {limits.max_tools} tools; this one has {len(tools)}")
        for tool in tools:
            params = tool.get("parameters") if isinstance(tool, dict) else None
            if not isinstance(params, dict):
                raise BadHello("each tool needs `parameters`, a JSON Schema object")
            if params.get("type", "object") != "object":
                raise BadHello("a tool's parameters must be a JSON Schema of type object")
            size = len(json.dumps(params, separators=(",", ":")).encode())
            if size > limits.max_parameters_bytes:
                raise BadHello(f"tool {tool.get('name')!r}: parameters are {size} bytes, "
                               f"at most {limits.max_parameters_bytes}")
        return data

    @model_validator(mode="after")
    def _paired(self, info: ValidationInfo) -> Hello:
        kind = (info.context or {}).get("kind")
        if kind is not None and self.kind != kind:
            raise BadHello(f"this device was paired as {kind!r}, not {self.kind!r}")
        names = [t.name for t in self.tools]
        if len(names) != len(set(names)):
            raise BadHello("tool names must be unique")
        return self

    def skills(self) -> list[str]:
        return sorted({t.skill_name for t in self.tools})

    def offers(self, tool: str) -> bool:
        return any(t.name == tool for t in self.tools)


class ResultFrame(_Frame):
    """A call's answer. `id` that is not a string matches no call; only `ok: true` is success."""

    type: Literal["result"] = "result"
    id: str | None = None
    ok: bool = False
    content: Any = None
    error: Any = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> str | None:
        return value if isinstance(value, str) else None

    @field_validator("ok", mode="before")
    @classmethod
    def _ok(cls, value: Any) -> bool:
        return value is True


class EventFrame(_Frame):
    """An event as the device sent it; `protocol.sanitize_event` cuts and strips it."""

    type: Literal["event"] = "event"
    event: str
    title: str = ""
    text: str = ""
    data: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("event") not in EVENT_KINDS:
            raise BadFrame(f"event must be one of {', '.join(EVENT_KINDS)}")
        if not isinstance(data.get("title", ""), str) or not isinstance(data.get("text", ""), str):
            raise BadFrame("title and text must be strings")
        payload = data.get("data", {})
        if payload is None:
            payload = {}
        if not isinstance(payload, dict) or len(json.dumps(payload)) > EVENT_DATA_BYTES:
            raise BadFrame("data must be a JSON object of at most 4 KB")
        return {**data, "data": payload}


class PingFrame(_Frame):
    type: Literal["ping"] = "ping"


class PongFrame(_Frame):
    type: Literal["pong"] = "pong"


class ByeFrame(_Frame):
    type: Literal["bye"] = "bye"


class UnknownFrame(_Frame):
    """A frame of a type the protocol does not have (answered with an error frame)."""

    type: str


_DEVICE_TYPES = frozenset({"hello", "result", "event", "ping", "pong", "bye"})


def _device_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _DEVICE_TYPES else "unknown"


DeviceFrame = Annotated[Union[
    Annotated[Hello, Tag("hello")],
    Annotated[ResultFrame, Tag("result")],
    Annotated[EventFrame, Tag("event")],
    Annotated[PingFrame, Tag("ping")],
    Annotated[PongFrame, Tag("pong")],
    Annotated[ByeFrame, Tag("bye")],
    Annotated[UnknownFrame, Tag("unknown")],
], Discriminator(_device_tag)]
_DEVICE_ADAPTER: TypeAdapter[Any] = TypeAdapter(DeviceFrame)


# -- from the server --------------------------------------------------------------------------

class Welcome(_Frame):
    type: Literal["welcome"] = "welcome"
    device_id: int = Field(alias="deviceId")
    label: str
    skills: list[str]
    assistant: str
    wake_phrase: str = Field(alias="wakePhrase")
    max_tools: int = Field(alias="maxTools")


class CallFrame(_Frame):
    type: Literal["call"] = "call"
    id: str
    tool: str
    args: dict[str, Any]
    here: bool


class PushedEvent(_Frame):
    """An event from another of the person's devices; `from` is that device's id."""

    type: Literal["event"] = "event"
    event: str
    title: str
    text: str
    data: dict[str, Any] = Field(default_factory=dict)
    from_: int | None = Field(default=None, alias="from")


class ErrorFrame(_Frame):
    type: Literal["error"] = "error"
    error: str


ServerFrame = Annotated[Union[Welcome, CallFrame, PushedEvent, ErrorFrame, PingFrame, PongFrame],
                        Field(discriminator="type")]
_SERVER_ADAPTER: TypeAdapter[Any] = TypeAdapter(ServerFrame)


class Close(BaseModel):
    """Not a frame: the DeviceActor asking the socket's replica to close with `code`."""

    code: int
    reason: str = ""


# -- parsing and encoding ---------------------------------------------------------------------

def _first_error(exc: ValidationError, tag: str | None = None) -> str:
    err = exc.errors()[0]
    loc = list(err.get("loc", ()))
    if tag is not None and loc and loc[0] == tag:
        loc = loc[1:]
    where = ".".join(str(p) for p in loc)
    return f"{where}: {err.get('msg', 'invalid')}"


def parse_frame(text: str | bytes | None, limits: DeviceLimits, kind: str | None = None) -> Any:
    """One device frame as its model (`DeviceFrame`). Size is checked by the caller (1009).

    Raises ProtocolError for anything that is not one JSON object with a string `type`; BadFrame
    for a frame that breaks its type's rules, BadHello for a hello (paired as `kind`, if given)."""
    if text is None:
        raise ProtocolError("frames are JSON text")
    try:
        frame = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError("a frame must be one JSON object") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise ProtocolError("a frame must be a JSON object with a string `type`")
    return validate_frame(frame, limits, kind)


def validate_frame(frame: dict[str, Any], limits: DeviceLimits, kind: str | None = None) -> Any:
    tag = _device_tag(frame)
    try:
        return _DEVICE_ADAPTER.validate_python(frame, context={"limits": limits, "kind": kind})
    except ValidationError as exc:
        error = BadHello if tag == "hello" else BadFrame
        raise error(_first_error(exc, tag)) from None


def encode(frame: Any) -> dict[str, Any]:
    """A server frame as the wire's JSON object (aliases, the contract's field order)."""
    return frame.model_dump(mode="json", by_alias=True)


def decode_server_frame(data: dict[str, Any]) -> Any:
    """The inverse of `encode` (for clients and tests)."""
    return _SERVER_ADAPTER.validate_python(data)
