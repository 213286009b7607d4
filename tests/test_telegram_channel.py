"""Telegram as a channel against a local Bot API: the configured chat's messages become turns of
its own conversation and the reply goes back (whole, in pieces); other chats get nothing and are
logged; the polling offset survives; the webhook route checks Telegram's secret."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from actors.notify.config import NotifyConfig
from actors.notify.telegram import OFFSET_KV, ONLY_TEXT, TelegramChannel, conversation_for, webhook_secret
from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.routes import telegram as routes
from tests.notify_fakes import Recorder

TOKEN = "555:bot-token"
CHAT = "1001"


@pytest.fixture
def api() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


def update(update_id: int, chat: str, text: str | None = "hello") -> dict[str, Any]:
    message: dict[str, Any] = {"message_id": update_id, "chat": {"id": int(chat), "type": "private"}, "date": 0}
    if text is not None:
        message["text"] = text
    return {"update_id": update_id, "message": message}


class Turns:
    def __init__(self, reply: str = "Hi, owner.") -> None:
        self.reply = reply
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, conversation_id: str, message: str) -> str:
        self.seen.append((conversation_id, message))
        return self.reply


def channel(store: Store, api: Recorder, turns: Turns) -> TelegramChannel:
    return TelegramChannel(store, NotifyConfig(telegram_api=api.url, telegram_token=TOKEN, telegram_chat_id=CHAT),
                           turns)


def sent(api: Recorder) -> list[dict[str, Any]]:
    return [s.json() for s in api.requests("POST", f"/bot{TOKEN}/sendMessage")]


async def test_the_owners_message_is_a_turn_and_the_reply_goes_back(store: Store, api: Recorder) -> None:
    turns = Turns()
    tg = channel(store, api, turns)
    api.updates.put(update(10, CHAT, "what is on today?"))
    assert await tg.poll_once(timeout=1) == 1
    assert turns.seen == [(conversation_for(CHAT), "what is on today?")]
    assert [(m["chat_id"], m["text"]) for m in sent(api)] == [(CHAT, "Hi, owner.")]
    assert await store.get_kv(OFFSET_KV) == 11
    # The next poll asks past what was answered.
    await tg.poll_once(timeout=0)
    polls = api.requests("POST", f"/bot{TOKEN}/getUpdates")
    assert "offset" not in polls[0].json() and polls[-1].json()["offset"] == 11
    await tg.http.aclose()


async def test_another_chat_gets_nothing_and_is_logged(store: Store, api: Recorder,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    turns = Turns()
    tg = channel(store, api, turns)
    with caplog.at_level(logging.WARNING, logger="actors.notify.telegram"):
        assert await tg.handle(update(3, "666", "give me the owner's notes")) is None
    assert turns.seen == [] and sent(api) == []
    assert "chat 666" in caplog.text
    await tg.http.aclose()


async def test_a_long_reply_arrives_whole_in_order(store: Store, api: Recorder) -> None:
    reply = "\n\n".join(f"Paragraph {i}. " + ("text " * 300).strip() for i in range(6))
    tg = channel(store, api, Turns(reply))
    await tg.handle(update(1, CHAT))
    texts = [m["text"] for m in sent(api)]
    assert len(texts) > 1 and all(len(t) <= 4096 for t in texts)
    assert "\n\n".join(texts) == reply.strip()
    await tg.http.aclose()


async def test_a_message_without_text_is_answered_plainly(store: Store, api: Recorder) -> None:
    turns = Turns()
    tg = channel(store, api, turns)
    await tg.handle(update(1, CHAT, text=None))
    assert turns.seen == [] and [m["text"] for m in sent(api)] == [ONLY_TEXT]
    assert await tg.handle({"update_id": 2, "edited_message": {}}) is None
    await tg.http.aclose()


async def test_a_failed_turn_is_told_not_hidden(store: Store, api: Recorder) -> None:
    async def broken(_conversation: str, _message: str) -> str:
        raise RuntimeError("model down")

    tg = TelegramChannel(store, NotifyConfig(telegram_api=api.url, telegram_token=TOKEN, telegram_chat_id=CHAT),
                         broken)
    await tg.handle(update(1, CHAT))
    assert sent(api)[0]["text"].startswith("Sorry, that did not work")
    await tg.http.aclose()


async def test_the_webhook_is_registered_with_its_secret(store: Store, api: Recorder) -> None:
    config = NotifyConfig(telegram_api=api.url, telegram_token=TOKEN, telegram_chat_id=CHAT,
                          public_url="https://iriis.example")
    tg = TelegramChannel(store, config, Turns())
    assert await tg.set_webhook()
    [hook] = api.requests("POST", f"/bot{TOKEN}/setWebhook")
    assert hook.json()["url"] == "https://iriis.example/v1/telegram/webhook"
    assert hook.json()["secret_token"] == webhook_secret(TOKEN) and TOKEN not in webhook_secret(TOKEN)
    await tg.http.aclose()


# -- the webhook route, in-process -----------------------------------------------------------

class _Scheduler:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        outer = self

        class _Take:
            async def remote(self, upd: dict[str, Any]) -> bool:
                outer.updates.append(upd)
                return True
        self.telegram_update = _Take()


@pytest.fixture
async def webhook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[httpx.AsyncClient, _Scheduler]]:
    from tests.test_tasks_routes import _Gateway

    scheduler = _Scheduler()

    async def find(_name: str) -> _Scheduler:
        return scheduler

    monkeypatch.setattr(routes, "find_actor_async", find)
    monkeypatch.setattr(routes, "route_config", lambda: NotifyConfig(telegram_token=TOKEN, telegram_chat_id=CHAT))
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'w.sqlite3'}")
    await migrate(store)
    app = FastAPI()
    app.include_router(routes.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client, scheduler
    await store.close()


async def test_the_webhook_takes_telegrams_updates_only(webhook) -> None:
    client, scheduler = webhook
    body = update(7, CHAT)
    refused = await client.post("/v1/telegram/webhook", json=body, headers={"X-Telegram-Bot-Api-Secret-Token": "x"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")
    assert (await client.post("/v1/telegram/webhook", json=body)).status_code == 401
    assert scheduler.updates == []
    ok = await client.post("/v1/telegram/webhook", json=body,
                           headers={"X-Telegram-Bot-Api-Secret-Token": webhook_secret(TOKEN)})
    assert ok.status_code == 200 and ok.json() == {"ok": True}
    assert scheduler.updates == [body]
