"""Owner authentication: bearer header, ?token= (for WebSockets) or the page's HTTP-only cookie.

Keys are compared by SHA-256 digest, so the gateway never holds a raw key it did not receive.
"""

from __future__ import annotations

import hmac
import secrets

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
