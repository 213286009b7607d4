"""Telegram as a channel, the Ray side: the bot's messages run as turns of the chat's own
conversation (channel "telegram", unattended: confirm-tier actions are declined), through the
same session actors as the web's; updates arrive by long polling, or by the webhook route when
IRIIS_PUBLIC_URL is set (the loop then registers the webhook once)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any


from actors.common.background import spawn
from actors.notify.telegram import TELEGRAM_CHANNEL, TelegramChannel
from actors.scheduler.turns import SessionTurns
from actors.session.events import Done, TurnError

log = logging.getLogger(__name__)
# Waits after a failed poll: a growing pause up to a minute.
BACKOFF = (1.0, 5.0, 15.0, 60.0)


class TelegramTurns(SessionTurns):
    """SessionTurns whose conversations are Telegram's."""

    channel = TELEGRAM_CHANNEL

    async def reply(self, conversation_id: str, message: str) -> str:
        await self.open(conversation_id)
        text = ""
        async for event in self.run(conversation_id, message):
            if isinstance(event, Done):
                text = event.text
            elif isinstance(event, TurnError):
                text = f"Sorry, that did not work: {event.error.message}"
        return text


class TelegramLoop:
    def __init__(self, channel: TelegramChannel | None) -> None:
        self.channel = channel
        self.webhook = bool(channel and channel.config.public_url)
        self.state: dict[str, Any] = {"on": channel is not None, "mode": "webhook" if self.webhook else "polling"}
        self._pending: set[asyncio.Task[Any]] = set()

    def take(self, update: dict[str, Any]) -> bool:
        """An update from the webhook route; answered in the background."""
        if self.channel is None:
            return False
        spawn(self.channel.handle(update), self._pending)
        return True

    async def serve_forever(self) -> None:
        if self.channel is None:
            await asyncio.Event().wait()  # off: nothing to do, ever
            return
        failures = 0
        while True:
            try:
                if self.webhook:
                    if await self.channel.set_webhook():
                        self.state["webhook"] = "set"
                        await asyncio.Event().wait()
                    raise RuntimeError("setWebhook was refused")
                await self.channel.poll_once()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop boundary: back off and poll again
                self.state["error"] = f"{type(exc).__name__}"
                log.warning("telegram: %s; trying again shortly", type(exc).__name__)
                await asyncio.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])
                failures += 1
