"""Privacy of device output (devices spec, "Privacy"): a device's output stays in its person's
conversation. Anyone else reading that conversation (the owner or an admin) sees a placeholder
where device output or an action's parameters would be."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from actors.devices.grants import device_of_server

PLACEHOLDER = "[private: this part came from the person's own device]"
PRIVATE_EVENT_FIELDS = ("arguments", "result")
E = TypeVar("E", bound=BaseModel)


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


def event_for_reader(event: E, reader_is_person: bool) -> E:
    """A live turn event as another reader may see it: no arguments or results of tools.

    Takes the session's typed events (`actors.session.events`) by their shape, since the
    session package imports this one: a tool or confirm event comes back with its private
    fields unset, which leaves them off the wire."""
    if reader_is_person or getattr(event, "type", None) not in ("tool", "confirm"):
        return event
    return event.model_copy(update={k: None for k in PRIVATE_EVENT_FIELDS if k in type(event).model_fields})
