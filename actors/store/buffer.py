"""Conversation writes held in memory and flushed in batches.

The owning SessionActor adds to it on every turn; a timer, every read, idle exit and shutdown
flush it. A failed flush puts the batch back so nothing accepted is lost.
"""

from __future__ import annotations

from actors.store.models import ConversationRecord, MessageRecord
from actors.store.store import Store


class ConversationBuffer:
    def __init__(self) -> None:
        self._conversations: dict[str, ConversationRecord] = {}
        self._messages: list[MessageRecord] = []
        self._deleted: set[str] = set()

    def touch(self, conversation: ConversationRecord) -> None:
        self._conversations[conversation.id] = conversation.model_copy()

    def add(self, message: MessageRecord) -> None:
        self._messages.append(message)

    def delete(self, message_id: str) -> None:
        before = len(self._messages)
        self._messages = [m for m in self._messages if m.id != message_id]
        if len(self._messages) == before:
            self._deleted.add(message_id)

    @property
    def pending(self) -> int:
        return len(self._conversations) + len(self._messages) + len(self._deleted)

    async def flush(self, store: Store) -> int:
        """Write everything pending in one transaction; returns how many items were written."""
        if not self.pending:
            return 0
        convs, msgs, gone = list(self._conversations.values()), self._messages, self._deleted
        self._conversations, self._messages, self._deleted = {}, [], set()
        try:
            await store.write_batch(convs, msgs, gone)
        except BaseException:
            # Put the batch back in front of anything added meanwhile, newest conversation state wins.
            for conv in convs:
                self._conversations.setdefault(conv.id, conv)
            self._messages = msgs + self._messages
            self._deleted |= gone
            raise
        return len(convs) + len(msgs) + len(gone)
