"""Exchanges for evaluation: each owner message with the reply it got, flagged when the
owner's next message corrected the agent.

A correction is the cheapest honest label of a bad answer there is, so the export carries it
on the exchange that was corrected, not on the correcting message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from actors.memory.reflection import is_correction
from actors.store import schema
from actors.store.models import HEALTH_CHANNEL, MessageRecord
from actors.store.store import Store

PAGE = 200


class ExchangeRow(BaseModel):
    session_id: str
    message_id: str
    ts: float
    user: str
    reply: str
    tools: list[str] = Field(default_factory=list)
    corrected: bool = False
    correction: str | None = None


def _tool_names(meta: dict[str, Any] | None) -> list[str]:
    tools = (meta or {}).get("tools") or []
    return [str(t.get("name", t)) if isinstance(t, dict) else str(t) for t in tools]


def pair_exchanges(messages: Sequence[MessageRecord]) -> list[ExchangeRow]:
    """Messages of one conversation (any order) as exchanges, oldest first."""
    ordered = sorted(messages, key=lambda m: m.seq)
    rows: list[ExchangeRow] = []
    for i, message in enumerate(ordered):
        if message.role != "user":
            continue
        replies = []
        tools: list[str] = []
        j = i + 1
        while j < len(ordered) and ordered[j].role != "user":
            if ordered[j].role == "assistant":
                replies.append(ordered[j].content)
                tools += _tool_names(ordered[j].meta)
            j += 1
        if not replies:
            continue  # no answer yet (or it was cancelled before a word)
        following = ordered[j].content if j < len(ordered) else None
        corrected = following is not None and is_correction(following)
        rows.append(ExchangeRow(session_id=message.conversation_id, message_id=message.id,
                                ts=message.created, user=message.content, reply="\n".join(replies),
                                tools=tools, corrected=corrected,
                                correction=following if corrected else None))
    return rows


async def iter_exchanges(store: Store) -> AsyncIterator[ExchangeRow]:
    """Every exchange in the store, conversation by conversation (oldest conversation first),
    reading one conversation at a time so the export never holds the whole history."""
    offset = 0
    while True:
        query = (sa.select(schema.conversations.c.id)
                 .where(schema.conversations.c.channel != HEALTH_CHANNEL)
                 .order_by(schema.conversations.c.created, schema.conversations.c.id)
                 .offset(offset).limit(PAGE))
        async with store.engine.connect() as conn:
            ids = [r[0] for r in (await conn.execute(query)).all()]
        if not ids:
            return
        for conversation_id in ids:
            for row in pair_exchanges(await store.list_messages(conversation_id)):
                yield row
        offset += len(ids)
