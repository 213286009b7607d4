"""Telegram's webhook (used when IRIIS_PUBLIC_URL is set; otherwise the scheduler long-polls).

Telegram signs each call with the secret the scheduler registered (`X-Telegram-Bot-Api-Secret-
Token`); anything else is refused. The update is handed to the scheduler, which runs the turn
and sends the reply, so the webhook answers at once.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import hmac
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from ray.actor import ActorHandle

from actors.common.names import SCHEDULER, find_actor_async
from actors.notify.telegram import WEBHOOK_ROUTE, webhook_secret
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.notify_models import TelegramAck, route_config

log = logging.getLogger(__name__)
router = APIRouter()
Secret = Annotated[str, Header(alias="X-Telegram-Bot-Api-Secret-Token",
                               description="The secret the scheduler registered with Telegram.")]
# The update is read only after the 404 and 401 checks, so FastAPI cannot see it: declared here.
UPDATE = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "A Telegram Update."}}}}}


@router.post(WEBHOOK_ROUTE, responses=error_responses(401, 404), openapi_extra=UPDATE)
async def telegram_webhook(request: Request, sent: Secret = "") -> TelegramAck:
    config = route_config()
    if not config.telegram_on or not config.telegram_token:
        raise ApiError(404, "not_found", "Telegram is not configured on this server.")
    # As bytes: compare_digest refuses str with non-ASCII characters (a 500 for a stray header).
    if not hmac.compare_digest(sent.encode(), webhook_secret(config.telegram_token).encode()):
        raise ApiError(401, "unauthorized", "This webhook answers Telegram only.")
    try:
        update: Any = await request.json()
    except ValueError:
        raise ApiError(400, "invalid_json", "The request body is not valid JSON.") from None
    if not isinstance(update, dict):
        raise ApiError(422, "invalid_request", "An update is a JSON object.")
    handle: ActorHandle = await find_actor_async(SCHEDULER)
    if handle is None:
        raise ApiError(503, "scheduler_unavailable", "The scheduler is not running; Telegram will retry.")
    return TelegramAck(ok=bool(await handle.telegram_update.remote(update)))
