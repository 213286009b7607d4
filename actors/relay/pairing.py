"""The pairing token: `<blob>.<uid>.<key>`.

The blob is base64url JSON naming where the host listens (candidate addresses for the TLS
listener, and the host's own plain port, so `connect` on the same machine can skip the tunnel)
and the SHA-256 fingerprint of the host's certificate, which is what makes the wire trustworthy
without any certificate authority. Holding the token is being in the session.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets

from pydantic import BaseModel, Field, ValidationError

from actors.common.errors import IriisError

_UID = re.compile(r"[0-9a-f]{16}")
_KEY = re.compile(r"[A-Za-z0-9_-]{16,128}")
_FP = re.compile(r"[0-9a-f]{64}")


class TokenError(IriisError, ValueError):
    """The string is not a pairing token; the message says which part is wrong."""

    code = "invalid_token"


class Blob(BaseModel):
    v: int = 1
    addrs: list[str] = Field(min_length=1)  # "host:port" of the TLS listener, best first
    fp: str  # hex SHA-256 of the host certificate (DER)
    local: int | None = None  # the host's plain localhost port


class PairingToken(BaseModel):
    blob: Blob
    uid: str
    key: str

    def encode(self) -> str:
        raw = json.dumps(self.blob.model_dump(exclude_none=True), separators=(",", ":")).encode()
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return f"{text}.{self.uid}.{self.key}"


def new_uid() -> str:
    return secrets.token_hex(8)


def new_key() -> str:
    # URL-safe base64 has no dots, so the key is always the token's last field.
    return secrets.token_urlsafe(24)


def decode(token: str) -> PairingToken:
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise TokenError("a pairing token has three parts separated by dots")
    blob_text, uid, key = parts
    if not _UID.fullmatch(uid):
        raise TokenError("the session id in the token is malformed")
    if not _KEY.fullmatch(key):
        raise TokenError("the key in the token is malformed")
    try:
        raw = base64.urlsafe_b64decode(blob_text + "=" * (-len(blob_text) % 4))
        blob = Blob.model_validate(json.loads(raw))
    except (binascii.Error, ValueError, ValidationError):
        raise TokenError("the connection blob in the token is malformed") from None
    if not _FP.fullmatch(blob.fp):
        raise TokenError("the certificate fingerprint in the token is malformed")
    return PairingToken(blob=blob, uid=uid, key=key)
