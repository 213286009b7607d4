"""Telegram's webhook (used when IRIIS_PUBLIC_URL is set; otherwise the scheduler long-polls).

Telegram signs each call with the secret the scheduler registered (`X-Telegram-Bot-Api-Secret-
Token`); anything else is refused. The update is handed to the scheduler, which runs the turn
and sends the reply, so the webhook answers at once.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import hmac
import logging
from typing import Any

from fastapi import APIRouter, Request

from actors.common.names import SCHEDULER, find_actor_async
from actors.notify.telegram import webhook_path, webhook_secret
from serve_apps.http.errors import ApiError
from serve_apps.http.notify_models import TelegramAck, route_config

log = logging.getLogger(__name__)
router = APIRouter()


@router.post(webhook_path())
async def telegram_webhook(request: Request) -> TelegramAck:
    config = route_config()
    if not config.telegram_on or not config.telegram_token:
        raise ApiError(404, "not_found", "Telegram is not configured on this server.")
    sent = request.headers.get("x-telegram-bot-api-secret-token", "")
    if not hmac.compare_digest(sent, webhook_secret(config.telegram_token)):
        raise ApiError(401, "unauthorized", "This webhook answers Telegram only.")
    try:
        update: Any = await request.json()
    except ValueError:
        raise ApiError(400, "invalid_json", "The request body is not valid JSON.") from None
    if not isinstance(update, dict):
        raise ApiError(422, "invalid_request", "An update is a JSON object.")
    handle: Any = await find_actor_async(SCHEDULER)
    if handle is None:
        raise ApiError(503, "scheduler_unavailable", "The scheduler is not running; Telegram will retry.")
    return TelegramAck(ok=bool(await handle.telegram_update.remote(update)))
