"""The device WebSocket protocol as pure functions: parsing frames, validating a hello,
sanitising events. No I/O; the gateway and the DeviceActor call these.

Errors are `ProtocolError(message)`; the caller decides between an error frame and a close.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from actors.devices.settings import DeviceLimits

KINDS: tuple[str, ...] = ("mac", "windows", "linux", "android", "ios")
TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{2,40}$")
SKILL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
EVENT_KINDS: tuple[str, ...] = ("watch_done", "task_progress", "task_done", "task_failed", "task_reply")
DEFAULT_TIER = 2
# Before a welcome names maxTools a device offers this many (older servers took 30).
LEGACY_MAX_TOOLS = 30

# Close codes of the contract.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_TOO_BIG = 1009
CLOSE_REPLACED = 4000
CLOSE_UNAUTHORIZED = 4401
CLOSE_BAD_HELLO = 4400
CLOSE_REVOKED = 4403
CLOSE_SILENT = 4408


class ProtocolError(Exception):
    """A frame that breaks the protocol; the message is safe to show the device."""


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


class Hello(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["hello"]
    kind: str
    label: str = Field(default="", max_length=100)
    version: str = Field(default="", max_length=40)
    tools: list[DeviceTool] = Field(default_factory=list)

    def skills(self) -> list[str]:
        return sorted({t.skill_name for t in self.tools})


def parse_frame(text: str | bytes | None, limits: DeviceLimits) -> dict[str, Any]:
    """One JSON object with a string `type`; size is checked by the caller (it closes 1009)."""
    if text is None:
        raise ProtocolError("frames are JSON text")
    try:
        frame = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ProtocolError("a frame must be one JSON object") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise ProtocolError("a frame must be a JSON object with a string `type`")
    return frame


def frame_size(text: str | bytes) -> int:
    return len(text.encode()) if isinstance(text, str) else len(text)


def validate_hello(frame: dict[str, Any], paired_kind: str, limits: DeviceLimits) -> Hello:
    """The hello, or ProtocolError naming the first rule it breaks."""
    if frame.get("type") != "hello":
        raise ProtocolError("the first frame must be a hello (or a bye)")
    tools = frame.get("tools", [])
    if not isinstance(tools, list):
        raise ProtocolError("tools must be a list")
    if len(tools) > limits.max_tools:
        raise ProtocolError(f"a hello offers at most {limits.max_tools} tools; this one has {len(tools)}")
    for tool in tools:
        params = tool.get("parameters") if isinstance(tool, dict) else None
        if not isinstance(params, dict):
            raise ProtocolError("each tool needs `parameters`, a JSON Schema object")
        if params.get("type", "object") != "object":
            raise ProtocolError("a tool's parameters must be a JSON Schema of type object")
        size = len(json.dumps(params, separators=(",", ":")).encode())
        if size > limits.max_parameters_bytes:
            raise ProtocolError(f"tool {tool.get('name')!r}: parameters are {size} bytes, "
                                f"at most {limits.max_parameters_bytes}")
    try:
        hello = Hello.model_validate(frame)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise ProtocolError(f"{where}: {err.get('msg', 'invalid')}") from None
    if hello.kind != paired_kind:
        raise ProtocolError(f"this device was paired as {paired_kind!r}, not {hello.kind!r}")
    names = [t.name for t in hello.tools]
    if len(names) != len(set(names)):
        raise ProtocolError("tool names must be unique")
    return hello


def welcome(device_id: int, label: str, skills: list[str], assistant: str, limits: DeviceLimits) -> dict[str, Any]:
    return {"type": "welcome", "deviceId": device_id, "label": label, "skills": skills,
            "assistant": assistant, "wakePhrase": f"Hey {assistant}", "maxTools": limits.max_tools}


def error_frame(message: str) -> dict[str, Any]:
    return {"type": "error", "error": message}


_TAG = re.compile(r"<[^>]{0,500}>")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_MARKS = re.compile(r"(\*\*|__|\*|`+|~~|^#{1,6}\s+|^>\s?|^\s*[-+]\s+)", re.M)
_SPACE = re.compile(r"[ \t]+")


def plain_text(value: str) -> str:
    """HTML tags and markdown marks gone, entities decoded, runs of spaces folded."""
    text = _TAG.sub("", value)
    text = html.unescape(text)
    # A decoded entity may have been a tag written as &lt;b&gt;: strip once more.
    text = _TAG.sub("", text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_MARKS.sub("", text)
    return _SPACE.sub(" ", text).strip()


class DeviceEvent(BaseModel):
    event: str
    title: str
    text: str
    data: dict[str, Any] = Field(default_factory=dict)


def sanitize_event(frame: dict[str, Any], limits: DeviceLimits) -> DeviceEvent:
    kind = frame.get("event")
    if kind not in EVENT_KINDS:
        raise ProtocolError(f"event must be one of {', '.join(EVENT_KINDS)}")
    title, text, data = frame.get("title", ""), frame.get("text", ""), frame.get("data", {})
    if not isinstance(title, str) or not isinstance(text, str):
        raise ProtocolError("title and text must be strings")
    if data is None:
        data = {}
    if not isinstance(data, dict) or len(json.dumps(data)) > 4096:
        raise ProtocolError("data must be a JSON object of at most 4 KB")
    title = plain_text(title)[:limits.title_chars]
    text = plain_text(text)[:limits.text_chars]
    if not title and not text:
        raise ProtocolError("an event needs a title or a text")
    return DeviceEvent(event=kind, title=title, text=text, data=data)


class EventRate:
    """One event per `seconds` per device; the clock is passed in so tests need no waiting."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last: float | None = None

    def allow(self, now: float) -> bool:
        if self.last is not None and now - self.last < self.seconds:
            return False
        self.last = now
        return True

    def retry_after(self, now: float) -> float:
        return 0.0 if self.last is None else max(0.0, self.seconds - (now - self.last))




def result_text(frame: dict[str, Any]) -> tuple[bool, str]:
    """A result frame as (ok, text for the model). `content` is any JSON; a `summary` in it is
    put first since it helps a model as much as a no-key demo."""
    if frame.get("ok") is not True:
        error = frame.get("error")
        return False, str(error) if error else "the device reported a failure"
    content = frame.get("content")
    if isinstance(content, str):
        return True, content
    if isinstance(content, dict) and isinstance(content.get("summary"), str):
        rest = {k: v for k, v in content.items() if k != "summary"}
        body = rest.get("text") if set(rest) == {"text"} and isinstance(rest.get("text"), str) \
            else json.dumps(rest, ensure_ascii=False) if rest else ""
        return True, content["summary"] + ("\n" + body if body else "")
    return True, json.dumps(content, ensure_ascii=False)
