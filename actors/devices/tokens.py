"""Pairing codes, device tokens and session tokens: made with `secrets`, stored only as SHA-256."""

from __future__ import annotations

import secrets

from actors.common.hashing import sha256_hex as sha256

DEVICE_TOKEN_PREFIX = "irad_"
SESSION_TOKEN_PREFIX = "irss_"
# No 0/O or 1/I: a code is read off one screen and typed on another.
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8


def new_device_token() -> str:
    """`irad_` and 32 random bytes (URL-safe base64)."""
    return DEVICE_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_session_token() -> str:
    return SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_code() -> str:
    """Eight characters, shown as ABCD-EFGH."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    return f"{raw[:4]}-{raw[4:]}"


def normalize_code(code: str) -> str:
    """What is hashed: upper case, with the dash and spaces (and a pasted link's prefix) gone."""
    if "code=" in code:
        code = code.rsplit("code=", 1)[1]
    return "".join(ch for ch in code.upper() if ch.isalnum())


def code_hash(code: str) -> str:
    return sha256(normalize_code(code))


def pair_link(base_url: str, code: str) -> str:
    return f"{base_url.rstrip('/')}/pair#code={normalize_code(code)}"
