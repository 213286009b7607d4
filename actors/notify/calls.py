"""The calls state machine (spec section 11), pure: what a call does next at a given moment, and
what an answer, a decline or a cancel does to it. No store, no clock of its own.

    scheduled -> ringing -> answered | declined | missed | cancelled

- a due call rings (`ring`); a repeating one then gets its next occurrence;
- ringing for more than 120 s is `missed`;
- a user's alarm (source "user") that was missed rings once more 5 minutes later (`rering`);
- answering a call that stopped ringing is a call-back, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from actors.common.errors import IriisError

Status = Literal["scheduled", "ringing", "answered", "declined", "missed", "cancelled"]
Step = Literal["ring", "rering", "miss"]
Action = Literal["answer", "decline", "cancel"]
Mode = Literal["answered", "declined", "cancelled", "callback"]

RING_SECONDS = 120.0
RERING_AFTER = 300.0
# A user alarm rings at most this often (the first ring and one re-ring).
MAX_RINGS = 2
FINAL: tuple[str, ...] = ("answered", "declined", "missed", "cancelled")
SOURCES: tuple[str, ...] = ("user", "agent", "autonomy")
ANSWERED_TURN = "[call answered] {reason}"
CALLBACK_TURN = "[call back] {reason}"
MISSED_TEXT = "Missed call: {reason}"


class Call(BaseModel):
    id: int
    at: float
    reason: str
    opening: str | None = None
    status: Status
    repeat: str | None = None
    source: str = "user"
    created: float
    rang: float | None = None
    answered: float | None = None
    ended: float | None = None
    rings: int = 0
    conversation_id: str | None = None
    updated: float


class CallConflict(IriisError, ValueError):
    """The action does not apply to the call as it is now (the message says why)."""

    code = "conflict"


def next_step(call: Call, now: float) -> Step | None:
    if call.status == "scheduled" and call.at <= now:
        return "ring"
    if call.status == "ringing" and call.rang is not None and now - call.rang > RING_SECONDS:
        return "miss"
    if (call.status == "missed" and call.source == "user" and call.rings < MAX_RINGS and call.answered is None
            and call.ended is not None and now - call.ended >= RERING_AFTER):
        return "rering"
    return None


def wake_at(call: Call) -> float | None:
    """When `next_step` will next have something to do for this call, if ever."""
    if call.status == "scheduled":
        return call.at
    if call.status == "ringing" and call.rang is not None:
        return call.rang + RING_SECONDS
    if call.status == "missed" and call.source == "user" and call.rings < MAX_RINGS and call.answered is None \
            and call.ended is not None:
        return call.ended + RERING_AFTER
    return None


def next_occurrence(call: Call, now: float, after: Callable[[str, float], float], limit: int = 10_000) -> float | None:
    """When a repeating call comes round next: the first occurrence after `now` on its own
    schedule (occurrences missed while the server was down are skipped, not rung in a burst)."""
    if not call.repeat:
        return None
    at = after(call.repeat, call.at)
    for _ in range(limit):
        if at > now:
            return at
        at = after(call.repeat, at)
    return after(call.repeat, now)


def transition(call: Call, action: Action) -> tuple[Status, Mode]:
    """The status the call moves to and what the client is told. Raises CallConflict."""
    if action == "answer":
        if call.status in ("scheduled", "ringing"):
            return "answered", "answered"
        if call.status == "answered":
            return "answered", "answered"
        # It stopped ringing (missed, declined, cancelled): the link calls back instead.
        return call.status, "callback"
    if action == "decline":
        if call.status in ("scheduled", "ringing"):
            return "declined", "declined"
        if call.status == "declined":
            return "declined", "declined"
        raise CallConflict(f"call {call.id} is {call.status}; only a scheduled or ringing call can be declined")
    if call.status in ("scheduled", "ringing") or (call.status == "missed" and wake_at(call) is not None):
        return "cancelled", "cancelled"
    if call.status == "cancelled":
        return "cancelled", "cancelled"
    raise CallConflict(f"call {call.id} is {call.status} already; there is nothing to cancel")


def voice_turn(call: Call, mode: Mode) -> tuple[str | None, str | None]:
    """(opening, turn): what the client needs to open the voice session. A prepared opening
    line is spoken as it is; without one the client sends the turn and the agent speaks first."""
    if mode == "callback":
        return None, CALLBACK_TURN.format(reason=call.reason)
    if call.opening:
        return call.opening, None
    return None, ANSWERED_TURN.format(reason=call.reason)
