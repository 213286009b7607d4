"""What the channels need to know, read once from the settings and passed by value (it crosses
Ray as a plain model). A channel whose settings are missing is simply off."""

from __future__ import annotations

from pydantic import BaseModel

from actors.settings import Settings


class NotifyConfig(BaseModel):
    ntfy_url: str = "https://ntfy.sh"
    ntfy_topic: str | None = None
    ntfy_token: str | None = None
    telegram_token: str | None = None
    telegram_chat_id: str | None = None
    telegram_api: str = "https://api.telegram.org"
    # The app's own address: call links (`<app>/?call=<id>`) and Telegram's webhook.
    app_url: str = "http://127.0.0.1:8000"
    # Set only when IRIIS_PUBLIC_URL is: then Telegram delivers by webhook, not long polling.
    public_url: str | None = None
    vapid_subject: str = "mailto:owner@iriis.invalid"
    calls_interval: float = 10.0
    notify_interval: float = 5.0
    # One HTTP request's limit, seconds.
    timeout: float = 10.0

    @property
    def ntfy_on(self) -> bool:
        return bool(self.ntfy_topic)

    @property
    def telegram_on(self) -> bool:
        return bool(self.telegram_token and self.telegram_chat_id)

    def call_url(self, call_id: int) -> str:
        return f"{self.app_url}/?call={call_id}"


def notify_config(settings: Settings) -> NotifyConfig:
    public = (settings.iriis_public_url or "").rstrip("/") or None
    host = settings.iriis_host if settings.iriis_host not in ("0.0.0.0", "::") else "127.0.0.1"
    return NotifyConfig(
        ntfy_url=settings.iriis_ntfy_url, ntfy_topic=settings.iriis_ntfy_topic, ntfy_token=settings.iriis_ntfy_token,
        telegram_token=settings.iriis_telegram_token, telegram_chat_id=settings.iriis_telegram_chat_id,
        telegram_api=settings.iriis_telegram_api, app_url=public or f"http://{host}:{settings.iriis_port}",
        public_url=public, vapid_subject=settings.iriis_vapid_subject,
        calls_interval=settings.iriis_calls_interval, notify_interval=settings.iriis_notify_interval)
