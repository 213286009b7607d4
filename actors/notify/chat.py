"""A line the system adds to a conversation by itself (a "Missed call" in the call's chat).

Only for conversations no session actor is holding: a call's own conversation (`call-<id>`)
is opened by a session only once the call is answered or called back, after which nothing is
written here any more.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from actors.store import schema
from actors.store.models import new_id
from actors.store.store import Store


async def add_line(store: Store, conversation_id: str, title: str, text: str, now: float,
                   meta: dict[str, Any] | None = None) -> str:
    """Append an assistant line (made if need be, titled `title`); returns the message id."""
    convs, msgs = schema.conversations, schema.messages
    message_id = new_id()
    async with store.engine.begin() as conn:
        await conn.execute(store.upsert(convs).values(id=conversation_id, title=title, channel="chat", created=now,
                                                      updated=now).on_conflict_do_nothing(index_elements=["id"]))
        top = (await conn.execute(sa.select(sa.func.max(msgs.c.seq))
                                  .where(msgs.c.conversation_id == conversation_id))).scalar_one_or_none()
        await conn.execute(sa.insert(msgs).values(id=message_id, conversation_id=conversation_id,
                                                  seq=1 if top is None else top + 1, role="assistant", content=text,
                                                  meta=meta, created=now))
        await conn.execute(sa.update(convs).where(convs.c.id == conversation_id).values(updated=now))
    return message_id
