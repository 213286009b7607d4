"""What the push, calls and Telegram routes take and answer (`XPublic` / `XList{data, count}`),
and the channels' settings they share.

No `from __future__ import annotations`: FastAPI builds request and response schemas from these.
"""

from datetime import datetime
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from actors.notify.calls import Call
from actors.notify.config import NotifyConfig, notify_config
from actors.notify.webpush import SubscriptionKeys
from actors.settings import load_settings
from serve_apps.http.models import Page


# -- Web Push ----------------------------------------------------------------------------------

class PushKey(BaseModel):
    """The server's VAPID public key (urlsafe base64): the browser's applicationServerKey."""

    key: str


class PushSubscriptionBody(BaseModel):
    """The browser's PushSubscription JSON, as `subscription.toJSON()` gives it."""

    model_config = ConfigDict(extra="ignore")

    endpoint: str = Field(min_length=8, max_length=2000, pattern=r"^https?://")
    keys: SubscriptionKeys
    expirationTime: float | None = None


class PushSubscriptionPublic(BaseModel):
    id: int
    endpoint: str
    created: float
    last_ok: float | None = None


class PushSubscriptionList(Page[PushSubscriptionPublic]):
    pass


class Queued(BaseModel):
    id: int
    status: str = "queued"


class ChannelsPublic(BaseModel):
    """Which channels are on: Web Push subscriptions, ntfy, Telegram (and how it receives)."""

    push_subscriptions: int
    ntfy: bool
    ntfy_topic: str | None = None
    telegram: bool
    telegram_mode: str | None = None
    app_url: str


# -- calls ---------------------------------------------------------------------------------------

class CallCreate(BaseModel):
    # Epoch seconds, ISO 8601 (without an offset: the owner's IRIIS_TIMEZONE) or "in 5 minutes";
    # now when omitted.
    at: float | datetime | str | None = None
    reason: str = Field(min_length=1, max_length=300)
    opening: str | None = Field(default=None, max_length=1000)
    # A cron expression ("30 7 * * 1-5") or an interval ("every 1h", "daily").
    repeat: str | None = Field(default=None, max_length=120)


class CallPublic(Call):
    # The link the notifications open (`<app>/?call=<id>`).
    link: str


class CallList(Page[CallPublic]):
    pass


class CallAnswer(BaseModel):
    """What answering, declining or cancelling did. For `answered` and `callback`: the voice
    session opens in `conversation_id`; speak `opening` if there is one, else send `turn` as the
    first message so the agent speaks first."""

    call: CallPublic
    mode: str
    conversation_id: str | None = None
    opening: str | None = None
    turn: str | None = None


class TelegramAck(BaseModel):
    ok: bool


def call_public(call: Call, link: str) -> CallPublic:
    return CallPublic(**call.model_dump(), link=link)


@lru_cache(maxsize=1)
def route_config() -> NotifyConfig:
    """The channels' settings as this replica read them at first use."""
    return notify_config(load_settings())
