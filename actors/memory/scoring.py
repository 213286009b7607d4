"""How well a memory item suits a prompt: recency + importance + word overlap (spec section 7).

score = 0.995 ** hours_since(last_used or created)
      + importance / 10
      + 1.6 * min(1, |words(query) & words(item)| / sqrt(|words(item)| + 1))

The overlap is divided by the item's own length so that a long item does not win merely by
containing many words, and capped so relevance cannot drown recency and importance entirely.
"""

from __future__ import annotations

import math
from collections.abc import Set

from actors.memory.model import MindItem
from actors.common.text import word_set

RECENCY_BASE = 0.995
IMPORTANCE_DIVISOR = 10.0
RELEVANCE_WEIGHT = 1.6
SECONDS_PER_HOUR = 3600.0


def hours_since(ts: float, now: float) -> float:
    """Hours from `ts` to `now`; a timestamp in the future (clock skew between writers) counts
    as now, so no item can score more than fully recent."""
    return max(0.0, (now - ts) / SECONDS_PER_HOUR)


def recency(item: MindItem, now: float) -> float:
    return RECENCY_BASE ** hours_since(item.last_used or item.created, now)


def relevance(item: MindItem, query_words: Set[str]) -> float:
    item_words = word_set(item.text)
    overlap = len(query_words & item_words)
    return min(1.0, overlap / math.sqrt(len(item_words) + 1))


def score(item: MindItem, query: str | Set[str], now: float) -> float:
    """The spec's score. `query` is the prompt text, or its `words()` when scoring many items
    against one query."""
    query_words = word_set(query) if isinstance(query, str) else query
    return (recency(item, now)
            + item.importance / IMPORTANCE_DIVISOR
            + RELEVANCE_WEIGHT * relevance(item, query_words))


def jaccard(a: Set[str], b: Set[str]) -> float:
    """|a & b| / |a | b|. Two empty sets give 0: texts with no content words ("ok", "yes")
    say nothing alike, so they must not count as duplicates of each other."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0
