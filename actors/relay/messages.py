"""What crosses the RelayActor's boundary, typed: envelopes, reads, file records, replies, and
the one error shape (`RelayFault`, an `ErrorInfo` plus the rate limit's retry-after).

Dumped with `model_dump()` each reply is exactly the JSON of the iris contract
(/work/shared/spec/relay.md), so the HTTP app serializes models and the wire does not change.
Inside a session's core, envelopes stay plain dicts: they are the stored JSON, and a client's
`message` and `metadata` pass through untouched.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field

from actors.common.errors import ErrorInfo


class Envelope(BaseModel):
    """One message as the relay stores and serves it: `seq` and `ts` are the relay's."""

    seq: int
    ts: str
    message: dict[str, Any]
    metadata: dict[str, Any]


class Post(BaseModel):
    """A client's message on its way to the session's actor; `now` is the app's clock."""

    message: dict[str, Any]
    metadata: dict[str, Any]
    now: float
    # Made once by the app; the same post sent again (its actor died as it committed) keeps it.
    token: str = Field(default_factory=lambda: uuid.uuid4().hex)


class Batch(BaseModel):
    """A read or a woken wait: messages in seq order and the session's head."""

    messages: list[Envelope]
    last_seq: int


class FileRecord(BaseModel):
    name: str
    size: int
    content_type: str
    seq: int
    uploaded_at: str

    def public(self) -> dict[str, Any]:
        return self.model_dump()


class FileList(BaseModel):
    files: list[FileRecord]


class FileFound(BaseModel):
    """A stored file and where its bytes are (the path never leaves the host)."""

    file: FileRecord
    path: str


class Terminated(BaseModel):
    status: Literal["read-only"] = "read-only"
    purge_at: str


class Swept(BaseModel):
    phase: str


class SessionCreated(BaseModel):
    uid: str
    url: str
    key: str
    created_at: str
    limits: dict[str, Any]
    # Not in the original's reply; clients ignore unknown fields, and our agent needs it.
    token: str | None = None

    def public(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class RelayFault(BaseModel):
    """A refusal or a fault, as it crosses from the actor to the service."""

    error: ErrorInfo
    retry_after: int | None = None
