"""Devices in the store: pairing codes, devices and their tokens, wrong-code counts, events,
and whose conversation is whose."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from pydantic import BaseModel

from actors.devices.people import OWNER_ID, log_change
from actors.devices.settings import DeviceLimits
from actors.devices.tokens import code_hash, new_code, new_device_token, sha256
from actors.store import schema
from actors.store.models import HEALTH_CHANNEL, ConversationRecord
from actors.store.store import Store

MAX_CODE_DAYS = 14
MAX_CODE_USES = 10


class Device(BaseModel):
    id: int
    person_id: int
    kind: str
    label: str
    skills: list[str]
    reported: list[str]
    created: float
    last_seen: float | None
    revoked: float | None

    def public(self, online: bool | None = None) -> dict[str, Any]:
        out = self.model_dump()
        out["off"] = sorted(set(self.reported) - set(self.skills))
        if online is not None:
            out["online"] = online
        return out


class PairOutcome(BaseModel):
    device: Device | None = None
    token: str | None = None
    error: str | None = None  # "gone" (used, expired or unknown)


def _device(row: Any) -> Device:
    return Device(**{k: row[k] for k in Device.model_fields})


async def make_code(store: Store, person_id: int, kind: str, label: str, skills: list[str],
                    seconds: float, uses: int = 1, actor: str | None = None) -> tuple[str, float]:
    """A fresh code (shown once) and its expiry; only its hash is stored. An `actor` writes the
    change log (long-lived codes from the operator's command line)."""
    code = new_code()
    now = time.time()
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(schema.pairing_codes).values(
            code_hash=code_hash(code), person_id=person_id, kind=kind, label=label, skills=skills,
            uses_left=uses, expires=now + seconds, created=now))
    if actor:
        await log_change(store, actor, "pairing_code_made", {
            "person": person_id, "kind": kind, "skills": skills, "uses": uses, "expires": now + seconds})
    return code, now + seconds


async def pair(store: Store, code: str, kind: str) -> PairOutcome:
    """Spend one use of a code and make the device; `gone` for a used, expired or unknown code.
    The use is taken with a conditional UPDATE so two devices racing for the last use cannot
    both win."""
    hashed = code_hash(code)
    now = time.time()
    async with store.engine.begin() as conn:
        row = (await conn.execute(sa.select(schema.pairing_codes).where(
            schema.pairing_codes.c.code_hash == hashed))).mappings().first()
        if row is None or row["expires"] <= now or row["uses_left"] <= 0:
            return PairOutcome(error="gone")
        if row["kind"] != kind:
            return PairOutcome(error="kind")
        taken = (await conn.execute(sa.update(schema.pairing_codes).where(
            (schema.pairing_codes.c.code_hash == hashed) & (schema.pairing_codes.c.uses_left > 0))
            .values(uses_left=schema.pairing_codes.c.uses_left - 1))).rowcount
        if not taken:
            return PairOutcome(error="gone")
        token = new_device_token()
        device_id = (await conn.execute(sa.insert(schema.devices).values(
            person_id=row["person_id"], kind=kind, label=row["label"], token_hash=sha256(token),
            skills=list(row["skills"]), reported=[], created=now).returning(schema.devices.c.id))).scalar_one()
    device = await get_device(store, device_id)
    assert device is not None
    return PairOutcome(device=device, token=token)


async def get_device(store: Store, device_id: int) -> Device | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(schema.devices).where(schema.devices.c.id == device_id))).mappings().first()
    return _device(row) if row else None


async def device_by_token(store: Store, token: str) -> Device | None:
    """The live (unrevoked) device this token belongs to, checked on every use."""
    if not token:
        return None
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(schema.devices).where(
            (schema.devices.c.token_hash == sha256(token)) & schema.devices.c.revoked.is_(None)))).mappings().first()
    return _device(row) if row else None


async def list_devices(store: Store, person_id: int | None = None, include_revoked: bool = False) -> list[Device]:
    query = sa.select(schema.devices).order_by(schema.devices.c.id)
    if person_id is not None:
        query = query.where(schema.devices.c.person_id == person_id)
    if not include_revoked:
        query = query.where(schema.devices.c.revoked.is_(None))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [_device(r) for r in rows]


