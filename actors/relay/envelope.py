"""What a client may post, and the envelope the relay stamps around it.

The relay owns `seq` and `ts`; a client owns `message` and `metadata`, which pass through
untouched once they are valid (unknown part types and metadata keys included), so agents on
other harnesses can extend the format without asking us.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from actors.relay.errors import RelayError

NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
RELAY_NAME = "iris"  # system messages are signed with the original's name; clients match on it
CLIENT_ROLES = ("assistant", "user")


def iso_utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_of(ts: str) -> float:
    """The inverse of iso_utc (whole seconds)."""
    return dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()


def drew_from_rate(envelope: dict[str, Any]) -> bool:
    """Whether appending this envelope spent a write from the session's rate: every client
    message and every upload; the relay's own notices do not."""
    if envelope.get("message", {}).get("role") != "system":
        return True
    return envelope.get("metadata", {}).get("event") == "file_uploaded"


def _bad(message: str) -> RelayError:
    return RelayError("invalid_request", message)


def _check_part(index: int, part: Any) -> None:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str) or not part["type"]:
        raise _bad(f"message.content[{index}] must be an object with a string type")
    if part["type"] == "text" and not isinstance(part.get("text"), str):
        raise _bad(f"message.content[{index}].text must be a string")
    if part["type"] == "file":
        ref = part.get("file")
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
            raise _bad(f"message.content[{index}].file must be an object with a name")
        if "seq" in ref and (not isinstance(ref["seq"], int) or isinstance(ref["seq"], bool)):
            raise _bad(f"message.content[{index}].file.seq must be an integer")


def validate_post(raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse and check a POST body; returns (message, metadata) or raises invalid_request."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _bad("the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _bad("the body must be a JSON object with a message")
    message = body.get("message")
    if not isinstance(message, dict):
        raise _bad("message is required and must be an object")
    role = message.get("role")
    if role == "system":
        raise _bad("role system belongs to the relay; use assistant or user")
    if role not in CLIENT_ROLES:
        raise _bad("message.role must be assistant or user")
    name = message.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _bad("message.name must match [A-Za-z0-9._-]{1,64}")
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            raise _bad("message.content must not be empty")
    elif isinstance(content, list):
        if not content:
            raise _bad("message.content must not be an empty list")
        for i, part in enumerate(content):
            _check_part(i, part)
    else:
        raise _bad("message.content must be a string or a list of parts")
    metadata = body.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise _bad("metadata must be an object")
    if "urgent" in metadata and not isinstance(metadata["urgent"], bool):
        raise _bad("metadata.urgent must be true or false")
    if "attn" in metadata and not isinstance(metadata["attn"], str):
        raise _bad("metadata.attn must be a string")
    reply_to = metadata.get("reply_to")
    if reply_to is not None and (not isinstance(reply_to, int) or isinstance(reply_to, bool)):
        raise _bad("metadata.reply_to must be a seq (an integer)")
    return message, metadata


def stamp(seq: int, now: float, message: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    return {"seq": seq, "ts": iso_utc(now), "message": message, "metadata": metadata}


def system_message(content: str, event: str, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A relay-authored (message, metadata) pair; seq and ts come when it is appended."""
    return ({"role": "system", "name": RELAY_NAME, "content": content}, {"event": event, **extra})


def is_urgent(envelope: dict[str, Any]) -> bool:
    return envelope.get("metadata", {}).get("urgent") is True


def encoded_size(envelope: dict[str, Any]) -> int:
    """Bytes the envelope takes in storage; counts toward the storage cap."""
    return len(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode())
