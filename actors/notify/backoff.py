"""When a failed delivery is tried again, and which failures are worth trying again.

A push service or bot API that is down (a 5xx, a timeout, no connection) or says "slow down"
(429, with its hint) is retried on a growing delay; anything else it refuses (a 4xx) will not
change by waiting, so that channel is given up at once. A Web Push endpoint answering 404 or
410 is gone: its subscription is deleted.
"""

from __future__ import annotations

from typing import Literal

Verdict = Literal["ok", "retry", "give_up", "gone"]

# Seconds before the next try after the first, second, ... failed pass.
DELAYS: tuple[float, ...] = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0)
# Passes before a still-failing channel is recorded as failed.
MAX_ATTEMPTS = len(DELAYS) + 1
# The longest hint from a 429 that is waited for.
MAX_HINT = 3600.0
# An outbox row this old that was never delivered is closed as failed (expired), not retried.
STALE_SECONDS = 7 * 86_400.0


def verdict(status: int | None, push: bool = False) -> Verdict:
    """What an HTTP answer means; `status` None is a transport error (timeout, refused)."""
    if status is None:
        return "retry"
    if 200 <= status < 300:
        return "ok"
    if push and status in (404, 410):
        return "gone"
    if status in (408, 425, 429) or status >= 500:
        return "retry"
    return "give_up"


def delay(attempt: int, hint: float | None = None) -> float:
    """Seconds to wait after the `attempt`-th failed pass (1-based); a retry hint that is
    longer wins, up to MAX_HINT."""
    base = DELAYS[min(max(attempt, 1), len(DELAYS)) - 1]
    return max(base, min(hint, MAX_HINT)) if hint else base


def exhausted(attempt: int) -> bool:
    return attempt >= MAX_ATTEMPTS


def retry_hint(headers: dict[str, str], body: object = None) -> float | None:
    """Retry-After seconds (header), or Telegram's `parameters.retry_after`."""
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
    if isinstance(body, dict):
        params = body.get("parameters")
        if isinstance(params, dict) and isinstance(params.get("retry_after"), int | float):
            return float(params["retry_after"])
    return None
