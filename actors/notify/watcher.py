"""The call watcher and the owner's answers, on an injected clock and without Ray.

`CallWatcher.tick` does what is due: a due call rings on every channel at once (Web Push with
`data.kind = "call"`, Telegram, the desktop announce, and an ntfy alert at priority 5 whose
sequence id is the call id and whose click opens the app on the call); a repeating call gets its
next occurrence; a call ringing past 120 s is missed, with a "Missed call" line in its chat and
a notification; a user's missed alarm rings once more 5 minutes later.

`act` is the answer, decline or cancel: it moves the call, dismisses the ntfy alert by its
sequence id (and tells the browsers, `data.kind = "call_ended"`), and says what the client
needs to open the voice session. A prepared opening line is written into the call's
conversation when it is answered, so the voice session's history starts with what was said.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from actors.notify import call_store, calls
from actors.notify.calls import Action, Call, CallConflict, Mode
from actors.notify.channels import Notice
from actors.notify.chat import add_line
from actors.notify.config import NotifyConfig
from actors.notify.notifier import Notifier
from actors.store.models import OutboxItem
from actors.store.store import Store

log = logging.getLogger(__name__)
# (repeat, after) -> the next occurrence after `after` (the scheduler's cron/interval reader).
NextAfter = Callable[[str, float], float]
# Extra tries, in place, for a ring that failed on a channel (it cannot wait for the backoff).
RING_RETRIES = 2


def ring_notice(call: Call, config: NotifyConfig) -> Notice:
    url = config.call_url(call.id)
    return Notice(kind="call", title="Iriis is calling", body=call.reason, url=url, priority=5,
                  sequence_id=str(call.id), ttl=int(calls.RING_SECONDS),
                  tags=["telephone_receiver"],
                  data={"call_id": call.id, "reason": call.reason, "opening": call.opening, "rings": call.rings,
                        "actions": ["answer", "decline"]})


def ended_notice(call: Call, config: NotifyConfig) -> Notice:
    """Tells the browsers a call stopped ringing (answered elsewhere, declined, cancelled,
    missed), so their service worker closes its ringing notification (same tag)."""
    return Notice(kind="call_ended", title="Call ended", body=call.reason, url=config.call_url(call.id), priority=2,
                  sequence_id=str(call.id), ttl=int(calls.RING_SECONDS),
                  data={"call_id": call.id, "status": call.status})


async def stop_ringing(notifier: Notifier, call: Call) -> None:
    """The ntfy alert dismissed by its sequence id, and the browsers told."""
    await notifier.ntfy_dismiss(str(call.id), call_id=call.id)
    await notifier.send(ended_notice(call, notifier.config), await notifier.targets(["push"]), call_id=call.id)


def missed_item(call: Call, now: float) -> OutboxItem:
    return OutboxItem(kind="missed_call", session_id=call.conversation_id, title="Missed call",
                      body=call.reason, ts=now,
                      data={"call_id": call.id, "conversation_id": call.conversation_id, "priority": 4})


class CallWatcher:
    def __init__(self, store: Store, notifier: Notifier, next_after: NextAfter,
                 clock: Callable[[], float]) -> None:
        self.store = store
        self.notifier = notifier
        self.next_after = next_after
        self.clock = clock

    async def tick(self) -> list[tuple[int, str]]:
        """Do what is due now; returns (call id, step) for each thing done."""
        now = self.clock()
        done: list[tuple[int, str]] = []
        for call in await call_store.live_calls(self.store, now):
            step = calls.next_step(call, now)
            if step is None:
                continue
            try:
                if await self._step(call, step, now):
                    done.append((call.id, step))
            except Exception:  # noqa: BLE001 - one call's failure must not stop the others
                log.exception("call %s: %s failed", call.id, step)
        return done

    async def _step(self, call: Call, step: str, now: float) -> bool:
        if step in ("ring", "rering"):
            expect = ("scheduled",) if step == "ring" else ("missed",)
            moved = await call_store.move(self.store, call.id, expect, now, fence_rings=call.rings,
                                          status="ringing", rang=now, ended=None, rings=call.rings + 1)
            if moved is None:
                return False
            if step == "ring":
                await self._repeat(moved, now)
            await self.ring(moved)
            return True
        moved = await call_store.move(self.store, call.id, ("ringing",), now, fence_rings=call.rings,
                                      status="missed", ended=now)
        if moved is None:
            return False
        await stop_ringing(self.notifier, moved)
        await add_line(self.store, moved.conversation_id or call_store.call_conversation(moved.id),
                       f"Call: {moved.reason}"[:80], calls.MISSED_TEXT.format(reason=moved.reason), now,
                       meta={"call_id": moved.id, "missed": True})
        await self.store.add_outbox(missed_item(moved, now))
        return True

    async def ring(self, call: Call) -> dict[str, Any]:
        outcomes = await self.notifier.send(ring_notice(call, self.notifier.config), call_id=call.id,
                                            retries=RING_RETRIES)
        if not outcomes:
            log.warning("call %s is ringing, but no channel is configured to ring the owner", call.id)
        return outcomes

    async def _repeat(self, call: Call, now: float) -> Call | None:
        at = calls.next_occurrence(call, now, self.next_after)
        if at is None:
            return None
        return await call_store.create_call(self.store, at, call.reason, now, opening=call.opening,
                                            repeat=call.repeat, source=call.source)


class Answer(BaseModel):
    """What `act` did, and for an answer or a call-back, what opens the voice session."""

    call: Call
    mode: Mode
    conversation_id: str | None = None
    opening: str | None = None
    turn: str | None = None


async def act(store: Store, notifier: Notifier | None, call_id: int, action: Action, now: float) -> Answer | None:
    """Answer, decline or cancel; None when there is no such call. Raises CallConflict."""
    for _ in range(3):
        call = await call_store.get_call(store, call_id)
        if call is None:
            return None
        status, mode = calls.transition(call, action)
        if mode == "callback":
            moved = call
            if call.status == "missed" and call.answered is None:
                # Called back: a user alarm waiting to re-ring does not ring again.
                moved = await call_store.move(store, call.id, ("missed",), now, fence_rings=call.rings,
                                              answered=now) or call
            return _answer(moved, mode)
        if status == call.status:
            return _answer(call, mode)
        values: dict[str, Any] = {"status": status, "ended": now}
        if status == "answered":
            values["answered"] = now
        moved = await call_store.move(store, call.id, (call.status,), now, fence_rings=call.rings, **values)
        if moved is None:
            continue  # the watcher moved it meanwhile: decide again on what it is now
        if call.status == "ringing" and notifier is not None:
            await stop_ringing(notifier, moved)
        if status == "answered" and moved.opening:
            # The prepared line is what the agent says first: it is the conversation's first
            # assistant message, so the next turn (and the history page) knows it was said.
            await add_line(store, moved.conversation_id or call_store.call_conversation(moved.id),
                           f"Call: {moved.reason}"[:80], moved.opening, now,
                           meta={"call_id": moved.id, "opening": True})
        return _answer(moved, mode)
    raise CallConflict(f"call {call_id} kept changing; try again")


def _answer(call: Call, mode: Mode) -> Answer:
    if mode not in ("answered", "callback"):
        return Answer(call=call, mode=mode)
    opening, turn = calls.voice_turn(call, mode)
    return Answer(call=call, mode=mode, conversation_id=call.conversation_id, opening=opening, turn=turn)


__all__ = ["Answer", "CallConflict", "CallWatcher", "act", "missed_item", "ring_notice"]
