"""A conversation's state, without Ray: history, the write buffer, the prompt window."""

from __future__ import annotations

import time
from typing import Any

from actors.store.buffer import ConversationBuffer
from actors.store.models import ConversationRecord, MessageRecord, Role
from actors.store.store import Store

# About 5,000 tokens of recent conversation kept verbatim (~4 characters a token).
HISTORY_CHAR_BUDGET = 20_000
LOAD_LIMIT = 200
TITLE_CHARS = 80


class SessionCore:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.conversation: ConversationRecord | None = None
        self.history: list[MessageRecord] = []
        self.buffer = ConversationBuffer()
        self._next_seq = 1

    async def load(self, store: Store) -> bool:
        """Rebuild from the store; False when the conversation does not exist."""
        self.conversation = await store.get_conversation(self.session_id)
        if self.conversation is None:
            return False
        self.history = await store.list_messages(self.session_id, limit=LOAD_LIMIT)
        self._next_seq = (self.history[-1].seq + 1) if self.history else 1
        return True

    def create(self, channel: str = "chat") -> None:
        self.conversation = ConversationRecord(id=self.session_id, channel=channel)
        self.buffer.touch(self.conversation)

    def add(self, role: Role, content: str, meta: dict[str, Any] | None = None) -> MessageRecord:
        assert self.conversation is not None, "create() or load() first"
        message = MessageRecord(conversation_id=self.session_id, seq=self._next_seq, role=role,
                                content=content, meta=meta)
        self._next_seq += 1
        self.history.append(message)
        self.buffer.add(message)
        self.conversation.updated = message.created
        if not self.conversation.title and role == "user":
            self.conversation.title = content.strip().splitlines()[0][:TITLE_CHARS] if content.strip() else ""
        self.buffer.touch(self.conversation)
        return message

    def prompt(self, system: str) -> list[dict[str, Any]]:
        """System text, the rolling summary, then as much recent history as fits the budget."""
        window: list[MessageRecord] = []
        used = 0
        for message in reversed(self.history):
            used += len(message.content)
            if used > HISTORY_CHAR_BUDGET and window:
                break
            window.append(message)
        out: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if self.conversation and self.conversation.summary:
            out.append({"role": "system",
                        "content": "Summary of the earlier conversation:\n" + self.conversation.summary})
        out += [{"role": m.role, "content": m.content} for m in reversed(window)
                if m.role in ("user", "assistant")]
        return out


def system_prompt(now: float | None = None) -> str:
    stamp = time.strftime("%A %d %B %Y, %H:%M UTC", time.gmtime(now or time.time()))
    return (
        "You are Iriis, the owner's personal agent. Answer in short, natural spoken sentences; "
        "the first sentence should be useful on its own because it is spoken while you keep "
        "writing. Use tools for arithmetic and the time instead of guessing, and never claim an "
        f"action you did not perform with a tool. It is now {stamp}."
    )
