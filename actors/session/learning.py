"""What a conversation learns after a turn, decided without Ray: whether to reflect on the
exchange, when tool-using work is distilled into playbook rules, and what never feeds memory.

The actor asks `after_turn` once the reply is delivered and runs what the plan says in the
background; `end_work_session` is asked when the conversation goes idle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.devices.grants import device_of_server
from actors.memory.reflection import is_trivial
from actors.store.models import HEALTH_CHANNEL

# Tool-using turns in one sitting that make a "work session" worth a playbook distillation.
WORK_SESSION_TURNS = 2
# The most recent turns of a work session that the playbook prompt reads.
WORK_SESSION_KEEP = 6


def work_summary(exchange: dict[str, Any]) -> str:
    """A turn as a playbook prompt reads it: the ask, each tool and its outcome, the reply."""
    calls = "; ".join(f"{t.get('name')} -> {t.get('status', '')}: {str(t.get('result', ''))[:160]}"
                      for t in exchange.get("tools", []))
    return f"Asked: {exchange.get('user', '')[:600]}\nTools: {calls}\nReplied: {exchange.get('reply', '')[:600]}"


def used_a_device(exchange: dict[str, Any]) -> bool:
    return any(device_of_server(str(t.get("source") or "")) is not None for t in exchange.get("tools", []))


@dataclass
class Learning:
    """What to do after one turn: an exchange to reflect on, work to distil now."""

    reflect: dict[str, Any] | None = None
    distill: str | None = None

    @property
    def nothing(self) -> bool:
        return self.reflect is None and self.distill is None


@dataclass
class LearningPlan:
    work_turns: int = WORK_SESSION_TURNS
    # Tool-using turns since the last playbook distillation: a "work session".
    work: list[str] = field(default_factory=list)

    def after_turn(self, exchange: dict[str, Any] | None, background: bool, cancelled: bool,
                   channel: str | None) -> Learning:
        """After the reply is delivered: reflect on the exchange; a finished background task
        also distils playbook rules at once, and a chat's tool-using turns add to the work
        session. Health checks and device output never feed memory, and a turn that read
        untrusted content never feeds the playbook."""
        if exchange is None or cancelled or channel == HEALTH_CHANNEL:
            return Learning()
        if used_a_device(exchange):
            # Device output stays in its person's conversation: it never becomes shared memory.
            return Learning()
        out = Learning()
        # Checked here too so a chit-chat turn costs no call at all.
        if not is_trivial(exchange.get("user", ""), exchange.get("reply", ""), exchange.get("tools")):
            out.reflect = exchange
        if exchange.get("sources"):
            # It read content that is not the owner's words: reflection may keep facts about
            # what happened (marked with where they came from), never a playbook rule.
            return out
        if exchange.get("tools"):
            work = work_summary(exchange)
            if background:
                out.distill = work
            else:
                self.work.append(work)
        return out

    def end_work_session(self) -> str | None:
        """The work to distil when the conversation goes idle, or None if it was not a piece
        of work (fewer than `work_turns` tool-using turns). Either way the session restarts."""
        work, self.work = self.work, []
        if len(work) < self.work_turns:
            return None
        return "\n\n".join(work[-WORK_SESSION_KEEP:])
