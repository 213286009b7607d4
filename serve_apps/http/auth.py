"""Owner authentication: bearer header, ?token= (for WebSockets) or the page's HTTP-only cookie.

Keys are compared by SHA-256 digest, so the gateway never holds a raw key it did not receive.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from starlette.requests import HTTPConnection

from actors.common.hashing import sha256_hex

COOKIE_NAME = "iriis_key"
KEY_PREFIX = "iriis_"


def hash_key(key: str) -> str:
    return sha256_hex(key.strip())


def new_owner_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def presented_key(request: HTTPConnection, cookie: bool = True) -> str | None:
    """The bearer header, else `?token=`, else (when `cookie`) the page's cookie. Devices pass
    cookie=False: a browser's cookie must never open a device socket."""
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer " and header[7:].strip():
        return header[7:].strip()
    token = request.query_params.get("token")
    if token:
        return token.strip()
    value = request.cookies.get(COOKIE_NAME) if cookie else None
    return value.strip() if value else None


def key_matches(key: str | None, hashes: frozenset[str]) -> bool:
    if not key:
        return False
    digest = hash_key(key)
    # Constant-time against each accepted digest; the list is short (one per integration).
    return any(hmac.compare_digest(digest, h) for h in hashes)


# -- the owner's stored keys: labels, last use, revocation without a restart -----------------

# The store's key-value entries: the key records ({id, label, hash, created}) and, written only
# by the server, when each was last used ({hash: time}), so a CLI write never races the server's.
KEY_RECORDS_KV = "owner_keys"
KEY_LAST_USED_KV = "owner_keys_last_used"
# How stale the server's copy of the stored keys may be: a revoke takes effect within this.
REFRESH_SECONDS = 2.0
# Last use is written back at most this often per key.
LAST_USED_WRITE_SECONDS = 60.0
MAX_LABEL = 80


def key_records(stored: Any, legacy_hashes: list[str]) -> list[dict[str, Any]]:
    """The stored key records, with keys from before labels existed (bare hashes in the old
    entry) given a plain label. Pure: the caller reads and writes the store."""
    records = [dict(r) for r in (stored or []) if isinstance(r, dict) and r.get("hash")]
    known = {r["hash"] for r in records}
    next_id = max([int(r.get("id", 0)) for r in records] + [0]) + 1
    for digest in legacy_hashes or []:
        if digest not in known:
            records.append({"id": next_id, "label": f"key {next_id}", "hash": digest, "created": 0.0})
            known.add(digest)
            next_id += 1
    return records


def add_key_record(records: list[dict[str, Any]], key: str, label: str, now: float) -> dict[str, Any]:
    """Append a record for `key` (its hash only) and return it."""
    label = " ".join((label or "").split())[:MAX_LABEL] or "key"
    record = {"id": max([int(r.get("id", 0)) for r in records] + [0]) + 1, "label": label,
              "hash": hash_key(key), "created": now}
    records.append(record)
    return record


def public_key_record(record: dict[str, Any], last_used: dict[str, float], current: str | None) -> dict[str, Any]:
    """A record as the owner sees it: never the hash, with last use and whether it is this one."""
    digest = record["hash"]
    return {"id": int(record["id"]), "label": record.get("label", ""), "created": record.get("created") or None,
            "last_used": last_used.get(digest), "current": bool(current) and hash_key(current) == digest,
            "revocable": True}


class KeyRing:
    """The keys a replica accepts: fixed ones (IRIIS_OWNER_KEYS and the run's internal key) and
    the stored ones, reloaded at most every REFRESH_SECONDS. Pure bookkeeping; the context
    does the store reads and writes."""

    def __init__(self, fixed: frozenset[str]) -> None:
        self.fixed = fixed
        self.stored: frozenset[str] = frozenset()
        self.loaded_at = float("-inf")
        self.used: dict[str, float] = {}
        self.written: dict[str, float] = {}

    def load(self, hashes: list[str], now: float) -> None:
        self.stored = frozenset(hashes)
        self.loaded_at = now

    def stale(self, now: float) -> bool:
        return now - self.loaded_at >= REFRESH_SECONDS

    @property
    def hashes(self) -> frozenset[str]:
        return self.fixed | self.stored

    def check(self, key: str | None, now: float) -> bool:
        """Whether `key` is accepted; a stored key's use is noted for `due_writes`."""
        if not key_matches(key, self.hashes):
            return False
        digest = hash_key(key or "")
        if digest in self.stored:
            self.used[digest] = now
        return True

    def due_writes(self, now: float) -> dict[str, float]:
        """Last uses worth writing back (new, or older than LAST_USED_WRITE_SECONDS in the store)."""
        due = {h: t for h, t in self.used.items() if t - self.written.get(h, float("-inf")) >= LAST_USED_WRITE_SECONDS}
        self.written.update(due)
        return due


# The store's older entry: a bare list of stored key hashes (kept in step for older readers).
LEGACY_HASHES_KV = "owner_key_hashes"


async def load_key_records(store: Any) -> list[dict[str, Any]]:
    return key_records(await store.get_kv(KEY_RECORDS_KV, []), await store.get_kv(LEGACY_HASHES_KV, []))


async def save_key_records(store: Any, records: list[dict[str, Any]]) -> None:
    await store.set_kv(KEY_RECORDS_KV, records)
    await store.set_kv(LEGACY_HASHES_KV, sorted(r["hash"] for r in records))


async def create_key(store: Any, label: str, now: float) -> tuple[str, dict[str, Any]]:
    """A new owner key (returned once) and its stored record."""
    records = await load_key_records(store)
    key = new_owner_key()
    record = add_key_record(records, key, label, now)
    await save_key_records(store, records)
    return key, record


async def revoke_key(store: Any, key_id: int) -> bool:
    """Drop a stored key; False when there is no such key."""
    records = await load_key_records(store)
    kept = [r for r in records if int(r["id"]) != key_id]
    if len(kept) == len(records):
        return False
    await save_key_records(store, kept)
    return True
