"""Telegram as a channel: messages to the bot from the configured chat become turns of one
Telegram conversation, and the reply goes back as messages. Updates come by long polling
(`getUpdates`; the offset is kept in the store and moved past an update before its turn
runs, so a restart never runs a message twice) or by
the webhook route when the server has a public address.

The turn runs unattended (no confirmation UI here), so confirm-tier actions are declined by
construction. A message from any other chat gets no answer at all; it is logged.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel

from actors.notify import channels
from actors.notify.config import NotifyConfig
from actors.store.store import Store

log = logging.getLogger(__name__)
OFFSET_KV = "telegram.offset"
POLL_SECONDS = 25
TELEGRAM_CHANNEL = "telegram"
ONLY_TEXT = "Only text messages reach me here for now."
# (conversation id, message) -> the reply's text
RunTurn = Callable[[str, str], Awaitable[str]]


class Incoming(BaseModel):
    update_id: int
    chat_id: str
    text: str | None


def parse_update(update: dict[str, Any]) -> Incoming | None:
    """The message in an update, or None for updates that carry none (edits, joins...)."""
    message = update.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("chat"), dict):
        return None
    text = message.get("text")
    return Incoming(update_id=int(update.get("update_id", 0)), chat_id=str(message["chat"].get("id")),
                    text=text.strip() if isinstance(text, str) and text.strip() else None)


def conversation_for(chat_id: str) -> str:
    return "telegram-" + re.sub(r"[^A-Za-z0-9_-]", "_", chat_id)[:50]


def webhook_secret(token: str) -> str:
    """The secret Telegram sends back with each webhook call (derived from the bot token)."""
    return hashlib.sha256(f"iriis-telegram-webhook:{token}".encode()).hexdigest()


# The webhook's route under the API's prefix (`/v1`), and the whole path Telegram is given.
WEBHOOK_ROUTE = "/telegram/webhook"


def webhook_path() -> str:
    return "/v1" + WEBHOOK_ROUTE


class TelegramChannel:
    def __init__(self, store: Store, config: NotifyConfig, run_turn: RunTurn,
                 http: httpx.AsyncClient | None = None) -> None:
        self.store = store
        self.config = config
        self.run_turn = run_turn
        self.http = http or httpx.AsyncClient(timeout=config.timeout)

    async def handle(self, update: dict[str, Any]) -> str | None:
        """One update: the reply sent, or None when there was nothing to answer."""
        incoming = parse_update(update)
        if incoming is None:
            return None
        if incoming.chat_id != str(self.config.telegram_chat_id):
            log.warning("telegram: a message from chat %s was ignored (not the configured chat)", incoming.chat_id)
            return None
        if incoming.text is None:
            reply = ONLY_TEXT
        else:
            try:
                reply = await self.run_turn(conversation_for(incoming.chat_id), incoming.text)
            except Exception as exc:  # noqa: BLE001 - the owner hears that it failed
                log.exception("telegram: the turn failed")
                reply = f"Sorry, that did not work ({type(exc).__name__})."
        await self.reply(incoming.chat_id, reply or "(no reply)")
        return reply

    async def reply(self, chat_id: str, text: str) -> None:
        for piece in channels.split_text(text):
            request = channels.telegram_send(self.config, piece, chat_id)
            resp = await self.http.request(request.method, request.url, json=request.json_body)
            if resp.status_code >= 300:
                log.warning("telegram: sendMessage answered %s", resp.status_code)

    async def poll_once(self, timeout: int = POLL_SECONDS) -> int:
        """One getUpdates long poll; each update is answered, then the offset moves past it.
        Returns how many updates came."""
        offset = await self.store.get_kv(OFFSET_KV)
        request = channels.telegram_get_updates(self.config, offset, timeout)
        resp = await self.http.request(request.method, request.url, json=request.json_body,
                                       timeout=timeout + self.config.timeout)
        resp.raise_for_status()
        updates = resp.json().get("result") or []
        for update in updates:
            await self.store.set_kv(OFFSET_KV, int(update.get("update_id", 0)) + 1)
            await self.handle(update)
        return len(updates)

    async def set_webhook(self) -> bool:
        assert self.config.public_url and self.config.telegram_token
        request = channels.telegram_set_webhook(self.config, self.config.public_url + webhook_path(),
                                                webhook_secret(self.config.telegram_token))
        resp = await self.http.request(request.method, request.url, json=request.json_body)
        return resp.status_code == 200 and bool(resp.json().get("ok"))
