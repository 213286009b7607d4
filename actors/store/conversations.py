"""Renaming and deleting a whole conversation in the store. The gateway retires the live
session actor first (flushed, then ended), so nothing it buffered writes the old row back."""

from __future__ import annotations

import time

import sqlalchemy as sa

from actors.store import schema
from actors.store.store import Store

MAX_TITLE = 120


def clean_title(title: str) -> str:
    """One line, spaces collapsed, at most MAX_TITLE characters."""
    return " ".join((title or "").split())[:MAX_TITLE]


async def rename_conversation(store: Store, conversation_id: str, title: str) -> bool:
    """False when there is no such conversation."""
    async with store.engine.begin() as conn:
        result = await conn.execute(
            sa.update(schema.conversations).where(schema.conversations.c.id == conversation_id)
            .values(title=clean_title(title), updated=time.time()))
    return bool(result.rowcount)


async def delete_conversation(store: Store, conversation_id: str) -> bool:
    """The conversation and all its messages, for good. False when there is no such one."""
    async with store.engine.begin() as conn:
        await conn.execute(sa.delete(schema.messages).where(schema.messages.c.conversation_id == conversation_id))
        result = await conn.execute(sa.delete(schema.conversations).where(schema.conversations.c.id == conversation_id))
    return bool(result.rowcount)
