"""Apply planned memory operations in one transaction, logging each as a memory event.

Either the whole reflection (or playbook delta, or consolidation) lands or none of it does:
a half-applied correction could leave the old fact retired without its replacement.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncConnection

from actors.memory.events import log_event
from actors.memory.model import MOOD_KV
from actors.memory.reflection import DeactivateOp, InsertOp, Op, ReinforceOp, SetMoodOp, UpdateOp
from actors.store import schema
from actors.store.store import Store



class Applied(BaseModel):
    """What a batch of operations did, by kind of change."""

    inserted: list[int] = Field(default_factory=list)
    reinforced: list[int] = Field(default_factory=list)
    updated: list[int] = Field(default_factory=list)
    deactivated: list[int] = Field(default_factory=list)
    mood: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.reinforced or self.updated or self.deactivated or self.mood)


async def _still_active(conn: AsyncConnection, item_id: int) -> bool:
    row = (await conn.execute(sa.select(schema.mind.c.active).where(schema.mind.c.id == item_id))).first()
    return bool(row and row[0])


async def apply_ops(store: Store, ops: Sequence[Op], source: str, session_id: str | None = None,
                    now: float | None = None) -> Applied:
    """Write `ops` (from a plan_* function) and their events; returns the ids touched.

    An id that stopped being active between planning and applying (the owner deleted it, a
    parallel reflection retired it) is skipped rather than resurrected or rewritten."""
    now = now or time.time()
    done = Applied()
    mind = schema.mind
    async with store.engine.begin() as conn:
        for op in ops:
            if isinstance(op, InsertOp):
                new_id = (await conn.execute(sa.insert(mind).values(
                    kind=op.kind, text=op.text, importance=op.importance, uses=0, active=True,
                    created=op.created, last_used=None, provenance=op.provenance).returning(mind.c.id))).scalar_one()
                done.inserted.append(new_id)
                await log_event(conn, "insert", new_id, session_id,
                                {"source": source, "kind": op.kind, "text": op.text,
                                 **({"provenance": op.provenance} if op.provenance else {})}, now)
            elif isinstance(op, ReinforceOp):
                if await _still_active(conn, op.item_id):
                    await conn.execute(sa.update(mind).where(mind.c.id == op.item_id).values(
                        importance=op.importance, last_used=op.last_used))
                    done.reinforced.append(op.item_id)
                    await log_event(conn, "reinforce", op.item_id, session_id,
                                    {"source": source, "importance": op.importance}, now)
            elif isinstance(op, UpdateOp):
                if await _still_active(conn, op.item_id):
                    old = (await conn.execute(sa.select(mind.c.text).where(mind.c.id == op.item_id))).scalar_one()
                    await conn.execute(sa.update(mind).where(mind.c.id == op.item_id).values(
                        text=op.text, last_used=op.last_used))
                    done.updated.append(op.item_id)
                    await log_event(conn, "update", op.item_id, session_id,
                                    {"source": source, "old": old, "new": op.text}, now)
            elif isinstance(op, DeactivateOp):
                if await _still_active(conn, op.item_id):
                    await conn.execute(sa.update(mind).where(mind.c.id == op.item_id).values(active=False))
                    done.deactivated.append(op.item_id)
                    await log_event(conn, "deactivate", op.item_id, session_id,
                                    {"source": source, "reason": op.reason}, now)
            elif isinstance(op, SetMoodOp):
                stmt = store.upsert(schema.kv).values(key=MOOD_KV, value=op.mood.model_dump(), updated=now)
                await conn.execute(stmt.on_conflict_do_update(
                    index_elements=["key"], set_={"value": stmt.excluded.value, "updated": stmt.excluded.updated}))
                done.mood = op.mood.feeling
                await log_event(conn, "mood", None, session_id,
                                {"source": source, "feeling": op.mood.feeling, "valence": op.mood.valence}, now)
    return done