async def revoke(store: Store, device_id: int, actor: str) -> bool:
    async with store.engine.begin() as conn:
        done = (await conn.execute(sa.update(schema.devices).where(
            (schema.devices.c.id == device_id) & schema.devices.c.revoked.is_(None)).values(revoked=time.time()))).rowcount
    if done:
        await log_change(store, actor, "device_revoked", {"device": device_id})
    return bool(done)


async def set_skills(store: Store, device_id: int, skills: list[str]) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.devices).where(schema.devices.c.id == device_id).values(skills=sorted(set(skills))))


async def seen(store: Store, device_id: int, reported: list[str] | None = None) -> None:
    values: dict[str, Any] = {"last_seen": time.time()}
    if reported is not None:
        values["reported"] = reported
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.devices).where(schema.devices.c.id == device_id).values(**values))


# -- events -----------------------------------------------------------------------------------

async def add_event(store: Store, person_id: int, device_id: int | None, event: dict[str, Any],
                    limits: DeviceLimits) -> dict[str, Any]:
    """Keep the event; older than seven days, or past the newest 200 of the person, goes."""
    now = time.time()
    async with store.engine.begin() as conn:
        event_id = (await conn.execute(sa.insert(schema.device_events).values(
            person_id=person_id, device_id=device_id, event=event["event"], title=event["title"],
            text=event["text"], data=event.get("data") or {}, ts=now).returning(schema.device_events.c.id))).scalar_one()
        t = schema.device_events
        await conn.execute(sa.delete(t).where(t.c.ts < now - limits.event_keep_seconds))
        keep = sa.select(t.c.id).where(t.c.person_id == person_id).order_by(t.c.id.desc()).limit(limits.events_per_person)
        await conn.execute(sa.delete(t).where((t.c.person_id == person_id) & t.c.id.not_in(keep.scalar_subquery())))
    return {"id": event_id, "person_id": person_id, "device_id": device_id, "ts": now, **event}


async def list_events(store: Store, person_id: int, after: int = 0, limit: int = 200) -> list[dict[str, Any]]:
    t = schema.device_events
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(t).where(
            (t.c.person_id == person_id) & (t.c.id > after)).order_by(t.c.id.desc()).limit(limit))).mappings().all()
    return [dict(r) for r in reversed(rows)]


# -- whose conversation -------------------------------------------------------------------------

async def claim_conversation(store: Store, conversation_id: str, person_id: int, device_id: int | None) -> None:
    stmt = store.upsert(schema.conversation_people).values(
        conversation_id=conversation_id, person_id=person_id, device_id=device_id)
    stmt = stmt.on_conflict_do_update(index_elements=["conversation_id"], set_={"device_id": device_id})
    async with store.engine.begin() as conn:
        await conn.execute(stmt)


async def conversation_person(store: Store, conversation_id: str,
                              conn: AsyncConnection | None = None) -> tuple[int, int | None]:
    """(person, device that asked last); conversations nobody claimed are the owner's."""
    async with store.reading(conn) as conn:
        row = (await conn.execute(sa.select(schema.conversation_people).where(
            schema.conversation_people.c.conversation_id == conversation_id))).mappings().first()
    return (row["person_id"], row["device_id"]) if row else (OWNER_ID, None)


async def person_conversations(store: Store, person_id: int, limit: int = 50) -> list[ConversationRecord]:
    """A person's own conversations, newest first. Conversations nobody claimed are the
    owner's; health-check sessions are nobody's."""
    conv, claims = schema.conversations, schema.conversation_people
    whose = claims.c.person_id == person_id
    if person_id == OWNER_ID:
        whose = whose | claims.c.person_id.is_(None)
    query = (sa.select(conv).select_from(conv.outerjoin(claims, claims.c.conversation_id == conv.c.id))
             .where(whose, conv.c.channel != HEALTH_CHANNEL).order_by(conv.c.updated.desc()).limit(limit))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [ConversationRecord(**r) for r in rows]
