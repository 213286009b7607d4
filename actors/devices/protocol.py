"""The device WebSocket protocol as pure functions: parsing frames, validating a hello,
sanitising events. No I/O; the gateway and the DeviceActor call these.

The frames themselves are typed in `actors.devices.frames`; this module holds the rules
around them. Errors are `ProtocolError(message)` (`BadHello` for a hello, which closes 4400);
the caller decides between an error frame and a close.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from pydantic import BaseModel, Field

from actors.common.errors import ErrorInfo
from actors.devices.frames import (DEFAULT_TIER, EVENT_KINDS, SKILL_NAME, TOOL_NAME, BadFrame, BadHello, DeviceTool,
                                   ErrorFrame, EventFrame, Hello, ProtocolError, ResultFrame, Welcome,
                                   parse_frame, validate_frame)
from actors.devices.settings import DeviceLimits

__all__ = ["DEFAULT_TIER", "EVENT_KINDS", "KINDS", "SKILL_NAME", "TOOL_NAME", "BadFrame", "BadHello", "DeviceTool",
           "DeviceEvent", "EventRate", "Hello", "ProtocolError", "error_frame", "frame_size", "parse_frame",
           "plain_text", "result_text", "sanitize_event", "validate_hello", "welcome"]

KINDS: tuple[str, ...] = ("mac", "windows", "linux", "android", "ios")
FAILED = "the device reported a failure"
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


def frame_size(text: str | bytes) -> int:
    return len(text.encode()) if isinstance(text, str) else len(text)


def validate_hello(frame: dict[str, Any], paired_kind: str, limits: DeviceLimits) -> Hello:
    """The hello, or BadHello (a ProtocolError) naming the first rule it breaks."""
    if frame.get("type") != "hello":
        raise BadHello("the first frame must be a hello (or a bye)")
    hello = validate_frame(frame, limits, paired_kind)
    assert isinstance(hello, Hello)
    return hello


def welcome(device_id: int, label: str, skills: list[str], assistant: str, limits: DeviceLimits) -> Welcome:
    return Welcome(device_id=device_id, label=label, skills=skills, assistant=assistant,
                   wake_phrase=f"Hey {assistant}", max_tools=limits.max_tools)


def error_frame(message: str) -> ErrorFrame:
    return ErrorFrame(error=message)


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


def sanitize_event(frame: EventFrame | dict[str, Any], limits: DeviceLimits) -> DeviceEvent:
    """The event as it is kept and handed out: HTML and markdown gone, cut to the limits.
    A dict (without `type`) is validated as an EventFrame first."""
    if isinstance(frame, dict):
        frame = EventFrame.model_validate({**frame, "type": "event"})
    title = plain_text(frame.title)[:limits.title_chars]
    text = plain_text(frame.text)[:limits.text_chars]
    if not title and not text:
        raise ProtocolError("an event needs a title or a text")
    return DeviceEvent(event=frame.event, title=title, text=text, data=frame.data)


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

    def refusal(self, now: float) -> ErrorInfo | None:
        """None when an event may go now (and it is counted), else why not."""
        if self.allow(now):
            return None
        return ErrorInfo(code="event_rate", message=f"one event per {self.seconds:g} s per device; "
                         f"send it again in {self.retry_after(now):.0f} s")




def result_text(frame: ResultFrame | dict[str, Any]) -> tuple[bool, str]:
    """A result frame as (ok, text for the model). `content` is any JSON; a `summary` in it is
    put first since it helps a model as much as a no-key demo."""
    if isinstance(frame, dict):
        frame = ResultFrame.model_validate({**frame, "type": "result"})
    if not frame.ok:
        return False, str(frame.error) if frame.error else FAILED
    return True, content_text(frame.content)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict) and isinstance(content.get("summary"), str):
        rest = {k: v for k, v in content.items() if k != "summary"}
        body = rest.get("text") if set(rest) == {"text"} and isinstance(rest.get("text"), str) \
            else json.dumps(rest, ensure_ascii=False) if rest else ""
        return content["summary"] + ("\n" + body if body else "")
    return json.dumps(content, ensure_ascii=False)
