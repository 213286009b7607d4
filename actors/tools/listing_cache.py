"""The AgentLoop's copy of the ToolHub's listings, one per person (no Ray here).

Each turn needs the tools on offer. Asking the hub costs an actor round trip (benchmarks/
MEASURED.md), so a replica keeps what it was told. A copy is good while the hub's
change stamp (`ToolHub.listing_changed`, parked on the hub and answered on every change of a
server or a device) is the one the copy was taken under, and for at most `max_age` seconds
even then, in case some change reached no stamp. While no watch is running (before the first
answer, or after the hub died), a copy is good for `ttl` seconds only, as before the watch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
# Seconds a copy serves with no watch running, and with one.
TTL = 2.0
MAX_AGE = 30.0


@dataclass
class _Copy(Generic[T]):
    value: T
    taken: float
    stamp: str | None


@dataclass
class ListingCache(Generic[T]):
    ttl: float = TTL
    max_age: float = MAX_AGE
    stamp: str | None = None      # the hub's change stamp, as the running watch last heard it
    watching: bool = False        # whether a watch is parked on the hub now
    _copies: dict[Any, _Copy[T]] = field(default_factory=dict)

    def get(self, key: Any, now: float) -> T | None:
        """The copy for `key` if it is still good at `now`, else None (ask the hub)."""
        copy = self._copies.get(key)
        if copy is None:
            return None
        age = now - copy.taken
        if not self.watching:
            return copy.value if age <= self.ttl else None
        if copy.stamp != self.stamp:
            return None
        return copy.value if age <= self.max_age else None

    def put(self, key: Any, value: T, now: float, stamp: str | None) -> None:
        """Keep what the hub said; `stamp` is `self.stamp` as it was when the question was
        asked (a change heard meanwhile makes this copy stale at once)."""
        self._copies[key] = _Copy(value, now, stamp)

    def heard(self, stamp: str) -> None:
        """The watch answered: a new stamp drops every copy taken under another."""
        if stamp != self.stamp:
            self._copies.clear()
            self.stamp = stamp
        self.watching = True

    def lost(self) -> None:
        """The watch failed (the hub died or is restarting): copies last `ttl` again."""
        self.watching = False
