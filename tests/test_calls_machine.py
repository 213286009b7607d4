"""The calls state machine on an injected clock, on both databases, with every channel a local
server (ntfy, Telegram, a push endpoint with the browser's own keys) and a desktop announce:
due -> ringing everywhere at once, 120 s -> missed with the chat line and a push, the user
alarm's one re-ring after 5 minutes, repeats, answer/decline/cancel dismissing the ntfy alert,
and a late link calling back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from actors.notify import call_store, calls, outbox, webpush
from actors.notify.calls import Call, CallConflict
from actors.notify.channels import Notice
from actors.notify.config import NotifyConfig
from actors.notify.notifier import Notifier
from actors.notify.watcher import CallWatcher, act
from actors.scheduler.calls_loop import repeat_after
from actors.store.store import Store
from tests.notify_fakes import Browser, Recorder

TOKEN = "4242:calls-token"
T0 = 1_800_000_000.0


@pytest.fixture
def http() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Rig:
    def __init__(self, store: Store, http: Recorder, browser: Browser) -> None:
        self.store, self.http, self.browser = store, http, browser
        self.clock = Clock(T0)
        self.announced: list[Notice] = []

        async def announce(n: Notice) -> int:
            self.announced.append(n)
            return 1

        config = NotifyConfig(ntfy_url=http.url, ntfy_topic="ring", telegram_api=http.url, telegram_token=TOKEN,
                              telegram_chat_id="5", app_url="http://app.test")
        self.notifier = Notifier(store, config, announce=announce, clock=self.clock)
        self.watcher = CallWatcher(store, self.notifier, repeat_after, self.clock)

    async def tick(self, at: float) -> list[tuple[int, str]]:
        self.clock.now = at
        return await self.watcher.tick()

    async def call(self, call_id: int) -> Call:
        found = await call_store.get_call(self.store, call_id)
        assert found is not None
        return found

    def ntfy(self, method: str = "POST") -> list:
        return self.http.requests(method, "/ring")


@pytest.fixture
async def rig(store: Store, http: Recorder):
    browser = Browser(f"{http.url}/push/phone")
    await webpush.add_subscription(store, browser.endpoint, webpush.SubscriptionKeys(**browser.subscription()["keys"]))
    made = Rig(store, http, browser)
    yield made
    await made.notifier.close()


async def test_a_due_call_rings_on_every_channel_at_once(rig: Rig) -> None:
    call = await call_store.create_call(rig.store, T0 + 60, "Stand-up in five", T0, source="agent")
    assert await rig.tick(T0 + 59) == [] and rig.http.requests() == []
    assert await rig.tick(T0 + 60) == [(call.id, "ring")]
    ringing = await rig.call(call.id)
    assert ringing.status == "ringing" and ringing.rang == T0 + 60 and ringing.rings == 1
    [alert] = rig.ntfy()
    assert alert.header("Priority") == "5" and alert.header("X-Sequence-ID") == str(call.id)
    assert alert.header("Click") == f"http://app.test/?call={call.id}" and alert.body == b"Stand-up in five"
    [push] = rig.http.requests("POST", "/push/phone")
    payload = rig.browser.decrypt(push.body)
    assert payload["data"]["kind"] == "call" and payload["data"]["call_id"] == call.id
    assert payload["url"] == f"http://app.test/?call={call.id}" and push.header("Urgency") == "high"
    [telegram] = rig.http.requests("POST", f"/bot{TOKEN}/sendMessage")
    assert "Stand-up in five" in telegram.json()["text"] and f"?call={call.id}" in telegram.json()["text"]
    assert [n.kind for n in rig.announced] == ["call"]
    # The rings went out together, in one moment of the injected clock.
    assert await rig.tick(T0 + 61) == []


async def test_ringing_past_120_seconds_is_missed_with_a_chat_line_and_a_push(rig: Rig) -> None:
    call = await call_store.create_call(rig.store, T0, "Water the plants", T0, source="agent")
    await rig.tick(T0)
    assert await rig.tick(T0 + calls.RING_SECONDS) == []          # at 120 s: still ringing
    assert await rig.tick(T0 + calls.RING_SECONDS + 1) == [(call.id, "miss")]
    missed = await rig.call(call.id)
    assert missed.status == "missed" and missed.ended == T0 + 121
    assert [(s.method, s.path) for s in rig.http.requests(path="/ring/")] == [
        ("PUT", f"/ring/{call.id}/clear"), ("DELETE", f"/ring/{call.id}")]
    [line] = await rig.store.list_messages(call_store.call_conversation(call.id))
    assert line.role == "assistant" and line.content == "Missed call: Water the plants"
    rig.http.clear()
    await outbox.drain(rig.store, rig.notifier, T0 + 122)
    [push] = rig.http.requests("POST", "/push/phone")
    payload = rig.browser.decrypt(push.body)
    assert payload["title"] == "Missed call" and payload["data"]["kind"] == "missed_call"
    assert payload["data"]["call_id"] == call.id
    # An agent's call does not ring again.
    assert await rig.tick(T0 + 121 + calls.RERING_AFTER + 1) == []


async def test_a_user_alarm_rings_once_more_after_five_minutes(rig: Rig) -> None:
    call = await call_store.create_call(rig.store, T0, "Wake up", T0, source="user")
    await rig.tick(T0)
    await rig.tick(T0 + 121)
    assert await rig.tick(T0 + 121 + calls.RERING_AFTER - 1) == []
    assert await rig.tick(T0 + 121 + calls.RERING_AFTER) == [(call.id, "rering")]
    again = await rig.call(call.id)
    assert again.status == "ringing" and again.rings == 2 and again.ended is None
    assert len(rig.ntfy()) == 2
    second_miss = T0 + 121 + calls.RERING_AFTER + 121
    assert await rig.tick(second_miss) == [(call.id, "miss")]
    assert await rig.tick(second_miss + 10 * calls.RERING_AFTER) == []
    assert len(rig.ntfy()) == 2
    lines = await rig.store.list_messages(call_store.call_conversation(call.id))
    assert [m.content for m in lines] == ["Missed call: Wake up"] * 2


async def test_a_repeating_call_inserts_its_next_occurrence(rig: Rig) -> None:
    call = await call_store.create_call(rig.store, T0, "Medication", T0, repeat="every 1h", source="user")
    await rig.tick(T0)
    upcoming = [c for c in await call_store.list_calls(rig.store, status="scheduled")]
    assert [(c.at, c.reason, c.repeat, c.source) for c in upcoming] == [(T0 + 3600, "Medication", "every 1h", "user")]
    assert (await rig.call(call.id)).status == "ringing"
    # A re-ring is not a new occurrence.
    await rig.tick(T0 + 121)
    await rig.tick(T0 + 121 + calls.RERING_AFTER)
    assert len(await call_store.list_calls(rig.store, status="scheduled")) == 1


def test_next_occurrence_skips_what_passed_while_down() -> None:
    call = Call(id=1, at=T0, reason="r", status="scheduled", repeat="every 1h", created=T0, updated=T0)
    assert calls.next_occurrence(call, T0 + 10, repeat_after) == T0 + 3600
    assert calls.next_occurrence(call, T0 + 5 * 3600 + 1, repeat_after) == T0 + 6 * 3600
    nine = datetime(2027, 1, 15, 9, 0, tzinfo=timezone.utc).timestamp()
    cron = call.model_copy(update={"repeat": "0 9 * * *", "at": nine})
    assert calls.next_occurrence(cron, cron.at + 1, repeat_after) == cron.at + 86_400
    assert calls.next_occurrence(call.model_copy(update={"repeat": None}), T0, repeat_after) is None


async def test_answering_a_ringing_call_dismisses_the_alert_and_opens_the_voice_turn(rig: Rig) -> None:
    plain = await call_store.create_call(rig.store, T0, "Check in", T0, source="agent")
    ready = await call_store.create_call(rig.store, T0, "News", T0, opening="I have news about the flat.",
                                         source="agent")
    await rig.tick(T0)
    rig.http.clear()
    answered = await act(rig.store, rig.notifier, plain.id, "answer", T0 + 5)
    assert answered.mode == "answered" and answered.call.status == "answered" and answered.call.answered == T0 + 5
    assert (answered.opening, answered.turn) == (None, "[call answered] Check in")
    assert answered.conversation_id == call_store.call_conversation(plain.id)
    assert [(s.method, s.path) for s in rig.http.requests(path="/ring")] == [
        ("PUT", f"/ring/{plain.id}/clear"), ("DELETE", f"/ring/{plain.id}")]
    # The browsers are told too, so a notification still ringing elsewhere closes.
    [ended] = [rig.browser.decrypt(s.body) for s in rig.http.requests("POST", "/push/phone")]
    assert ended["data"] == {"kind": "call_ended", "call_id": plain.id, "status": "answered"}
    assert ended["tag"] == str(plain.id)
    spoken = await act(rig.store, rig.notifier, ready.id, "answer", T0 + 6)
    assert (spoken.opening, spoken.turn) == ("I have news about the flat.", None)
    # Answered calls are not missed later.
    assert await rig.tick(T0 + 500) == []


async def test_decline_and_cancel_dismiss_what_rings(rig: Rig) -> None:
    first = await call_store.create_call(rig.store, T0, "One", T0, source="agent")
    second = await call_store.create_call(rig.store, T0, "Two", T0, source="agent")
    later = await call_store.create_call(rig.store, T0 + 3600, "Later", T0, source="user")
    await rig.tick(T0)
    rig.http.clear()
    assert (await act(rig.store, rig.notifier, first.id, "decline", T0 + 3)).call.status == "declined"
    assert (await act(rig.store, rig.notifier, second.id, "cancel", T0 + 4)).call.status == "cancelled"
    assert [(s.method, s.path) for s in rig.http.requests(path="/ring")] == [
        ("PUT", f"/ring/{first.id}/clear"), ("DELETE", f"/ring/{first.id}"),
        ("PUT", f"/ring/{second.id}/clear"), ("DELETE", f"/ring/{second.id}")]
    rig.http.clear()
    # A call that has not rung has no alert to dismiss, and never rings once cancelled.
    assert (await act(rig.store, rig.notifier, later.id, "cancel", T0 + 5)).mode == "cancelled"
    assert rig.http.requests() == []
    assert await rig.tick(T0 + 3600) == []
    with pytest.raises(CallConflict):
        await act(rig.store, rig.notifier, first.id, "cancel", T0 + 6)
    assert await act(rig.store, rig.notifier, 9999, "answer", T0) is None


async def test_a_late_link_calls_back_instead_of_failing(rig: Rig) -> None:
    call = await call_store.create_call(rig.store, T0, "Plan the trip", T0, source="user")
    await rig.tick(T0)
    await rig.tick(T0 + 121)
    rig.http.clear()
    back = await act(rig.store, rig.notifier, call.id, "answer", T0 + 200)
    assert back.mode == "callback" and back.turn == "[call back] Plan the trip" and back.opening is None
    assert back.call.status == "missed" and back.call.answered == T0 + 200
    assert back.conversation_id == call_store.call_conversation(call.id)
    assert rig.http.requests() == []  # nothing rings any more, so nothing to dismiss
    # Called back: the alarm does not ring again.
    assert await rig.tick(T0 + 121 + calls.RERING_AFTER) == []
    declined = await call_store.create_call(rig.store, T0, "Other", T0, source="agent")
    await rig.tick(T0 + 1)
    await act(rig.store, rig.notifier, declined.id, "decline", T0 + 2)
    assert (await act(rig.store, rig.notifier, declined.id, "answer", T0 + 3)).mode == "callback"


async def test_the_watcher_and_an_answer_cannot_both_win(rig: Rig) -> None:
    call = await call_store.create_call(rig.store, T0, "Race", T0, source="agent")
    await rig.tick(T0)
    stale = await rig.call(call.id)
    await act(rig.store, rig.notifier, call.id, "answer", T0 + 130)
    # A watcher holding the old row tries to mark it missed: the fence refuses.
    assert await call_store.move(rig.store, call.id, ("ringing",), T0 + 131, fence_rings=stale.rings,
                                 status="missed") is None
    assert (await rig.call(call.id)).status == "answered"


def test_transitions_at_the_edges() -> None:
    base = Call(id=1, at=T0, reason="r", status="scheduled", created=T0, updated=T0, source="user")
    assert calls.next_step(base, T0 - 0.001) is None and calls.next_step(base, T0) == "ring"
    ringing = base.model_copy(update={"status": "ringing", "rang": T0, "rings": 1})
    assert calls.next_step(ringing, T0 + 120) is None and calls.next_step(ringing, T0 + 120.001) == "miss"
    missed = ringing.model_copy(update={"status": "missed", "ended": T0 + 121})
    assert calls.next_step(missed, T0 + 121 + 299.999) is None and calls.next_step(missed, T0 + 421) == "rering"
    assert calls.next_step(missed.model_copy(update={"rings": 2}), T0 + 10_000) is None
    assert calls.next_step(missed.model_copy(update={"source": "autonomy"}), T0 + 10_000) is None
    with pytest.raises(CallConflict):
        calls.transition(missed.model_copy(update={"rings": 2}), "decline")
    assert calls.transition(missed, "cancel") == ("cancelled", "cancelled")
