"""What makes a turn durable, without Ray: the person's message and a pending reply row are
written when the turn starts (beside the model's work, not in front of it), the row follows the
sentences as they go out (one small upsert at a time, off the event path, the newest text next),
and the final reply (or the row's removal) is written before the turn's last event is published:
nothing reaches `done` before its writes are in the store.

The SessionActor wires one of these per conversation; tests drive it with a real store.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from typing import Any

from actors.session.core import SessionCore
from actors.session.events import Done, TurnError, TurnEvent
from actors.session.turnlog import TurnLog
from actors.store.store import Store

log = logging.getLogger(__name__)

NOT_SAVED = ("Your message was answered, but the reply could not be saved (the database did not "
             "answer); it will be retried. Please check the conversation before relying on it.")


class DurableTurns:
    def __init__(self, core: SessionCore, store: Store,
                 report: Callable[..., Any] | None = None) -> None:
        self.core = core
        self.store = store
        # The error log's reporter (`actors.recent_errors.report`), given by the actor.
        self.report = report
        self._partial: asyncio.Task[None] | None = None
        self._dirty = False
        # The turn's first write (the message and the pending row); later writes wait for it,
        # or an older copy of the row could land after a newer one.
        self._opening: asyncio.Future[int] | None = None

    async def flush(self) -> int:
        return await self.core.buffer.flush(self.store)

    def begin(self, turn: TurnLog) -> asyncio.Future[int]:
        """Right after the person's message joined the history: reserve the reply's row, hook
        the turn, and start writing both (the caller need not wait: `settle` does)."""
        self.core.begin_reply(turn.turn_id)
        turn.spoken = lambda: self.spoken(turn)
        turn.settle = self.settle
        self._opening = asyncio.ensure_future(self.flush())
        return self._opening

    async def _opened(self) -> bool:
        """Wait for the turn's first write; False when it failed (the buffer still holds it)."""
        if self._opening is None:
            return True
        try:
            await asyncio.shield(self._opening)
            return True
        except Exception:  # noqa: BLE001 - settle's flush writes it again and reports
            return False

    def spoken(self, turn: TurnLog) -> None:
        """A sentence went out: the pending row gets the text so far, in the background."""
        if self.core.update_pending(" ".join(turn.sentences())) is None:
            return
        self._dirty = True
        if self._partial is None or self._partial.done():
            self._partial = asyncio.get_running_loop().create_task(self._write_partial(),
                                                                   context=contextvars.Context())

    async def _write_partial(self) -> None:
        if not await self._opened():
            return
        while self._dirty and self.core.pending is not None:
            self._dirty = False
            row = self.core.pending.model_copy()
            try:
                await self.store.write_batch([], [row])
            except Exception as exc:  # noqa: BLE001 - the final write says if the store is gone
                log.warning("partial reply of session %s not written: %s", self.core.session_id, exc)
                return

    async def settle(self, event: TurnEvent) -> TurnEvent:
        """Before the turn's last event is published: its reply (or its absence) is stored."""
        # No reply was added (an error, or stopped before a word was heard): no reply row.
        self.core.drop_pending()
        await self._opened()
        if self._partial is not None:
            await asyncio.gather(self._partial, return_exceptions=True)
        try:
            await self.flush()
        except Exception as exc:  # noqa: BLE001 - the client hears why instead of `done`
            log.exception("reply of session %s not saved", self.core.session_id)
            if self.report is not None:
                self.report("session.save", exc, request={"session": self.core.session_id})
            if isinstance(event, Done):
                return TurnError.of("store_unavailable", NOT_SAVED)
        return event


# Why a turn's stream broke, by the exception the caller got (no Ray import here: by name).
_CAUSES = {
    "ActorUnavailableError": "its process was lost (killed or crashed) and is restarting",
    "ActorDiedError": "its process died",
    "OutOfMemoryError": "its process ran out of memory",
    "SessionNotFound": "the conversation no longer exists",
}


def lost_turn(exc: BaseException) -> TurnError:
    """The error event a client gets when the conversation's actor died under its turn."""
    cause = next((text for name, text in _CAUSES.items() if name in {t.__name__ for t in type(exc).__mro__}),
                 f"it stopped unexpectedly ({type(exc).__name__})")
    return TurnError.of("session_unavailable",
                        f"The conversation stopped during this turn: {cause}. What was already said is saved, "
                        "marked interrupted, and the conversation is back; please send your message again.")
