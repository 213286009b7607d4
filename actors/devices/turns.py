"""What the turn pipeline needs to know about devices: whose turn it is, and the privacy rule
for the activity record (a device call is kept with no arguments and no results)."""

from __future__ import annotations

import dataclasses
from typing import Any

from actors.devices.grants import device_of_server
from actors.devices.people import OWNER_ID
from actors.devices.repository import conversation_person
from actors.store.store import Store


async def turn_scope(store: Store, session_id: str | None) -> dict[str, Any]:
    """{"person", "device"} for a conversation: the owner's unless a person claimed it."""
    if not session_id:
        return {"person": OWNER_ID, "device": None}
    person, device = await conversation_person(store, session_id)
    return {"person": person, "device": device}


def private_device_audit(ctx: Any, toolbox: Any) -> Any:
    """The turn context with an audit hook that drops a device call's arguments and results."""
    audit = ctx.audit
    if audit is None:
        return ctx

    async def record(entry: Any) -> None:
        spec = toolbox.specs.get(entry.tool)
        if spec is not None and device_of_server(spec.source) is not None:
            entry = entry.model_copy(update={"arguments": {}, "result": None,
                                             "error": None if entry.error is None else "failed"})
        await audit(entry)

    return dataclasses.replace(ctx, audit=record)
