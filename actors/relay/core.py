"""One relay session's rules, with no I/O: admission (lifecycle, caps, rate), sequencing and
the system messages the relay adds. The actor persists what `plan_*` returns, then `commit`s.

Planning never mutates; a failed write to the store leaves the session as it was. Posts that
arrive while a write is in flight are planned together (`plan_posts`) and stored in one
transaction: each is admitted against the state the earlier ones leave, as if one at a time.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from actors.relay import lifecycle
from actors.relay.envelope import encoded_size, iso_utc, stamp, system_message
from actors.relay.errors import RelayError
from actors.relay.lifecycle import SessionState
from actors.relay.limits import MinuteWindow
from actors.relay.messages import FileRecord, Terminated

__all__ = ["Envelope", "FileRecord", "Plan", "SessionCore", "check_file_name"]

Envelope = dict[str, Any]
_FILE_NAME_BAD = re.compile(r"[\x00-\x1f/\\]")


class Plan(BaseModel):
    """What an operation will store: envelopes in order, the session afterwards, maybe a file."""

    envelopes: list[Envelope]
    state: SessionState
    file: FileRecord | None = None
    # seq -> the token of the client's post that took it (relay.messages.Post)
    posted: dict[int, str] = {}


def check_file_name(name: str) -> None:
    if not name or len(name.encode()) > 255 or name in (".", "..") or _FILE_NAME_BAD.search(name):
        raise RelayError("invalid_request", "file names are 1-255 bytes, without slashes or control characters")


class SessionCore:
    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.rate = MinuteWindow(state.limits.messages_per_minute)

    # -- reading ----------------------------------------------------------------------------

    def phase(self, now: float) -> lifecycle.Phase:
        return lifecycle.phase(self.state, now)

    def require_readable(self, now: float, state: SessionState | None = None) -> None:
        if lifecycle.phase(state or self.state, now) == "purged":
            raise RelayError("gone", "this session was purged; its history and files are deleted")

    def require_writable(self, now: float, state: SessionState | None = None) -> None:
        self.require_readable(now, state)
        if lifecycle.phase(state or self.state, now) == "read_only":
            raise RelayError("session_read_only", "the session is over; it is read-only until it is purged")

    def _take_token(self, now: float) -> None:
        retry = self.rate.take(now)
        if retry is not None:
            per_minute = self.state.limits.messages_per_minute
            raise RelayError("rate_limited", f"at most {per_minute} writes a minute per session; "
                             f"retry after {retry} s", retry_after=retry)

    # -- planning ---------------------------------------------------------------------------

    def _append(self, state: SessionState, out: list[Envelope], message: dict[str, Any],
                metadata: dict[str, Any], now: float) -> Envelope:
        state.last_seq += 1
        envelope = stamp(state.last_seq, now, message, metadata)
        state.message_count += 1
        state.storage_bytes += encoded_size(envelope)
        out.append(envelope)
        return envelope

    def _warnings(self, state: SessionState, out: list[Envelope], now: float) -> None:
        limits = state.limits
        checks = (("messages", state.message_count, limits.max_messages),
                  ("storage", state.storage_bytes, limits.max_storage_bytes))
        for name, used, cap in checks:
            if name not in state.warned and used >= limits.warn_at(cap):
                state.warned = [*state.warned, name]
                # The warning's own size is not added to `used`: it reports what clients used.
                self._append(state, out, *system_message(
                    f"This session has used {used} of its {cap} {name} ({round(100 * used / cap)}%).",
                    "limit_warning", limit=name, used=used, max=cap), now)

    def _post_onto(self, state: SessionState, out: list[Envelope], message: dict[str, Any],
                   metadata: dict[str, Any], now: float) -> Envelope:
        """Admit one post against `state` and append it (and any warning) to `out`; a refusal
        raises before anything changes."""
        self.require_writable(now, state)
        limits = state.limits
        if state.message_count >= limits.max_messages:
            raise RelayError("limit_exceeded", f"the session holds its maximum of {limits.max_messages} messages")
        probe = stamp(state.last_seq + 1, now, message, metadata)
        if state.storage_bytes + encoded_size(probe) > limits.max_storage_bytes:
            raise RelayError("limit_exceeded", f"the session's storage ({limits.max_storage_bytes} bytes) is full")
        self._take_token(now)
        envelope = self._append(state, out, message, metadata, now)
        state.last_write = now
        self._warnings(state, out, now)
        return envelope

    def plan_post(self, message: dict[str, Any], metadata: dict[str, Any], now: float) -> Plan:
        plan, (result,) = self.plan_posts([(message, metadata, now)])
        if isinstance(result, RelayError):
            raise result
        return plan

    def plan_posts(self, posts: list[tuple[dict[str, Any], dict[str, Any], float]]
                   ) -> tuple[Plan, list[Envelope | RelayError]]:
        """Several posts as one write, in order: for each, its envelope or its refusal (a refused
        post takes no seq and does not stop the ones after it)."""
        state = self.state.model_copy(deep=True)
        out: list[Envelope] = []
        results: list[Envelope | RelayError] = []
        for message, metadata, now in posts:
            try:
                results.append(self._post_onto(state, out, message, metadata, now))
            except RelayError as exc:
                results.append(exc)
        return Plan(envelopes=out, state=state), results

    def plan_file(self, name: str, size: int, content_type: str, old_size: int | None, now: float) -> Plan:
        check_file_name(name)
        self.require_writable(now)
        state = self.state.model_copy(deep=True)
        limits = state.limits
        if size > limits.max_file_bytes:
            raise RelayError("payload_too_large", f"files are at most {limits.max_file_bytes} bytes")
        if state.storage_bytes - (old_size or 0) + size > limits.max_storage_bytes:
            raise RelayError("limit_exceeded", f"the session's storage ({limits.max_storage_bytes} bytes) is full")
        self._take_token(now)
        state.storage_bytes += size - (old_size or 0)
        out: list[Envelope] = []
        envelope = self._append(state, out, *system_message(
            f"File {name} uploaded ({size} bytes, {content_type}).", "file_uploaded",
            file={"name": name, "size": size, "content_type": content_type}), now)
        state.last_write = now
        self._warnings(state, out, now)
        record = FileRecord(name=name, size=size, content_type=content_type, seq=envelope["seq"],
                            uploaded_at=envelope["ts"])
        return Plan(envelopes=out, state=state, file=record)

    def plan_terminate(self, now: float) -> Plan:
        """Straight to read-only with a `session_terminated` message; a second call changes nothing."""
        self.require_readable(now)
        state = self.state.model_copy(deep=True)
        out: list[Envelope] = []
        if self.phase(now) == "active":
            state.terminated_at = now
            self._append(state, out, *system_message(
                "The session was terminated; it is read-only until it is purged.", "session_terminated"), now)
        return Plan(envelopes=out, state=state)

    def plan_expiring(self, now: float) -> Plan | None:
        if not lifecycle.expiring_due(self.state, now):
            return None
        state = self.state.model_copy(deep=True)
        state.expiring_warned_for = state.last_write
        out: list[Envelope] = []
        left = max(0, round((lifecycle.read_only_at(state) - now) / 60))
        self._append(state, out, *system_message(
            f"This session becomes read-only in about {left} minutes unless someone writes to it.",
            "session_expiring"), now)
        return Plan(envelopes=out, state=state)

    def commit(self, plan: Plan) -> None:
        self.state = plan.state

    def terminate_reply(self) -> Terminated:
        return Terminated(purge_at=iso_utc(lifecycle.purge_at(self.state)))
