"""Pydantic records that cross the store boundary (and Ray, by value)."""

from __future__ import annotations

import os
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["user", "assistant", "system", "tool"]


def new_id() -> str:
    """A time-ordered 32-hex id: sortable like the rows it names, unique without the database."""
    return f"{time.time_ns():016x}{os.urandom(8).hex()}"


class MessageRecord(BaseModel):
    id: str = Field(default_factory=new_id)
    conversation_id: str
    seq: int
    role: Role
    content: str
    meta: dict[str, Any] | None = None
    created: float = Field(default_factory=time.time)


# A monitor's probe: its turns run for real, but it is not the owner talking, so nothing is
# learned from it and it stays out of the conversation list, exports and activity figures.
HEALTH_CHANNEL = "health"


class ConversationRecord(BaseModel):
    id: str
    title: str = ""
    channel: str = "chat"
    summary: str = ""
    summary_upto: int = 0
    # The untrusted sources the summary was folded from; empty when it was all the owner's.
    summary_sources: list[str] | None = None
    created: float = Field(default_factory=time.time)
    updated: float = Field(default_factory=time.time)


class FileRecord(BaseModel):
    id: int
    conversation_id: str | None
    name: str
    mime: str
    size: int
    sha256: str
    created: float


class AuditEntry(BaseModel):
    ts: float = Field(default_factory=time.time)
    session_id: str | None = None
    tool: str
    arguments: dict[str, Any] | None = None
    tier: str = "auto"
    confirmed: bool | None = None
    result: str | None = None
    error: str | None = None
    duration_ms: float = 0.0
    # The turn had read something untrusted when the call was decided, and what it was.
    tainted: bool = False
    sources: list[str] | None = None


class OutboxItem(BaseModel):
    id: int | None = None
    ts: float = Field(default_factory=time.time)
    kind: str
    session_id: str | None = None
    title: str
    body: str
    data: dict[str, Any] | None = None
    status: str = "queued"
    delivered_at: float | None = None
    # Delivery (actors/notify/outbox.py): passes tried, when the next is due, why it failed or
    # is still waiting, and each channel's state ("sent", "gone", "failed: ...", "retry: ...").
    attempts: int = 0
    next_try: float | None = None
    reason: str | None = None
    channels: dict[str, str] | None = None
