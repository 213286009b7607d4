"""Web Push: the VAPID key pair (made once, kept in the database), the browsers' subscriptions,
and one encrypted request per subscription (pywebpush's aes128gcm encoder, py_vapid's JWT).

The JWT's audience is the push service's origin and it expires 12 hours after it is signed,
inside the 24 hours push services accept.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import BaseModel, Field
from py_vapid import Vapid02
from pywebpush import WebPusher

from actors.notify.channels import HttpRequest, Notice, origin, push_payload, push_urgency
from actors.store import schema
from actors.store.store import Store

VAPID_KV = "vapid_keys"
JWT_SECONDS = 12 * 3600
S = schema.push_subscriptions


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class VapidKeys(BaseModel):
    # The private scalar (32 bytes) and the uncompressed public point (65 bytes), urlsafe
    # base64 without padding: the public one is the browser's applicationServerKey.
    private: str
    public: str


def new_vapid_keys() -> VapidKeys:
    key = ec.generate_private_key(ec.SECP256R1())
    raw = key.private_numbers().private_value.to_bytes(32, "big")
    public = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return VapidKeys(private=b64url(raw), public=b64url(public))


async def vapid_keys(store: Store) -> VapidKeys:
    """The server's key pair, made on first use. Two processes racing keep the first one written
    (insert-if-absent), so every subscription stays valid."""
    found = await store.get_kv(VAPID_KV)
    if found:
        return VapidKeys(**found)
    fresh = new_vapid_keys()
    stmt = store.upsert(schema.kv).values(key=VAPID_KV, value=fresh.model_dump(), updated=time.time())
    async with store.engine.begin() as conn:
        await conn.execute(stmt.on_conflict_do_nothing(index_elements=["key"]))
    return VapidKeys(**await store.get_kv(VAPID_KV))


# -- subscriptions -------------------------------------------------------------------------------

class SubscriptionKeys(BaseModel):
    p256dh: str = Field(min_length=16, max_length=200)
    auth: str = Field(min_length=8, max_length=100)


class Subscription(BaseModel):
    id: int
    person_id: int = 1
    endpoint: str
    p256dh: str
    auth: str
    created: float
    last_ok: float | None = None

    def info(self) -> dict[str, Any]:
        """The browser's PushSubscription JSON, as pywebpush takes it."""
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


def check_keys(keys: SubscriptionKeys) -> str | None:
    """Why the browser's keys cannot be used, or None: p256dh is a P-256 point, auth 16 bytes."""
    try:
        point = b64url_decode(keys.p256dh)
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        secret = b64url_decode(keys.auth)
    except (ValueError, TypeError):
        return "keys.p256dh must be a P-256 public key and keys.auth 16 bytes, urlsafe base64"
    if len(secret) != 16:
        return "keys.auth must be 16 bytes, urlsafe base64"
    return None


async def add_subscription(store: Store, endpoint: str, keys: SubscriptionKeys, person_id: int = 1,
                           now: float | None = None) -> Subscription:
    """Keep a browser's subscription; the same endpoint again replaces its keys."""
    values = {"person_id": person_id, "endpoint": endpoint, "p256dh": keys.p256dh, "auth": keys.auth,
              "created": now or time.time()}
    stmt = store.upsert(S).values(**values)
    stmt = stmt.on_conflict_do_update(index_elements=["endpoint"],
                                      set_={"p256dh": stmt.excluded.p256dh, "auth": stmt.excluded.auth,
                                            "person_id": stmt.excluded.person_id})
    async with store.engine.begin() as conn:
        await conn.execute(stmt)
        row = (await conn.execute(sa.select(S).where(S.c.endpoint == endpoint))).mappings().one()
    return Subscription(**row)


async def list_subscriptions(store: Store, person_id: int | None = 1) -> list[Subscription]:
    query = sa.select(S).order_by(S.c.id)
    if person_id is not None:
        query = query.where(S.c.person_id == person_id)
    async with store.engine.connect() as conn:
        return [Subscription(**r) for r in (await conn.execute(query)).mappings().all()]


async def get_subscription(store: Store, sub_id: int) -> Subscription | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(S).where(S.c.id == sub_id))).mappings().first()
    return Subscription(**row) if row else None


async def delete_subscription(store: Store, sub_id: int) -> bool:
    async with store.engine.begin() as conn:
        return (await conn.execute(sa.delete(S).where(S.c.id == sub_id))).rowcount > 0


async def subscription_ok(store: Store, sub_id: int, now: float) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(S).where(S.c.id == sub_id).values(last_ok=now))


# -- the request ---------------------------------------------------------------------------------

def vapid_claims(endpoint: str, subject: str, now: float) -> dict[str, Any]:
    return {"aud": origin(endpoint), "exp": int(now) + JWT_SECONDS, "sub": subject}


def push_request(sub: Subscription, keys: VapidKeys, subject: str, notice: Notice, now: float) -> HttpRequest:
    """The encrypted POST to the subscription's endpoint, signed with the server's VAPID key."""
    body = WebPusher(sub.info()).encode(push_payload(notice), "aes128gcm")["body"]
    signer = Vapid02.from_raw(keys.private.encode())
    headers = {**signer.sign(vapid_claims(sub.endpoint, subject, now)),
               "Content-Encoding": "aes128gcm", "Content-Type": "application/octet-stream",
               "TTL": str(notice.ttl), "Urgency": push_urgency(notice)}
    if notice.sequence_id:
        # A later push with the same topic replaces this one while it waits undelivered.
        headers["Topic"] = f"iriis-{notice.sequence_id}"[:32]
    return HttpRequest(method="POST", url=sub.endpoint, headers=headers, content=body)
