"""Pre-reading attachments: the model gets the files' contents, not bare ids."""

from __future__ import annotations

import asyncio

from actors.common.attachments import extract_text, parse_attachments, render_attachment
from actors.common.provenance import Provenance
from actors.common.untrusted import wrap_escaped
from actors.session.events import ToolActivity
from actors.session.turnlog import TurnLog
from actors.store.store import Store


async def render_attachments(store: Store, message: str, turn: TurnLog,
                             sources: list[Provenance] | None = None) -> dict[int, str]:
    """Read every `[attachment file:N ...]` the message names; progress shows as tool events.

    An uploaded file is the owner's upload, not the owner's words: each block is wrapped as
    untrusted, and its provenance (`file:12 notes.txt`) is added to `sources`."""
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
        source = Provenance.file(att.file_id, att.name or meta.name)
        rendered[att.file_id] = wrap_escaped(str(source), render_attachment(att, meta.mime, meta.size, text),
                                             what="the text of an uploaded file")
        if sources is not None:
            sources.append(source)
        await turn.push(ToolActivity(name="read_attachment", status="done",
                                     result=f"{meta.name}: {len(text)} characters"))
    return rendered
