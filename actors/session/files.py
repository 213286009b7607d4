"""Pre-reading attachments: the model gets the files' contents, not bare ids."""

from __future__ import annotations

import asyncio

from actors.common.attachments import extract_text, parse_attachments, render_attachment
from actors.session.events import ToolActivity
from actors.session.turnlog import TurnLog
from actors.store.store import Store


async def render_attachments(store: Store, message: str, turn: TurnLog) -> dict[int, str]:
    """Read every `[attachment file:N ...]` the message names; progress shows as tool events."""
    rendered: dict[int, str] = {}
    for att in parse_attachments(message):
        await turn.push(ToolActivity(name="read_attachment", status="start", arguments={"file_id": att.file_id}))
        found = await store.get_file(att.file_id)
        if found is None:
            await turn.push(ToolActivity(name="read_attachment", status="error",
                                         result=f"file {att.file_id} was not found"))
            continue
        meta, data = found
        # PDF parsing is CPU work: keep it off the actor's event loop.
        text = await asyncio.to_thread(extract_text, data, meta.mime, att.name or meta.name)
        rendered[att.file_id] = render_attachment(att, meta.mime, meta.size, text)
        await turn.push(ToolActivity(name="read_attachment", status="done",
                                     result=f"{meta.name}: {len(text)} characters"))
    return rendered
