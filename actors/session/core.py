"""A conversation's state, without Ray: history, the write buffer, the prompt window.

Durability: the person's message and a `pending` assistant row are written when a turn starts,
the pending row is updated as sentences go out, and it becomes the reply (same id and seq)
before the client hears `done`. A pending row found when the conversation is rebuilt (its actor
died mid-turn) becomes an interrupted reply, or goes if nothing was said yet."""

from __future__ import annotations

import time
from typing import Any

from actors.common.provenance import SYSTEM_TEXT, Provenance
from actors.common.untrusted import wrap_content
from actors.session.events import TurnMessage, said_by
from actors.store.buffer import ConversationBuffer
from actors.store.models import ConversationRecord, MessageRecord, Role
from actors.store.store import Store

# About 5,000 tokens of recent conversation kept verbatim (~4 characters a token).
HISTORY_CHAR_BUDGET = 20_000
LOAD_LIMIT = 200
TITLE_CHARS = 80
# The next turn must not assume the owner heard the rest of an interrupted reply.
INTERRUPTED_NOTE = "\n[interrupted: the owner stopped me here and did not hear the rest]"
# A reply cut off because the conversation's process died: the owner may not have heard it all.
CRASHED_NOTE = "\n[interrupted: the server stopped while I was answering; the rest was never sent]"
PENDING = "pending"
# Why a stored reply was cut short (meta "cause"), when it was not the owner's barge-in.
RESTART_CAUSE = "session_restarted"
# The owner set aside the outside content seen so far (`set_aside_outside`): a system message.
SET_ASIDE = "set_aside_outside"
SET_ASIDE_NOTE = "The owner set aside the outside content above; it no longer reaches the model."


