"""Hashes the house keeps instead of secrets.

Secrets people choose (PINs, passwords) are stored as salted scrypt hashes. Secrets the server
makes (owner keys, device and session tokens, pairing codes, relay keys) are long and random,
so a plain SHA-256 digest is enough and lets the store look them up by hash.

scrypt is deliberately slow (tens of milliseconds): async callers use `verify_secret_async`
so an event loop never stalls on it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets

_N, _R, _P = 2**14, 8, 1
SCHEME = "scrypt"


def sha256_hex(value: str) -> str:
    """The digest a random token is stored and looked up by."""
    return hashlib.sha256(value.encode()).hexdigest()


def hash_secret(secret: str) -> str:
    """`scrypt$<salt>$<digest>` for a secret a person chose."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=_N, r=_R, p=_P)
    return f"{SCHEME}${salt.hex()}${digest.hex()}"


def verify_secret(secret: str, stored: str | None) -> bool:
    """Constant-time check of a secret against its stored hash; a malformed hash is a no."""
    if not stored:
        return False
    try:
        scheme, salt_hex, digest_hex = stored.split("$")
        salt = bytes.fromhex(salt_hex)
    except ValueError:
        return False
    if scheme != SCHEME:
        return False
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=_N, r=_R, p=_P)
    return hmac.compare_digest(digest.hex(), digest_hex)


async def verify_secret_async(secret: str, stored: str | None) -> bool:
    """`verify_secret` in a worker thread: scrypt must not block the event loop."""
    return await asyncio.to_thread(verify_secret, secret, stored)


def hash_pin(pin: str) -> str:
    """An action PIN: 4 to 12 digits."""
    if not pin.isdigit() or not 4 <= len(pin) <= 12:
        raise ValueError("a PIN is 4 to 12 digits")
    return hash_secret(pin)


def verify_pin(pin: str, stored: str | None) -> bool:
    return verify_secret(pin, stored)


def hash_password(password: str) -> str:
    if len(password) < 8:
        raise ValueError("a password has at least 8 characters")
    return hash_secret(password)

