"""The one notifier: a Notice goes out over every configured channel at once, each attempt is
recorded, and each target's outcome comes back for the caller (the outbox drainer, the call
watcher) to decide what happens next.

Targets are named `push:<subscription id>`, `ntfy`, `telegram` and `desktop`. Sending is plain
httpx; the desktop announce is injected (the scheduler hands it the owner's connected desktop
devices), so this module has no Ray in it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import httpx
from pydantic import BaseModel

from actors.notify import attempts as attempt_log
from actors.notify import backoff, channels, webpush
from actors.notify.attempts import Attempt
from actors.notify.channels import HttpRequest, Notice
from actors.notify.config import NotifyConfig
from actors.store.store import Store

log = logging.getLogger(__name__)

CHANNELS: tuple[str, ...] = ("push", "ntfy", "telegram", "desktop")
# Reaches the owner's connected desktop devices; returns how many it reached.
Announce = Callable[[Notice], Awaitable[int]]
State = Literal["sent", "retry", "failed", "gone", "skipped"]
NO_DESKTOP = "no desktop device is connected"


class Outcome(BaseModel):
    target: str
    state: State
    status_code: int | None = None
    error: str | None = None
    hint: float | None = None

    @property
    def done(self) -> bool:
        return self.state != "retry"


class _Answer(BaseModel):
    status: int | None
    headers: dict[str, str] = {}
    body: Any = None
    error: str | None = None


def channel_of(target: str) -> str:
    return target.split(":", 1)[0]


class Notifier:
    def __init__(self, store: Store, config: NotifyConfig, http: httpx.AsyncClient | None = None,
                 announce: Announce | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.store = store
        self.config = config
        self.http = http or httpx.AsyncClient(timeout=config.timeout)
        self.announce = announce
        self.clock = clock
        self.sleep = sleep

    async def close(self) -> None:
        await self.http.aclose()

    # -- which targets ---------------------------------------------------------------------------

    async def targets(self, only: list[str] | None = None) -> list[str]:
        """Every configured target now, limited to the channels in `only` when given."""
        wanted = set(only or CHANNELS)
        found: list[str] = []
        if "push" in wanted:
            found += [f"push:{s.id}" for s in await webpush.list_subscriptions(self.store)]
        if "ntfy" in wanted and self.config.ntfy_on:
            found.append("ntfy")
        if "telegram" in wanted and self.config.telegram_on:
            found.append("telegram")
        if "desktop" in wanted and self.announce is not None:
            found.append("desktop")
        return found

    # -- sending ---------------------------------------------------------------------------------

    async def send(self, notice: Notice, targets: list[str] | None = None, *, outbox_id: int | None = None,
                   call_id: int | None = None, retries: int = 0) -> dict[str, Outcome]:
        """Send to `targets` (every configured one when None) at once. `retries`: extra tries
        in place, a second then three apart, for what cannot wait for the outbox's backoff (a
        ringing call)."""
        chosen = await self.targets() if targets is None else targets
        results = await asyncio.gather(*(self._one(t, notice, outbox_id, call_id, retries) for t in chosen))
        return {o.target: o for o in results}

    async def _one(self, target: str, notice: Notice, outbox_id: int | None, call_id: int | None,
                   retries: int) -> Outcome:
        for tried in range(retries + 1):
            if tried:
                await self.sleep(1.0 if tried == 1 else 3.0)
            try:
                outcome = await self._deliver(target, notice)
            except Exception as exc:  # noqa: BLE001 - one channel's bug must not stop the others
                log.exception("notify: %s failed unexpectedly", target)
                outcome = Outcome(target=target, state="retry", error=self._mask(f"{type(exc).__name__}: {exc}"))
            if outcome.state != "skipped":
                await attempt_log.record(self.store, [Attempt(
                    ts=self.clock(), outbox_id=outbox_id, call_id=call_id, channel=channel_of(target), target=target,
                    ok=outcome.state == "sent", status_code=outcome.status_code, error=outcome.error)])
            if outcome.done:
                return outcome
        return outcome

    async def _deliver(self, target: str, notice: Notice) -> Outcome:
        channel = channel_of(target)
        if channel == "push":
            return await self._push(target, notice)
        if channel == "ntfy":
            if not self.config.ntfy_on:
                return Outcome(target=target, state="skipped", error="ntfy is not configured")
            return self._outcome(target, await self._http(channels.ntfy_publish(self.config, notice)))
        if channel == "telegram":
            if not self.config.telegram_on:
                return Outcome(target=target, state="skipped", error="Telegram is not configured")
            outcome = Outcome(target=target, state="sent")
            for request in channels.telegram_messages(self.config, notice):
                outcome = self._outcome(target, await self._http(request))
                if outcome.state != "sent":
                    break
            return outcome
        if channel == "desktop":
            if self.announce is None:
                return Outcome(target=target, state="skipped", error=NO_DESKTOP)
            reached = await self.announce(notice)
            return Outcome(target=target, state="sent" if reached else "skipped",
                           error=None if reached else NO_DESKTOP)
        return Outcome(target=target, state="failed", error=f"unknown channel {channel!r}")

    async def _push(self, target: str, notice: Notice) -> Outcome:
        sub = await webpush.get_subscription(self.store, int(target.split(":", 1)[1]))
        if sub is None:
            return Outcome(target=target, state="skipped", error="the subscription was removed")
        keys = await webpush.vapid_keys(self.store)
        request = webpush.push_request(sub, keys, self.config.vapid_subject, notice, self.clock())
        outcome = self._outcome(target, await self._http(request), push=True)
        if outcome.state == "gone":
            await webpush.delete_subscription(self.store, sub.id)
            log.info("push subscription %s is gone (%s): deleted", sub.id, outcome.status_code)
        elif outcome.state == "sent":
            await webpush.subscription_ok(self.store, sub.id, self.clock())
        return outcome

    # -- ntfy alerts by sequence id ------------------------------------------------------------

    async def ntfy_dismiss(self, sequence_id: str, call_id: int | None = None) -> list[Outcome]:
        """Clear, then delete, the ntfy notification with this sequence id (a call that stopped
        ringing: an insistent alarm stops on the phone). Nothing when ntfy is off."""
        if not self.config.ntfy_on:
            return []
        found: list[Outcome] = []
        for request in (channels.ntfy_clear(self.config, sequence_id), channels.ntfy_delete(self.config, sequence_id)):
            outcome = self._outcome("ntfy", await self._http(request))
            found.append(outcome)
            await attempt_log.record(self.store, [Attempt(
                ts=self.clock(), call_id=call_id, channel="ntfy", target=f"ntfy:{request.method.lower()}",
                ok=outcome.state == "sent", status_code=outcome.status_code, error=outcome.error)])
        return found

    # -- HTTP ------------------------------------------------------------------------------------

    async def _http(self, request: HttpRequest) -> _Answer:
        try:
            resp = await self.http.request(request.method, request.url, headers=request.headers,
                                           content=request.content, json=request.json_body)
        except httpx.HTTPError as exc:
            return _Answer(status=None, error=self._mask(f"{type(exc).__name__}: {exc}"))
        try:
            body: Any = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            body = resp.text
        return _Answer(status=resp.status_code, headers=dict(resp.headers), body=body)

    def _outcome(self, target: str, answer: _Answer, push: bool = False) -> Outcome:
        verdict = backoff.verdict(answer.status, push=push)
        if verdict == "ok" and isinstance(answer.body, dict) and answer.body.get("ok") is False:
            verdict = "give_up"
        if verdict == "ok":
            return Outcome(target=target, state="sent", status_code=answer.status)
        error = answer.error or self._mask(f"HTTP {answer.status}: {str(answer.body)[:300]}")
        state: State = {"retry": "retry", "gone": "gone"}.get(verdict, "failed")  # type: ignore[assignment]
        return Outcome(target=target, state=state, status_code=answer.status, error=error,
                       hint=backoff.retry_hint(answer.headers, answer.body))

    def _mask(self, text: str) -> str:
        for secret in (self.config.telegram_token, self.config.ntfy_token):
            if secret:
                text = text.replace(secret, "***")
        return text