class SessionCore:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.conversation: ConversationRecord | None = None
        self.history: list[MessageRecord] = []
        self.buffer = ConversationBuffer()
        self._next_seq = 1
        # The reply being written: its row is in the store while the turn runs.
        self.pending: MessageRecord | None = None

    async def load(self, store: Store) -> bool:
        """Rebuild from the store; False when the conversation does not exist."""
        self.conversation = await store.get_conversation(self.session_id)
        if self.conversation is None:
            return False
        self.history = await store.list_messages(self.session_id, limit=LOAD_LIMIT)
        self._next_seq = (self.history[-1].seq + 1) if self.history else 1
        self.history = [m for m in (self._recover(m) for m in self.history) if m is not None]
        return True

    def _recover(self, message: MessageRecord) -> MessageRecord | None:
        """A reply left pending by a turn whose actor died: kept as an interrupted reply
        (queued for the store), or dropped when nothing had been said yet."""
        if not (message.meta or {}).get(PENDING):
            return message
        if not message.content.strip():
            self.buffer.delete(message.id)
            return None
        meta = {k: v for k, v in (message.meta or {}).items() if k != PENDING}
        fixed = message.model_copy(update={"meta": {**meta, "interrupted": True, "cause": RESTART_CAUSE}})
        self.buffer.add(fixed)
        return fixed

    def begin_reply(self, turn_id: str) -> MessageRecord:
        """Reserve the reply's row (empty, pending) right after the person's message."""
        assert self.conversation is not None, "create() or load() first"
        self.pending = MessageRecord(conversation_id=self.session_id, seq=self._next_seq, role="assistant",
                                     content="", meta={PENDING: True, "turn_id": turn_id})
        self._next_seq += 1
        self.buffer.add(self.pending.model_copy())
        return self.pending

    def update_pending(self, text: str) -> MessageRecord | None:
        """What has been said of the reply so far; a copy to write, or None when unchanged."""
        if self.pending is None or self.pending.content == text:
            return None
        self.pending.content = text
        return self.pending.model_copy()

    def drop_pending(self) -> None:
        """The turn ended without a reply (an error, or stopped before a word was heard)."""
        if self.pending is None:
            return
        self.buffer.delete(self.pending.id)
        self.pending = None

    def keep_heard(self, message_id: str, heard: str) -> MessageRecord | None:
        """A reply the owner cut off after it was written (voice still playing it): keep only
        what was heard, marked interrupted. None when there is no such reply or nothing to cut."""
        heard = heard.strip()
        for index in range(len(self.history) - 1, -1, -1):
            message = self.history[index]
            if message.id != message_id:
                continue
            if message.role != "assistant" or not heard or len(heard) >= len(message.content.strip()):
                return None
            fixed = message.model_copy(update={"content": heard,
                                               "meta": {**(message.meta or {}), "interrupted": True}})
            self.history[index] = fixed
            self.buffer.add(fixed)
            return fixed
        return None

    def create(self, channel: str = "chat") -> None:
        self.conversation = ConversationRecord(id=self.session_id, channel=channel)
        self.buffer.touch(self.conversation)

    def add(self, role: Role, content: str, meta: dict[str, Any] | None = None) -> MessageRecord:
        assert self.conversation is not None, "create() or load() first"
        if role == "assistant" and self.pending is not None:
            # The turn's reply takes the row reserved for it (an upsert of the same id).
            message = MessageRecord(id=self.pending.id, conversation_id=self.session_id, seq=self.pending.seq,
                                    role=role, content=content, meta=meta, created=self.pending.created)
            self.pending = None
        else:
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

    def window(self) -> list[MessageRecord]:
        """The recent user/assistant messages kept verbatim: newest first until the budget."""
        window: list[MessageRecord] = []
        used = 0
        for message in reversed(self.history):
            if message.role not in ("user", "assistant"):
                continue
            used += len(message.content)
            if used > HISTORY_CHAR_BUDGET and window:
                break
            window.append(message)
        return window[::-1]

    def to_fold(self) -> list[MessageRecord]:
        """Messages that have left the window and are not in the summary yet (what the owner
        set aside is never folded in)."""
        window = self.window()
        first_kept = window[0].seq if window else self._next_seq
        upto = self.conversation.summary_upto if self.conversation else 0
        aside = self._set_aside_upto()
        return [m for m in self.history
                if upto < m.seq < first_kept and m.role in ("user", "assistant")
                and not (m.seq < aside and (m.meta or {}).get("sources"))]

    def apply_summary(self, summary: str, upto_seq: int, sources: list[str] | None = None) -> None:
        """The new rolling summary; `sources` are the untrusted sources of what was folded into
        it, kept with those of the summary before (a summary made from them stays marked)."""
        assert self.conversation is not None
        if upto_seq <= self.conversation.summary_upto:
            return
        self.conversation.summary = summary
        self.conversation.summary_upto = upto_seq
        marked = [*(self.conversation.summary_sources or []), *(sources or [])]
        self.conversation.summary_sources = list(dict.fromkeys(marked)) or None
        self.buffer.touch(self.conversation)

    def remove(self, message_id: str) -> bool:
        """Delete permanently: from the live context and, on the next flush, from storage."""
        before = len(self.history)
        self.history = [m for m in self.history if m.id != message_id]
        self.buffer.delete(message_id)
        return len(self.history) != before

    def set_aside_outside(self) -> int:
        """The owner sets aside the outside content seen so far: from the next turn on, every
        earlier message that carries untrusted sources (a relay peer's words, a reply written
        while reading a file, a page or a stranger's memory) and a summary folded from such
        content leave the prompt, so they no longer taint turns nor ask for confirmations.
        Nothing is deleted: the marker is a system message, and the history shows it all.
        Returns how many messages were set aside."""
        assert self.conversation is not None, "create() or load() first"
        before = self._set_aside_upto()
        aside = sum(1 for m in self.history if m.seq > before and (m.meta or {}).get("sources"))
        if self.conversation.summary_sources:
            # The summary is derived text: the part folded from outside content goes with it
            # (later folds start a new one); the messages it came from stay stored.
            self.conversation.summary, self.conversation.summary_sources = "", None
            aside += 1
        self.add("system", SET_ASIDE_NOTE, {SET_ASIDE: True})
        return aside

    def _set_aside_upto(self) -> int:
        marks = [m.seq for m in self.history if m.role == "system" and (m.meta or {}).get(SET_ASIDE)]
        return max(marks, default=0)

    def prompt(self, system: str) -> list[TurnMessage]:
        """System text, the rolling summary, then as much recent history as fits the budget,
        each message with its provenance. A summary folded from untrusted content is quoted as
        data and marks the turn (`summary`). What the owner set aside is left out."""
        out: list[TurnMessage] = [TurnMessage(role="system", content=system, provenance=[SYSTEM_TEXT])]
        aside = self._set_aside_upto()
        if self.conversation and self.conversation.summary:
            summary = self.conversation.summary
            if self.conversation.summary_sources:
                out.append(TurnMessage(role="system", provenance=[Provenance.summary()], content=(
                    "Summary of the earlier conversation:\n"
                    + wrap_content("summary", summary, what="a summary made partly from outside content"))))
            else:
                out.append(TurnMessage(role="system", provenance=[SYSTEM_TEXT],
                                       content="Summary of the earlier conversation:\n" + summary))
        for m in self.window():
            if m.seq < aside and (m.meta or {}).get("sources"):
                continue
            content = m.content
            if m.meta and m.meta.get("interrupted"):
                content += CRASHED_NOTE if m.meta.get("cause") == RESTART_CAUSE else INTERRUPTED_NOTE
            # What the message was saved with stays with it: a relay peer's message, or a reply
            # written in a turn that read outside content, taints every turn it is part of.
            out.append(TurnMessage(role=m.role, content=content,
                                   provenance=said_by(m.role, (m.meta or {}).get("sources"))))
        return out


def system_prompt(now: float | None = None) -> str:
    stamp = time.strftime("%A %d %B %Y, %H:%M UTC", time.gmtime(now or time.time()))
    return (
        "You are Iriis, the owner's personal agent, talking with them: call them \"you\", never \"the owner\". "
        "Answer in short, natural spoken sentences; "
        "the first sentence should be useful on its own because it is spoken while you keep "
        "writing. Use tools for arithmetic and the time instead of guessing, and never claim an "
        f"action you did not perform with a tool. It is now {stamp}."
    )
