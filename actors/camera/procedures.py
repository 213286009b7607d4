"""Procedures in the store: the owner defines them once and picks one per camera stream."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from actors.store import schema
from actors.store.store import Store
from vision.procedure import ProcedureCreate


async def create(store: Store, procedure: ProcedureCreate) -> int:
    async with store.engine.begin() as conn:
        return (await conn.execute(sa.insert(schema.procedures).values(
            name=procedure.name, body=procedure.model_dump(mode="json"), created=time.time())
            .returning(schema.procedures.c.id))).scalar_one()


async def get(store: Store, procedure_id: int) -> ProcedureCreate | None:
    async with store.engine.connect() as conn:
        body = (await conn.execute(sa.select(schema.procedures.c.body)
                                   .where(schema.procedures.c.id == procedure_id))).scalar_one_or_none()
    return ProcedureCreate.model_validate(body) if body is not None else None


async def list_all(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    query = sa.select(schema.procedures).order_by(schema.procedures.c.id.desc()).limit(limit)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [{"id": r["id"], "created": r["created"], **r["body"]} for r in rows]


async def delete(store: Store, procedure_id: int) -> bool:
    async with store.engine.begin() as conn:
        result = await conn.execute(sa.delete(schema.procedures).where(schema.procedures.c.id == procedure_id))
    return result.rowcount > 0
