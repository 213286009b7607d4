"""Privacy of device output (devices spec, "Privacy"): a device's output stays in its person's
conversation. Anyone else reading that conversation (the owner or an admin) sees a placeholder
where device output or an action's parameters would be."""

from __future__ import annotations

from typing import Any

from actors.devices.grants import device_of_server

PLACEHOLDER = "[private: this part came from the person's own device]"


def is_device_call(tool: dict[str, Any]) -> bool:
    return device_of_server(str(tool.get("source") or "")) is not None


def for_reader(message: dict[str, Any], reader_is_person: bool) -> dict[str, Any]:
    """A stored message as another reader may see it: replies that used the person's device
    lose their text, and device calls lose their arguments and results."""
    tools = (message.get("meta") or {}).get("tools") or []
    if reader_is_person or not any(is_device_call(t) for t in tools):
        return message
    hidden = [{**t, "arguments": {}, "result": PLACEHOLDER} if is_device_call(t) else t for t in tools]
    return {**message, "content": PLACEHOLDER, "meta": {**message["meta"], "tools": hidden}}


def event_for_reader(event: dict[str, Any], reader_is_person: bool) -> dict[str, Any]:
    """A live turn event as another reader may see it: no arguments or results of tools."""
    if reader_is_person or event.get("type") not in ("tool", "confirm"):
        return event
    data = {k: v for k, v in event["data"].items() if k not in ("arguments", "result")}
    return {**event, "data": data}
