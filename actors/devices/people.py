"""People: the owner (person 1, signed in by owner keys) and the others the operator adds.

Passwords and PINs are kept as salted scrypt hashes; the owner's PIN stays in kv where the turn
pipeline reads it, so `iriis pin set` and `iriis pin set --user <owner>` mean the same thing.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel

from actors.devices.grants import ROLES
from actors.common.hashing import hash_password, hash_pin, sha256_hex as sha256, verify_secret_async
from actors.devices.tokens import new_session_token
from actors.store import schema
from actors.store.store import Store

OWNER_ID = 1
OWNER_PIN_KV = "owner_pin_hash"
SESSION_SECONDS = 30 * 24 * 3600.0


class Person(BaseModel):
    id: int
    email: str | None
    role: str
    created: float

    def public(self) -> dict[str, Any]:
        return self.model_dump()




def _person(row: Any) -> Person:
    return Person(id=row["id"], email=row["email"], role=row["role"], created=row["created"])


async def get_person(store: Store, person_id: int) -> Person | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(schema.people).where(schema.people.c.id == person_id))).mappings().first()
    return _person(row) if row else None


async def person_by_email(store: Store, email: str) -> Person | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(schema.people).where(
            sa.func.lower(schema.people.c.email) == email.strip().lower()))).mappings().first()
    return _person(row) if row else None


async def list_people(store: Store) -> list[Person]:
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(schema.people).order_by(schema.people.c.id))).mappings().all()
    return [_person(r) for r in rows]


async def add_person(store: Store, email: str, role: str, password: str) -> Person:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    email = email.strip().lower()
    if "@" not in email or len(email) > 254:
        raise ValueError("that is not an email address")
    if await person_by_email(store, email) is not None:
        raise ValueError(f"{email} already has an account")
    hashed = hash_password(password)
    async with store.engine.begin() as conn:
        result = await conn.execute(sa.insert(schema.people).values(
            email=email, role=role, password_hash=hashed, created=time.time()).returning(schema.people.c.id))
        person_id = result.scalar_one()
    await log_change(store, "operator", "person_added", {"person": person_id, "email": email, "role": role})
    person = await get_person(store, person_id)
    assert person is not None
    return person


async def remove_person(store: Store, person_id: int, actor: str) -> bool:
    """Remove a person; their devices are revoked first (the caller closes live connections)."""
    if person_id == OWNER_ID:
        raise ValueError("the owner cannot be removed")
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.devices).where(
            (schema.devices.c.person_id == person_id) & schema.devices.c.revoked.is_(None)).values(revoked=time.time()))
        gone = (await conn.execute(sa.delete(schema.people).where(schema.people.c.id == person_id))).rowcount
    if gone:
        await log_change(store, actor, "person_removed", {"person": person_id})
    return bool(gone)


async def set_pin(store: Store, person_id: int, pin: str) -> None:
    stored = hash_pin(pin)
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.people).where(schema.people.c.id == person_id).values(pin_hash=stored))
    if person_id == OWNER_ID:
        await store.set_kv(OWNER_PIN_KV, stored)


async def check_pin(store: Store, person_id: int, pin: str | None) -> str | None:
    """None when the PIN is right, else an error code: pin_required, pin_not_set, wrong_pin."""
    if not pin:
        return "pin_required"
    if person_id == OWNER_ID:
        stored = await store.get_kv(OWNER_PIN_KV)
    else:
        async with store.engine.connect() as conn:
            stored = (await conn.execute(sa.select(schema.people.c.pin_hash).where(
                schema.people.c.id == person_id))).scalar()
    if not stored:
        return "pin_not_set"
    return None if await verify_secret_async(pin, stored) else "wrong_pin"


async def sign_in(store: Store, email: str, password: str) -> tuple[Person, str] | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(schema.people).where(
            sa.func.lower(schema.people.c.email) == email.strip().lower()))).mappings().first()
    if row is None or not await verify_secret_async(password, row["password_hash"]):
        return None
    token = new_session_token()
    now = time.time()
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(schema.person_sessions).values(
            token_hash=sha256(token), person_id=row["id"], created=now, expires=now + SESSION_SECONDS))
    return _person(row), token


async def session_person(store: Store, token: str) -> Person | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(
            sa.select(schema.people).join(schema.person_sessions,
                                          schema.person_sessions.c.person_id == schema.people.c.id)
            .where((schema.person_sessions.c.token_hash == sha256(token))
                   & (schema.person_sessions.c.expires > time.time())))).mappings().first()
    return _person(row) if row else None


async def sign_out(store: Store, token: str) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.delete(schema.person_sessions).where(schema.person_sessions.c.token_hash == sha256(token)))


async def log_change(store: Store, actor: str, action: str, detail: dict[str, Any]) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(schema.change_log).values(ts=time.time(), actor=actor, action=action,
                                                               detail=detail))


async def list_changes(store: Store, limit: int = 100) -> list[dict[str, Any]]:
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(schema.change_log).order_by(schema.change_log.c.id.desc())
                                   .limit(limit))).mappings().all()
    return [dict(r) for r in rows]
