"""The channels' HTTP requests, built without sending anything: what goes to ntfy, to the
Telegram Bot API and to a Web Push service is decided here and tested byte for byte; the
notifier only sends what these return.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, Field

from actors.notify.config import NotifyConfig

# Telegram refuses a message over 4096 characters: a long report goes as several, in order.
TELEGRAM_MAX_CHARS = 4096
# A push service may refuse more than 4 KB of payload; the text is cut to fit well under it.
PUSH_BODY_CHARS = 1000
NTFY_BODY_CHARS = 4000


class HttpRequest(BaseModel):
    method: Literal["GET", "POST", "PUT", "DELETE"]
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes | None = None
    json_body: dict[str, Any] | None = None


class Notice(BaseModel):
    """One thing to tell the owner, as every channel renders it."""

    kind: str
    title: str
    body: str
    # The whole text where a channel can take it (Telegram: a task's full report).
    full: str | None = None
    url: str | None = None
    # ntfy priority 1-5 (5 rings through an insistent alarm); Web Push urgency follows it.
    priority: int = Field(default=3, ge=1, le=5)
    # ntfy's sequence id: later updates, clears and deletes name the same notification.
    sequence_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    # Seconds a push service keeps it for an offline browser.
    ttl: int = 86_400
    tags: list[str] = Field(default_factory=list)


def _header_text(text: str) -> str:
    """A header value: ASCII as it is, anything else as an RFC 2047 encoded word (ntfy reads both)."""
    one_line = " ".join(text.split())
    try:
        one_line.encode("ascii")
        return one_line
    except UnicodeEncodeError:
        return "=?UTF-8?B?" + base64.b64encode(one_line.encode()).decode("ascii") + "?="


# -- ntfy --------------------------------------------------------------------------------------

def _ntfy_auth(config: NotifyConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {config.ntfy_token}"} if config.ntfy_token else {}


def _topic_url(config: NotifyConfig) -> str:
    return f"{config.ntfy_url}/{quote(config.ntfy_topic or '', safe='')}"


def ntfy_publish(config: NotifyConfig, notice: Notice) -> HttpRequest:
    headers = {"Title": _header_text(notice.title), "Priority": str(notice.priority),
               "Content-Type": "text/plain; charset=utf-8", **_ntfy_auth(config)}
    if notice.url:
        headers["Click"] = notice.url
    if notice.sequence_id:
        headers["X-Sequence-ID"] = notice.sequence_id
    if notice.tags:
        headers["Tags"] = ",".join(notice.tags)
    body = (notice.body or notice.title)[:NTFY_BODY_CHARS]
    return HttpRequest(method="POST", url=_topic_url(config), headers=headers, content=body.encode())


def ntfy_clear(config: NotifyConfig, sequence_id: str) -> HttpRequest:
    """Marks the notification read and takes it off the phone (stops an insistent alarm)."""
    return HttpRequest(method="PUT", url=f"{_topic_url(config)}/{quote(sequence_id, safe='')}/clear",
                       headers=_ntfy_auth(config))


def ntfy_delete(config: NotifyConfig, sequence_id: str) -> HttpRequest:
    return HttpRequest(method="DELETE", url=f"{_topic_url(config)}/{quote(sequence_id, safe='')}",
                       headers=_ntfy_auth(config))


# -- Telegram ----------------------------------------------------------------------------------

def telegram_url(config: NotifyConfig, method: str) -> str:
    return f"{config.telegram_api}/bot{config.telegram_token}/{method}"


def split_text(text: str, limit: int = TELEGRAM_MAX_CHARS) -> list[str]:
    """Pieces of at most `limit` characters, cut at the last paragraph break in the second half
    of the window, else a line break, else a space, else hard, so a long report reads in order."""
    text = text.strip()
    pieces: list[str] = []
    while len(text) > limit:
        for sep in ("\n\n", "\n", " "):
            cut = text.rfind(sep, 0, limit)
            if cut >= limit // 2:
                break
        else:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces


def telegram_text(notice: Notice) -> str:
    body = notice.full or notice.body
    text = f"{notice.title}\n\n{body}" if body and body != notice.title else notice.title
    return f"{text}\n\n{notice.url}" if notice.url else text


def telegram_send(config: NotifyConfig, text: str, chat_id: str | None = None) -> HttpRequest:
    return HttpRequest(method="POST", url=telegram_url(config, "sendMessage"),
                       json_body={"chat_id": chat_id or config.telegram_chat_id, "text": text,
                                  "disable_web_page_preview": True})


def telegram_messages(config: NotifyConfig, notice: Notice) -> list[HttpRequest]:
    return [telegram_send(config, piece) for piece in split_text(telegram_text(notice))]


def telegram_get_updates(config: NotifyConfig, offset: int | None, timeout: int) -> HttpRequest:
    body: dict[str, Any] = {"timeout": timeout, "allowed_updates": ["message"]}
    if offset is not None:
        body["offset"] = offset
    return HttpRequest(method="POST", url=telegram_url(config, "getUpdates"), json_body=body)


def telegram_set_webhook(config: NotifyConfig, url: str, secret: str) -> HttpRequest:
    return HttpRequest(method="POST", url=telegram_url(config, "setWebhook"),
                       json_body={"url": url, "secret_token": secret, "allowed_updates": ["message"]})


# -- Web Push ----------------------------------------------------------------------------------

def origin(endpoint: str) -> str:
    """The push service's origin, which the VAPID JWT's `aud` must name."""
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}"


def push_payload(notice: Notice) -> bytes:
    """What the service worker receives (decrypted): title, body, the link and the data, whose
    `kind` says what it is (`call` rings; anything else is a plain notification)."""
    data = {"kind": notice.kind, **notice.data}
    return json.dumps({"title": notice.title, "body": notice.body[:PUSH_BODY_CHARS], "url": notice.url,
                       "tag": notice.sequence_id or notice.kind, "data": data},
                      separators=(",", ":")).encode()


def push_urgency(notice: Notice) -> str:
    return "high" if notice.priority >= 5 else "normal" if notice.priority >= 3 else "low"
