"""A relay session's life, as pure functions of its record and the time.

Active until `inactivity_ttl_seconds` pass without a client write (reads never count, or a
background /wait would keep a session alive forever), or until /terminate; then read-only for
`grace_seconds`; then purged. Nothing here reads a clock: the caller passes `now`, so tests move
time instead of waiting for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from actors.relay.limits import RelayLimits

Phase = Literal["active", "read_only", "purged"]
EXPIRING_LEAD_SECONDS = 600.0


class SessionState(BaseModel):
    """Everything about one relay session that must survive a restart of the relay."""

    uid: str
    key_hash: str
    created: float
    last_write: float
    terminated_at: float | None = None
    purged: bool = False
    last_seq: int = 0
    message_count: int = 0
    storage_bytes: int = 0
    # Which caps already had their 90% warning: each warns once per session.
    warned: list[str] = Field(default_factory=list)
    # The last_write the expiry warning was sent for; any later write arms it again.
    expiring_warned_for: float | None = None
    limits: RelayLimits = Field(default_factory=RelayLimits)


def read_only_at(s: SessionState) -> float:
    if s.terminated_at is not None:
        return s.terminated_at
    return s.last_write + s.limits.inactivity_ttl_seconds


def purge_at(s: SessionState) -> float:
    return read_only_at(s) + s.limits.grace_seconds


def expiring_lead(s: SessionState) -> float:
    """Ten minutes, or half the lifetime when an owner configured a very short one."""
    return min(EXPIRING_LEAD_SECONDS, s.limits.inactivity_ttl_seconds / 2)


def phase(s: SessionState, now: float) -> Phase:
    if s.purged or now >= purge_at(s):
        return "purged"
    if now >= read_only_at(s):
        return "read_only"
    return "active"


def expiring_due(s: SessionState, now: float) -> bool:
    """Whether the sweeper should announce `session_expiring` now."""
    return (phase(s, now) == "active" and s.terminated_at is None
            and now >= read_only_at(s) - expiring_lead(s)
            and s.expiring_warned_for != s.last_write)


def purge_due(s: SessionState, now: float) -> bool:
    return not s.purged and phase(s, now) == "purged"

