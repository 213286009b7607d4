"""Conversation writes on their way to the store.

The owning SessionActor writes what was accepted (a person's message, a reply, a deletion) at
once: `flush` is awaited before the turn goes on or the client hears `done`. What may wait for
the batch timer is only what can be rebuilt: the rolling summary and the conversation's
`updated` stamp. A failed flush puts the batch back, so a retry writes it.

Messages are keyed by id: writing a row again (a pending reply that became the final one)
replaces it in the batch, and the store upserts it.
"""

from __future__ import annotations

from actors.store.models import ConversationRecord, MessageRecord
from actors.store.store import Store


class ConversationBuffer:
    def __init__(self) -> None:
        self._conversations: dict[str, ConversationRecord] = {}
        self._messages: dict[str, MessageRecord] = {}
        self._deleted: set[str] = set()

    def touch(self, conversation: ConversationRecord) -> None:
        self._conversations[conversation.id] = conversation.model_copy()

    def add(self, message: MessageRecord) -> None:
        self._messages[message.id] = message
        self._deleted.discard(message.id)

    def delete(self, message_id: str) -> None:
        # Also when it was still in the batch: it may have been written already (a pending reply).
        self._messages.pop(message_id, None)
        self._deleted.add(message_id)

    @property
    def pending(self) -> int:
        return len(self._conversations) + len(self._messages) + len(self._deleted)

    @property
    def unsaved_messages(self) -> int:
        """Accepted writes not yet in the store (0 between turns unless the store failed)."""
        return len(self._messages) + len(self._deleted)

    async def flush(self, store: Store) -> int:
        """Write everything pending in one transaction; returns how many items were written."""
        if not self.pending:
            return 0
        convs, msgs, gone = list(self._conversations.values()), self._messages, self._deleted
        self._conversations, self._messages, self._deleted = {}, {}, set()
        try:
            await store.write_batch(convs, list(msgs.values()), gone)
        except BaseException:
            # Put the batch back; what was added meanwhile is newer and wins.
            for conv in convs:
                self._conversations.setdefault(conv.id, conv)
            for mid, message in msgs.items():
                self._messages.setdefault(mid, message)
            self._deleted |= {g for g in gone if g not in self._messages}
            raise
        return len(convs) + len(msgs) + len(gone)
