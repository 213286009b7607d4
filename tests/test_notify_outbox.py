"""The outbox drainer on both databases, against local servers: every configured channel, a
failing channel retried on the backoff without resending the others, giving up with the reason,
nothing lost when no channel is configured, the whole report to Telegram, device events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from actors.notify import attempts, backoff, outbox, webpush
from actors.notify.channels import Notice
from actors.notify.config import NotifyConfig
from actors.notify.notifier import Notifier
from actors.scheduler import tasks
from actors.store import schema
from actors.store.models import OutboxItem
from actors.store.store import Store
from tests.notify_fakes import Browser, Recorder

TOKEN = "999:outbox-token"
T0 = 1_800_000_000.0


@pytest.fixture
def http() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


def everything(http: Recorder) -> NotifyConfig:
    return NotifyConfig(ntfy_url=http.url, ntfy_topic="owner", telegram_api=http.url, telegram_token=TOKEN,
                        telegram_chat_id="5", app_url="http://app.test")


async def row(store: Store, item_id: int) -> OutboxItem:
    [found] = [o for o in await store.list_outbox() if o.id == item_id]
    return found


async def queue(store: Store, **fields) -> int:
    return await store.add_outbox(OutboxItem(**{"kind": "turn_done", "title": "Iriis finished",
                                                "body": "Done with the plan.", "session_id": "s9", "ts": T0,
                                                **fields}))


async def test_a_row_goes_out_on_every_configured_channel(store: Store, http: Recorder) -> None:
    browser = Browser(f"{http.url}/push/a")
    sub = await webpush.add_subscription(store, browser.endpoint, webpush.SubscriptionKeys(**browser.subscription()["keys"]))
    heard: list[Notice] = []

    async def announce(n: Notice) -> int:
        heard.append(n)
        return 1

    item = await queue(store)
    notifier = Notifier(store, everything(http), announce=announce)
    assert await outbox.drain(store, notifier, T0 + 1) == {"sent": 1}
    done = await row(store, item)
    assert done.status == "sent" and done.delivered_at == T0 + 1 and done.reason is None
    assert done.channels == {f"push:{sub.id}": "sent", "ntfy": "sent", "telegram": "sent", "desktop": "sent"}
    assert browser.decrypt(http.requests(path="/push/a")[0].body)["body"] == "Done with the plan."
    [ntfy] = http.requests(path="/owner")
    assert ntfy.body == b"Done with the plan." and ntfy.header("Click") == "http://app.test/?session=s9"
    assert http.requests(path=f"/bot{TOKEN}/sendMessage")[0].json()["text"].startswith("Iriis finished")
    assert heard[0].kind == "turn_done"
    assert sorted(a.channel for a in await attempts.list_attempts(store, outbox_id=item)) == [
        "desktop", "ntfy", "push", "telegram"]
    # Nothing is due any more: a second pass sends nothing.
    assert await outbox.drain(store, notifier, T0 + 2) == {}
    await notifier.close()


async def test_a_failing_channel_is_retried_on_the_backoff_and_the_others_are_not_resent(
        store: Store, http: Recorder) -> None:
    item = await queue(store)
    http.answers["/owner"] = 503
    notifier = Notifier(store, everything(http))
    assert await outbox.drain(store, notifier, T0) == {"queued": 1}
    waiting = await row(store, item)
    assert waiting.status == "queued" and waiting.attempts == 1 and waiting.next_try == T0 + backoff.DELAYS[0]
    assert waiting.channels["telegram"] == "sent" and waiting.channels["ntfy"].startswith("retry: HTTP 503")
    assert "ntfy" in waiting.reason
    # Not due before its time.
    assert await outbox.drain(store, notifier, T0 + backoff.DELAYS[0] - 1) == {}
    del http.answers["/owner"]
    assert await outbox.drain(store, notifier, T0 + backoff.DELAYS[0]) == {"sent": 1}
    assert len(http.requests(path=f"/bot{TOKEN}/sendMessage")) == 1
    assert len(http.requests(path="/owner")) == 2
    ntfy_tries = [a.ok for a in await attempts.list_attempts(store, outbox_id=item) if a.channel == "ntfy"]
    assert ntfy_tries == [False, True]
    await notifier.close()


async def test_a_channel_that_keeps_failing_is_given_up_with_its_reason(store: Store, http: Recorder) -> None:
    item = await queue(store)
    http.answers["/owner"] = 502
    notifier = Notifier(store, NotifyConfig(ntfy_url=http.url, ntfy_topic="owner"))
    now = T0
    statuses = []
    for _ in range(backoff.MAX_ATTEMPTS):
        statuses.append(await outbox.deliver_row(store, notifier, (await outbox.due_rows(store, now))[0], now))
        now = (await row(store, item)).next_try or now
    assert statuses == ["queued"] * (backoff.MAX_ATTEMPTS - 1) + ["failed"]
    failed = await row(store, item)
    assert failed.attempts == backoff.MAX_ATTEMPTS and failed.next_try is None
    assert failed.reason.startswith("ntfy: HTTP 502")
    assert len(await attempts.list_attempts(store, outbox_id=item)) == backoff.MAX_ATTEMPTS
    await notifier.close()


async def test_a_refusal_is_not_retried_and_a_partial_delivery_says_what_failed(store: Store, http: Recorder) -> None:
    item = await queue(store)
    http.answers["/owner"] = 403
    notifier = Notifier(store, everything(http))
    assert await outbox.drain(store, notifier, T0) == {"sent": 1}
    done = await row(store, item)
    assert done.channels["ntfy"].startswith("failed: HTTP 403") and done.reason.startswith("ntfy: HTTP 403")
    assert len(http.requests(path="/owner")) == 1
    await notifier.close()


async def test_with_no_channel_configured_the_row_waits_and_is_not_lost(store: Store) -> None:
    item = await queue(store)
    notifier = Notifier(store, NotifyConfig())
    assert await outbox.drain(store, notifier, T0) == {"queued": 1}
    waiting = await row(store, item)
    assert waiting.status == "queued" and waiting.reason == outbox.NO_CHANNEL and waiting.attempts == 0
    assert waiting.next_try == T0 + outbox.IDLE_RETRY
    # Past a week it is closed as failed, with the reason, rather than sent out of the blue.
    assert await outbox.drain(store, notifier, T0 + backoff.STALE_SECONDS + 1) == {"failed": 1}
    assert (await row(store, item)).reason.startswith("expired")
    await notifier.close()


async def test_a_finished_tasks_whole_report_goes_to_telegram(store: Store, http: Recorder) -> None:
    task = await tasks.create_task(store, "Research", "look into it", T0)
    report = "The short answer is yes. " + "Detail. " * 700
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.tasks).where(schema.tasks.c.id == task.id).values(result=report))
    await queue(store, kind="task_done", title="Task done: Research", body="The short answer is yes.",
                data={"task_id": task.id})
    notifier = Notifier(store, everything(http))
    await outbox.drain(store, notifier, T0)
    sent = " ".join(s.json()["text"] for s in http.requests(path=f"/bot{TOKEN}/sendMessage"))
    assert report.strip() in sent
    assert http.requests(path="/owner")[0].body == b"The short answer is yes."
    await notifier.close()


async def test_an_emergency_rings_through_ntfy_at_priority_5(store: Store, http: Recorder) -> None:
    await queue(store, kind="autonomy_emergency", title="Iriis: urgent", body="The oven is on.",
                data={"source": "autonomy", "priority": 5})
    notifier = Notifier(store, NotifyConfig(ntfy_url=http.url, ntfy_topic="owner"))
    await outbox.drain(store, notifier, T0)
    assert http.requests(path="/owner")[0].header("Priority") == "5"
    await notifier.close()


async def test_device_events_reach_telegram_only(store: Store, http: Recorder) -> None:
    config = everything(http)
    E = schema.device_events
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(E).values(person_id=1, device_id=None, event="task_done", title="Old",
                                               text="from before", ts=T0))
    assert await outbox.feed_device_events(store, config) == 0  # marks where to start
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(E).values(person_id=1, device_id=3, event="task_done", title="Task t1 is done",
                                               text="Tests: passed.", ts=T0 + 1))
    assert await outbox.feed_device_events(store, config) == 1
    assert await outbox.feed_device_events(store, config) == 0
    notifier = Notifier(store, config)
    assert await outbox.drain(store, notifier, T0 + 2) == {"sent": 1}
    [sent] = http.requests(path=f"/bot{TOKEN}/sendMessage")
    assert sent.json()["text"] == "Task t1 is done\n\nTests: passed."
    assert http.requests(path="/owner") == []
    await notifier.close()
