"""An in-process index over one pool of memory items, so a prompt's selection does not walk every
item in Python (issue 20).

- Lexical: an inverted index, stemmed word -> the rows whose text has it. A query touches only the
  postings of its own few words; every other item has relevance 0 and keeps only recency and
  importance, which are computed for all rows at once with numpy.
- Semantic: the item vectors are cached by `actors.memory.vectors` (one matrix, one product per
  query); the z-scores arrive here as a mapping and are laid onto the rows.

The score is exactly the prompt's: `hybrid.fused_score` (the spec's recency and importance terms,
`hybrid.fused_relevance` as relevance); tests/test_memory_search.py checks the two agree.

The index is immutable and built from a list of items. `index_for` keeps the last few built in this
process: asked about the same item objects it is reused as is; asked about the same items read
afresh from the store (same ids and texts in the same order, as every prompt reads them) it keeps
the words and postings and reads only the other columns again; anything else (an item added,
edited or removed) builds a new index. Pure: no store, no model.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Iterable, Mapping, Sequence, Set

import numpy as np
from pydantic import BaseModel

from actors.common.text import word_set
from actors.memory.hybrid import FUSION_CEIL, FUSION_FLOOR, FUSION_WEIGHT, Z_RELATED, lexical_weight
from actors.memory.model import KINDS, MindItem
from actors.memory.scoring import (
    IMPORTANCE_DIVISOR,
    RECENCY_BASE,
    RELEVANCE_WEIGHT,
    SECONDS_PER_HOUR,
)

_KIND_CODE = {kind: code for code, kind in enumerate(KINDS)}
_ID = operator.attrgetter("id")
_TEXT = operator.attrgetter("text")


class Why(BaseModel):
    """The terms of one item's score; they add up to the score (rounding aside)."""

    recency: float
    importance: float
    words: float
    meaning: float
    shared_words: list[str]


class Scores:
    """Every row's score for one query, with its terms, ready for ranking and explaining."""

    def __init__(self, index: MemoryIndex, query_words: Set[str], total: np.ndarray, prior: np.ndarray,
                 lexical: np.ndarray, semantic: np.ndarray, z: np.ndarray | None, now: float,
                 words: np.ndarray | None = None) -> None:
        self.index, self.query_words, self.total, self.now = index, query_words, total, now
        self.prior, self.lexical, self.semantic, self.z = prior, lexical, semantic, z
        # The lexical term as the score counts it (`hybrid.lexical_weight` applied).
        self.words = lexical if words is None else words

    def related(self) -> np.ndarray:
        """Rows about the query at all: a shared word, or a z over Z_RELATED (`hybrid.is_related`)."""
        mask = self.lexical > 0.0
        if self.z is not None:
            mask |= self.z > Z_RELATED
        return mask

    def top(self, mask: np.ndarray | None, limit: int | None) -> list[int]:
        """Rows best first (ties to the older id), within `mask`, at most `limit`."""
        rows = np.arange(len(self.total)) if mask is None else np.flatnonzero(mask)
        if limit is not None and len(rows) > limit:
            if limit <= 0:
                return []
            values = self.total[rows]
            # Everything scoring at least the limit-th best, so ties at the cut keep id order.
            cut = np.partition(values, len(values) - limit)[len(values) - limit]
            rows = rows[values >= cut]
        order = np.lexsort((self.index.ids[rows], -self.total[rows]))
        chosen = rows[order]
        return (chosen if limit is None else chosen[:limit]).tolist()

    def why(self, row: int) -> Why:
        item = self.index.items[row]
        recency = float(self.prior[row]) - item.importance / IMPORTANCE_DIVISOR
        return Why(recency=recency, importance=item.importance / IMPORTANCE_DIVISOR,
                   words=RELEVANCE_WEIGHT * float(self.words[row]),
                   meaning=RELEVANCE_WEIGHT * float(self.semantic[row]),
                   shared_words=sorted(self.query_words & self.index.words[row]))


