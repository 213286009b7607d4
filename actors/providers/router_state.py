"""Provider-routing state: which provider/model to try next for one model kind.

One ``RouterState`` exists per model kind (chat, vision, speech). It holds no
network code; callers report what happened and ask what to try next, which
keeps the rules testable with an injected clock and no Ray.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterable

import pydantic

# A timeout is the worst outcome for a person waiting, so the provider is
# pushed behind every measured one and benched long enough to recover.
TIMEOUT_EMA: float = 30.0
TIMEOUT_REST: float = 120.0
# 5xx errors are usually brief overloads; a short bench avoids hammering.
SERVER_ERROR_REST: float = 15.0
# A Retry-After this short is cheaper to wait out than to fall back to a
# slower provider.
SHORT_WAIT: float = 3.0
# Providers that rate-limit without a hint usually reset per minute.
DEFAULT_RATE_REST: float = 60.0
# Longest a waiting person may be kept waiting for a provider to free up
# before the caller should give up.
WAIT_FOR_FREE: float = 35.0

# Weight of the previous average; 0.6 keeps one slow answer from demoting a
# provider that is usually fast, while still reacting within a few calls.
_EMA_KEEP: float = 0.6


class RouteEntry(pydantic.BaseModel):
    provider: str
    model: str
    base_url: str
    api_key_env: str | None = None
    max_images: int = 8
    # The local model: tried only after every hosted provider failed or is resting (spec
    # section 13, "else: local model"), whatever its latency.
    fallback: bool = False
    # Runtime fields, changed by RouterState as outcomes are reported.
    ema: float | None = None  # None means never measured
    rest_until: float = 0.0
    retired: bool = False

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.model}"


class RouterState:
    def __init__(
        self,
        entries: list[RouteEntry],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._entries: list[RouteEntry] = []
        # Copies, so that runtime fields never leak into a shared config list.
        self.add_entries(entries)

    @property
    def entries(self) -> list[RouteEntry]:
        return list(self._entries)

    def _get(self, key: str) -> RouteEntry:
        for entry in self._entries:
            if entry.key == key:
                return entry
        raise KeyError(key)

    def _rest(self, entry: RouteEntry, seconds: float) -> None:
        # Never shorten a rest that is already longer (e.g. a 503 arriving
        # from a late in-flight call after a timeout bench).
        entry.rest_until = max(entry.rest_until, self._clock() + seconds)

    def candidates(self, images: int = 0) -> list[RouteEntry]:
        now = self._clock()
        ready = [
            (index, entry)
            for index, entry in enumerate(self._entries)
            if not entry.retired and now >= entry.rest_until and images <= entry.max_images
        ]
        # Unmeasured entries sort as infinitely slow so that a provider that
        # has proven itself stays first; ties keep the configured order.
        ready.sort(key=lambda pair: (pair[1].fallback, pair[1].ema if pair[1].ema is not None else math.inf,
                                     pair[0]))
        return [entry for _, entry in ready]

    def record_success(self, key: str, elapsed: float) -> None:
        entry = self._get(key)
        if entry.ema is None:
            entry.ema = elapsed
        else:
            entry.ema = _EMA_KEEP * entry.ema + (1.0 - _EMA_KEEP) * elapsed

    def record_timeout(self, key: str) -> None:
        entry = self._get(key)
        entry.ema = TIMEOUT_EMA
        self._rest(entry, TIMEOUT_REST)

    def record_server_error(self, key: str) -> None:
        self._rest(self._get(key), SERVER_ERROR_REST)

    def record_rate_limit(self, key: str, retry_after: float | None) -> float:
        """Return how long the caller should wait before retrying this entry.

        0.0 means: do not retry it, move on to the next candidate.
        """
        entry = self._get(key)
        if retry_after is not None and 0 <= retry_after <= SHORT_WAIT:
            return float(retry_after)
        self._rest(entry, retry_after if retry_after is not None and retry_after > 0 else DEFAULT_RATE_REST)
        return 0.0

    def record_not_found(self, key: str) -> None:
        # A 404 means the model name was withdrawn; retrying would never help.
        self._get(key).retired = True

    def record_too_many_images(self, key: str, sent: int) -> None:
        entry = self._get(key)
        # min() so a stale report can never raise a limit already learned lower.
        entry.max_images = min(entry.max_images, max(0, sent - 1))

    def add_entries(self, entries: Iterable[RouteEntry]) -> None:
        known = {entry.key for entry in self._entries}
        for entry in entries:
            if entry.key in known:
                continue
            known.add(entry.key)
            self._entries.append(entry.model_copy())

    def seconds_until_ready(self, images: int = 0) -> float | None:
        now = self._clock()
        waits = [
            max(0.0, entry.rest_until - now)
            for entry in self._entries
            if not entry.retired and images <= entry.max_images and not entry.fallback
        ]
        if not waits:
            return None
        return min(waits)

    def portable(self) -> list[RouteEntry]:
        """The entries with each rest given as seconds from now, for `from_portable` in another
        process: monotonic clocks are per machine, so an absolute rest would mean nothing on
        another node."""
        now = self._clock()
        return [entry.model_copy(update={"rest_until": max(0.0, entry.rest_until - now)})
                for entry in self._entries]

    @classmethod
    def from_portable(cls, entries: list[RouteEntry],
                      clock: Callable[[], float] = time.monotonic) -> "RouterState":
        """A copy of another process's state (`portable`), its rests counted on this clock."""
        now = clock()
        return cls([entry.model_copy(update={"rest_until": now + entry.rest_until if entry.rest_until > 0 else 0.0})
                    for entry in entries], clock)

    def snapshot(self) -> list[dict[str, Any]]:
        now = self._clock()
        return [
            {
                "key": entry.key,
                "ema": entry.ema,
                "resting_s": max(0.0, entry.rest_until - now),
                "retired": entry.retired,
                "max_images": entry.max_images,
            }
            for entry in self._entries
        ]
