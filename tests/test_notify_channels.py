"""Each channel against a local server the test starts: Web Push decrypted with the
subscription's own keys (and a 410 deleting it), ntfy's and Telegram's exact requests, and the
VAPID key pair made once."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from py_vapid import Vapid02

from actors.notify import attempts, webpush
from actors.notify.channels import Notice, split_text
from actors.notify.config import NotifyConfig
from actors.notify.notifier import Notifier
from actors.store.store import Store
from tests.notify_fakes import Browser, Recorder, jwt_claims

TOKEN = "123456:telegram-test-token"


@pytest.fixture
def http() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


def notice(**fields) -> Notice:
    return Notice(**{"kind": "turn_done", "title": "Iriis finished", "body": "The report is ready.",
                     "url": "http://app.test/?session=s1", **fields})


async def subscribe(store: Store, browser: Browser) -> webpush.Subscription:
    sub = browser.subscription()
    return await webpush.add_subscription(store, sub["endpoint"], webpush.SubscriptionKeys(**sub["keys"]))


# -- Web Push ----------------------------------------------------------------------------------

async def test_web_push_payload_decrypts_with_the_subscriptions_own_keys(store: Store, http: Recorder) -> None:
    browser = Browser(f"{http.url}/push/sub-1")
    sub = await subscribe(store, browser)
    notifier = Notifier(store, NotifyConfig(vapid_subject="mailto:owner@example.com"))
    before = time.time()
    outcomes = await notifier.send(notice(data={"session_id": "s1"}))
    assert outcomes[f"push:{sub.id}"].state == "sent"
    [seen] = http.requests("POST", "/push/sub-1")
    assert seen.header("Content-Encoding") == "aes128gcm" and seen.header("TTL") == "86400"
    assert browser.decrypt(seen.body) == {
        "title": "Iriis finished", "body": "The report is ready.", "url": "http://app.test/?session=s1",
        "tag": "turn_done", "data": {"kind": "turn_done", "session_id": "s1"}}
    # The JWT: signed by the server's key (the one GET /v1/push/key hands out), for the push
    # service's origin, expiring within 24 hours.
    auth = seen.header("Authorization")
    assert auth.startswith("vapid t=") and Vapid02.verify(auth)
    keys = await webpush.vapid_keys(store)
    assert auth.endswith(f",k={keys.public}")
    claims = jwt_claims(auth)
    assert claims["aud"] == http.url and claims["sub"] == "mailto:owner@example.com"
    assert before < claims["exp"] <= time.time() + 24 * 3600
    [attempt] = await attempts.list_attempts(store)
    assert attempt.channel == "push" and attempt.ok and attempt.status_code == 200
    assert (await webpush.get_subscription(store, sub.id)).last_ok is not None
    await notifier.close()


@pytest.mark.parametrize("status", [410, 404])
async def test_a_subscription_the_push_service_calls_gone_is_deleted(store: Store, http: Recorder, status: int) -> None:
    gone, kept = Browser(f"{http.url}/push/gone"), Browser(f"{http.url}/push/kept")
    gone_sub, kept_sub = await subscribe(store, gone), await subscribe(store, kept)
    http.answers["/push/gone"] = status
    notifier = Notifier(store, NotifyConfig())
    outcomes = await notifier.send(notice())
    assert outcomes[f"push:{gone_sub.id}"].state == "gone"
    assert outcomes[f"push:{kept_sub.id}"].state == "sent"
    assert [s.id for s in await webpush.list_subscriptions(store)] == [kept_sub.id]
    await notifier.close()


async def test_a_push_service_that_is_down_keeps_the_subscription_for_a_retry(store: Store, http: Recorder) -> None:
    sub = await subscribe(store, Browser(f"{http.url}/push/busy"))
    http.answers["/push/busy"] = 503
    notifier = Notifier(store, NotifyConfig())
    outcome = (await notifier.send(notice()))[f"push:{sub.id}"]
    assert outcome.state == "retry" and outcome.status_code == 503
    assert await webpush.get_subscription(store, sub.id) is not None
    await notifier.close()


async def test_vapid_keys_are_made_once_and_kept_in_the_database(store: Store) -> None:
    first = await webpush.vapid_keys(store)
    assert await webpush.vapid_keys(store) == first
    assert (await store.get_kv(webpush.VAPID_KV))["public"] == first.public
    assert len(webpush.b64url_decode(first.public)) == 65 and len(webpush.b64url_decode(first.private)) == 32


def test_browser_keys_are_checked() -> None:
    good = Browser("https://push.example/x").subscription()["keys"]
    assert webpush.check_keys(webpush.SubscriptionKeys(**good)) is None
    bad = webpush.SubscriptionKeys(p256dh="A" * 87, auth=good["auth"])
    assert "P-256" in webpush.check_keys(bad)
    short = webpush.SubscriptionKeys(p256dh=good["p256dh"], auth="AAAAAAAAAAA")
    assert "16 bytes" in webpush.check_keys(short)


# -- ntfy --------------------------------------------------------------------------------------

def ntfy_config(http: Recorder, **extra) -> NotifyConfig:
    return NotifyConfig(ntfy_url=http.url, ntfy_topic="iriis-test", **extra)


async def test_ntfy_gets_priority_sequence_id_click_and_token(store: Store, http: Recorder) -> None:
    notifier = Notifier(store, ntfy_config(http, ntfy_token="tk_secret"))
    out = await notifier.send(notice(priority=5, sequence_id="42", title="Iriis is calling", body="Stand-up",
                                     url="http://app.test/?call=42", tags=["telephone_receiver"]))
    assert out["ntfy"].state == "sent"
    [seen] = http.requests()
    assert (seen.method, seen.path) == ("POST", "/iriis-test")
    assert seen.header("Priority") == "5" and seen.header("X-Sequence-ID") == "42"
    assert seen.header("Click") == "http://app.test/?call=42" and seen.header("Title") == "Iriis is calling"
    assert seen.header("Authorization") == "Bearer tk_secret" and seen.header("Tags") == "telephone_receiver"
    assert seen.body == b"Stand-up"
    await notifier.close()


async def test_ntfy_title_outside_ascii_is_an_encoded_word(store: Store, http: Recorder) -> None:
    notifier = Notifier(store, ntfy_config(http))
    await notifier.send(notice(title="Café à 9 h"))
    [seen] = http.requests()
    assert seen.header("Title").startswith("=?UTF-8?B?") and seen.header("Authorization") is None
    await notifier.close()


async def test_ntfy_dismiss_clears_then_deletes_by_sequence_id(store: Store, http: Recorder) -> None:
    notifier = Notifier(store, ntfy_config(http))
    await notifier.ntfy_dismiss("42", call_id=42)
    assert [(s.method, s.path) for s in http.requests()] == [("PUT", "/iriis-test/42/clear"),
                                                             ("DELETE", "/iriis-test/42")]
    assert [a.target for a in await attempts.list_attempts(store, call_id=42)] == ["ntfy:put", "ntfy:delete"]
    await notifier.close()


async def test_ntfy_is_off_until_a_topic_is_set(store: Store, http: Recorder) -> None:
    notifier = Notifier(store, NotifyConfig(ntfy_url=http.url))
    assert await notifier.targets() == [] and await notifier.ntfy_dismiss("1") == []
    await notifier.close()


# -- Telegram ----------------------------------------------------------------------------------

def telegram_config(http: Recorder) -> NotifyConfig:
    return NotifyConfig(telegram_api=http.url, telegram_token=TOKEN, telegram_chat_id="777")


async def test_telegram_gets_the_whole_text_in_order(store: Store, http: Recorder) -> None:
    notifier = Notifier(store, telegram_config(http))
    report = " ".join(f"word{i}" for i in range(2500))  # 21,389 characters: six messages
    out = await notifier.send(notice(full=report))
    assert out["telegram"].state == "sent"
    sent = http.requests("POST", f"/bot{TOKEN}/sendMessage")
    assert len(sent) == 6 and all(s.json()["chat_id"] == "777" for s in sent)
    texts = [s.json()["text"] for s in sent]
    assert all(len(t) <= 4096 for t in texts)
    assert " ".join(texts) == f"Iriis finished\n\n{report}\n\nhttp://app.test/?session=s1"
    await notifier.close()


async def test_telegram_slow_down_is_retried_with_its_hint_and_a_refusal_is_not(store: Store, http: Recorder) -> None:
    notifier = Notifier(store, telegram_config(http))
    http.answers[f"/bot{TOKEN}/sendMessage"] = 429
    slow = (await notifier.send(notice()))["telegram"]
    assert slow.state == "retry" and slow.status_code == 429
    http.answers[f"/bot{TOKEN}/sendMessage"] = 403
    refused = (await notifier.send(notice()))["telegram"]
    assert refused.state == "failed" and TOKEN not in (refused.error or "")
    await notifier.close()


async def test_an_unreachable_channel_is_retried_and_the_token_never_shows(store: Store) -> None:
    config = NotifyConfig(telegram_api="http://127.0.0.1:9", telegram_token=TOKEN, telegram_chat_id="1", timeout=2)
    notifier = Notifier(store, config)
    outcome = (await notifier.send(notice()))["telegram"]
    assert outcome.state == "retry" and TOKEN not in outcome.error
    [attempt] = await attempts.list_attempts(store)
    assert not attempt.ok and TOKEN not in attempt.error
    await notifier.close()


def test_split_text_at_the_limit_under_and_over() -> None:
    assert split_text("a" * 4096) == ["a" * 4096]
    assert split_text("a" * 4097) == ["a" * 4096, "a"]
    assert split_text("short") == ["short"]
    para = "x" * 3000 + "\n\n" + "y" * 3000
    assert split_text(para) == ["x" * 3000, "y" * 3000]


async def test_desktop_announce_counts_as_sent_only_when_a_device_took_it(store: Store) -> None:
    heard: list[Notice] = []

    async def announce(n: Notice) -> int:
        heard.append(n)
        return len(heard) - 1  # the first finds no device, the second one

    notifier = Notifier(store, NotifyConfig(), announce=announce)
    assert (await notifier.send(notice()))["desktop"].state == "skipped"
    assert (await notifier.send(notice()))["desktop"].state == "sent"
    assert [a.channel for a in await attempts.list_attempts(store)] == ["desktop"]
    await notifier.close()