class MemoryIndex:
    """One pool of items: their word sets, an inverted index and the score's columns as arrays."""

    def __init__(self, items: Iterable[MindItem]) -> None:
        self.items: list[MindItem] = list(items)
        n = len(self.items)
        self.words: list[frozenset[str]] = [word_set(item.text) for item in self.items]
        self.id_list: list[int] = [item.id for item in self.items]
        self.texts: list[str] = [item.text for item in self.items]
        self.ids = np.array(self.id_list, dtype=np.int64)
        self.row_of: dict[int, int] = dict(zip(self.id_list, range(n)))
        self._columns()
        self.norm = np.fromiter((math.sqrt(len(w) + 1) for w in self.words), dtype=np.float64, count=n)
        postings: dict[str, list[int]] = {}
        for row, item_words in enumerate(self.words):
            for word in item_words:
                postings.setdefault(word, []).append(row)
        self.postings = {word: np.array(rows, dtype=np.intp) for word, rows in postings.items()}

    def _columns(self) -> None:
        """The columns that change without the text changing (use bumps last_used, say)."""
        n = len(self.items)
        self.importance = np.fromiter((item.importance for item in self.items), dtype=np.float64, count=n)
        self.stamp = np.fromiter((item.last_used or item.created for item in self.items), dtype=np.float64, count=n)
        self.kind = np.fromiter((_KIND_CODE[item.kind] for item in self.items), dtype=np.int8, count=n)
        self.active = np.fromiter((item.active for item in self.items), dtype=bool, count=n)

    def patched(self, changed: Iterable[MindItem], removed: Iterable[int] = ()) -> MemoryIndex:
        """A copy with `changed` items applied (same id: replaced in place, new id: appended) and
        the `removed` ids switched off, touching only those rows: what `actors.memory.live` keeps
        current between prompts. An item whose text changed keeps its row but its words move."""
        changed = list(changed)
        copy = object.__new__(MemoryIndex)
        copy.__dict__.update(self.__dict__)
        copy.items = list(self.items)
        # The word lists and the id map are copied only when a row is added or its text changes.
        if any(item.id not in self.row_of or item.text != self.texts[self.row_of[item.id]] for item in changed):
            copy.words, copy.id_list, copy.texts = list(self.words), list(self.id_list), list(self.texts)
            copy.row_of = dict(self.row_of)
        copy.importance, copy.stamp = self.importance.copy(), self.stamp.copy()
        copy.kind, copy.active, copy.norm = self.kind.copy(), self.active.copy(), self.norm.copy()
        for item_id in removed:
            row = copy.row_of.get(item_id)
            if row is not None:
                copy.active[row] = False
        fresh = [item for item in changed if item.id not in copy.row_of]
        moved: dict[str, list[int]] = {}   # word -> rows gained; rows losing a word are masked below
        lost: dict[str, set[int]] = {}
        for item in changed:
            row = copy.row_of.get(item.id)
            if row is None:
                continue
            if item.text != copy.texts[row]:
                old, new = copy.words[row], word_set(item.text)
                for word in old - new:
                    lost.setdefault(word, set()).add(row)
                for word in new - old:
                    moved.setdefault(word, []).append(row)
                copy.words[row], copy.texts[row] = new, item.text
                copy.norm[row] = math.sqrt(len(new) + 1)
            copy.items[row] = item
            copy.importance[row] = item.importance
            copy.stamp[row] = item.last_used or item.created
            copy.kind[row] = _KIND_CODE[item.kind]
            copy.active[row] = item.active
        if fresh:
            start = len(copy.items)
            for offset, item in enumerate(fresh):
                row = start + offset
                words = word_set(item.text)
                copy.items.append(item)
                copy.words.append(words)
                copy.id_list.append(item.id)
                copy.texts.append(item.text)
                copy.row_of[item.id] = row
                for word in words:
                    moved.setdefault(word, []).append(row)
            copy.ids = np.array(copy.id_list, dtype=np.int64)
            copy.importance = np.append(copy.importance, [i.importance for i in fresh])
            copy.stamp = np.append(copy.stamp, [i.last_used or i.created for i in fresh])
            copy.kind = np.append(copy.kind, np.array([_KIND_CODE[i.kind] for i in fresh], dtype=np.int8))
            copy.active = np.append(copy.active, [i.active for i in fresh])
            copy.norm = np.append(copy.norm, [math.sqrt(len(w) + 1) for w in copy.words[start:]])
        if moved or lost:
            copy.postings = dict(self.postings)
            for word in set(moved) | set(lost):
                rows = copy.postings.get(word, np.empty(0, dtype=np.intp))
                if word in lost:
                    rows = rows[~np.isin(rows, list(lost[word]))]
                if word in moved:
                    rows = np.concatenate([rows, np.array(moved[word], dtype=np.intp)])
                if len(rows):
                    copy.postings[word] = rows
                else:
                    copy.postings.pop(word, None)
        return copy

    def refreshed(self, items: Sequence[MindItem]) -> MemoryIndex | None:
        """A copy for `items` when they are this index's items re-read (same ids and texts, in
        order) with other fields possibly changed: the words and postings are kept, the other
        columns read again. None when ids or texts differ (then build a new index)."""
        if len(items) != len(self.items):
            return None
        if not all(map(operator.eq, map(_ID, items), self.id_list)):
            return None
        if not all(map(operator.eq, map(_TEXT, items), self.texts)):
            return None
        copy = object.__new__(MemoryIndex)
        copy.__dict__.update(self.__dict__)
        copy.items = list(items)
        copy._columns()
        return copy

    def __len__(self) -> int:
        return len(self.items)

    def same_items(self, items: Sequence[MindItem]) -> bool:
        """Whether `items` are this index's item objects, in order (an O(n) identity check in C)."""
        return len(items) == len(self.items) and all(map(operator.is_, items, self.items))

    def kinds_mask(self, kinds: Iterable[str], active_only: bool = True) -> np.ndarray:
        codes = [_KIND_CODE[kind] for kind in kinds]
        mask = np.isin(self.kind, codes)
        return mask & self.active if active_only else mask

    def lexical(self, query_words: Set[str]) -> np.ndarray:
        """The spec's relevance term for every row, from the postings of the query's words only."""
        rel = np.zeros(len(self.items), dtype=np.float64)
        hits = [self.postings[w] for w in query_words if w in self.postings]
        if not hits:
            return rel
        rows, overlap = np.unique(np.concatenate(hits) if len(hits) > 1 else hits[0], return_counts=True)
        rel[rows] = np.minimum(1.0, overlap / self.norm[rows])
        return rel

    def z_rows(self, strengths: Mapping[int, float]) -> np.ndarray:
        """z per row (NaN where the item has no vector)."""
        z = np.full(len(self.items), np.nan)
        row_of = self.row_of
        pairs = [(row_of[i], v) for i, v in strengths.items() if i in row_of]
        if pairs:
            rows, values = zip(*pairs)
            z[np.fromiter(rows, dtype=np.intp, count=len(rows))] = values
        return z

    def score(self, query_words: Set[str], now: float, strengths: Mapping[int, float] | None = None) -> Scores:
        """Every row's `hybrid.fused_score` (or the spec's score where an item has no z)."""
        hours = np.maximum(0.0, (now - self.stamp) / SECONDS_PER_HOUR)
        prior = np.power(RECENCY_BASE, hours) + self.importance / IMPORTANCE_DIVISOR
        lexical = self.lexical(query_words)
        z = None
        words = lexical
        semantic = np.zeros(len(self.items), dtype=np.float64)
        if strengths is not None:
            z = self.z_rows(strengths)
            with np.errstate(invalid="ignore"):
                above = z > FUSION_FLOOR
            semantic[above] = FUSION_WEIGHT * np.minimum(1.0, (z[above] - FUSION_FLOOR) / (FUSION_CEIL - FUSION_FLOOR))
            # Shared words count in proportion to how well the best word match in the pool covers
            # the query (`hybrid.lexical_weight`); an item without a vector keeps the spec's term.
            has_vector = ~np.isnan(z)
            if has_vector.any():
                weight = lexical_weight(float(lexical[has_vector].max()))
                if weight != 1.0:
                    words = np.where(has_vector, weight * lexical, lexical)
        total = prior + RELEVANCE_WEIGHT * (words + semantic)
        return Scores(self, query_words, total, prior, lexical, semantic, z, now, words)


# A few pools at once: the prompt's, and those other callers (camera, scheduler) select from.
KEEP_INDEXES = 4
_lock = threading.Lock()
_kept: list[MemoryIndex] = []


def index_for(items: Iterable[MindItem]) -> MemoryIndex:
    """The index of `items`: one kept in this process when they are the same objects, or the same
    items re-read (`MemoryIndex.refreshed`), else a new one. The last KEEP_INDEXES are kept."""
    pool = items if isinstance(items, (list, tuple)) else list(items)
    with _lock:
        kept = list(_kept)
    for index in kept:
        if index.same_items(pool):
            return index
    source: MemoryIndex | None = None
    built: MemoryIndex | None = None
    for index in kept:
        built = index.refreshed(pool)
        if built is not None:
            source = index
            break
    if built is None:
        built = MemoryIndex(pool)
    with _lock:
        # The refreshed copy takes its source's place; a new index pushes out the oldest.
        rest = [i for i in _kept if i is not source]
        _kept[:] = [built, *rest[:KEEP_INDEXES - 1]]
    return built


def reset_index_cache() -> None:
    with _lock:
        _kept.clear()
