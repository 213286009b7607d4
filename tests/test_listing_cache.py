"""The AgentLoop's copy of the hub's tool listings (actors/tools/listing_cache.py)."""

from __future__ import annotations

from actors.tools.listing_cache import ListingCache


def test_without_a_watch_a_copy_lasts_the_short_ttl() -> None:
    cache: ListingCache[str] = ListingCache(ttl=2.0, max_age=30.0)
    assert cache.get(1, 0.0) is None
    cache.put(1, "tools", 10.0, cache.stamp)
    assert cache.get(1, 12.0) == "tools"
    assert cache.get(1, 12.1) is None
    assert cache.get(2, 10.0) is None  # per person


def test_with_a_watch_a_copy_lasts_until_the_hub_changes_or_max_age() -> None:
    cache: ListingCache[str] = ListingCache(ttl=2.0, max_age=30.0)
    cache.heard("a:0")
    cache.put(1, "tools", 10.0, cache.stamp)
    # A person's pace (minutes between turns is common) no longer costs a hub call each turn.
    assert cache.get(1, 25.0) == "tools"
    assert cache.get(1, 40.1) is None  # the safety bound
    cache.put(1, "tools", 41.0, cache.stamp)
    cache.heard("a:0")  # the watch's timeout: same stamp, the copy stays
    assert cache.get(1, 42.0) == "tools"
    cache.heard("a:1")  # a device came online: every copy goes
    assert cache.get(1, 42.0) is None


def test_a_copy_asked_for_before_a_change_was_heard_is_not_served_after_it() -> None:
    cache: ListingCache[str] = ListingCache(ttl=2.0, max_age=30.0)
    cache.heard("a:0")
    asked_under = cache.stamp
    cache.heard("a:1")  # the change arrives while the listing call is on its way
    cache.put(1, "old tools", 10.0, asked_under)
    assert cache.get(1, 10.5) is None


def test_a_lost_watch_falls_back_to_the_short_ttl() -> None:
    cache: ListingCache[str] = ListingCache(ttl=2.0, max_age=30.0)
    cache.heard("a:0")
    cache.put(1, "tools", 10.0, cache.stamp)
    cache.lost()  # the hub died: a restarted one starts a new stamp
    assert cache.get(1, 11.0) == "tools"
    assert cache.get(1, 13.0) is None
    cache.heard("b:0")
    assert cache.get(1, 11.0) is None
