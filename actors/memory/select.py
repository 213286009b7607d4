"""Which memories go into one prompt (spec section 7, "Selection per prompt").

Each group is ranked by `score` and capped on its own, so a flood of facts cannot push out
the few lessons or open loops that matter most. Playbook rules are the one group that must
also share a word with the query: a rule is advice for a kind of task and is noise anywhere
else, whereas a strong fact or an open loop is worth recalling even off-topic.

Given embedding similarities (`actors.memory.vectors.similarities_for`), relevance becomes the
fused term of `actors.memory.hybrid` (lexical + weighted semantic), which also catches
paraphrase; without them everything here is the spec's lexical formula, unchanged. Ranking runs
on `actors.memory.index.MemoryIndex` (inverted index, numpy columns); `search` is the one ranked
lookup the HTTP search route and the `memory` MCP server's recall both use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Set

import numpy as np
from pydantic import BaseModel, Field, computed_field

from actors.memory.hybrid import Z_CEIL, Z_FLOOR, standardise
from actors.memory.index import MemoryIndex, Scores, Why, index_for
from actors.memory.model import Kind, MindItem
from actors.memory.scoring import IMPORTANCE_DIVISOR, RECENCY_BASE, RELEVANCE_WEIGHT, SECONDS_PER_HOUR
from actors.common.text import word_set

# Per-group caps; goals have none, as the spec injects all of them.
MEMORY_KINDS: tuple[Kind, ...] = ("fact", "insight", "pattern")
MAX_MEMORIES = 12
MAX_PEOPLE = 5
MAX_LESSONS = 6
MAX_PLAYBOOK = 8
MAX_SKILLS = 3
MAX_OPEN_LOOPS = 8


class Selection(BaseModel):
    """The items chosen for one prompt, each list best first."""

    memories: list[MindItem] = Field(default_factory=list)
    people: list[MindItem] = Field(default_factory=list)
    lessons: list[MindItem] = Field(default_factory=list)
    playbook: list[MindItem] = Field(default_factory=list)
    skills: list[MindItem] = Field(default_factory=list)
    open_loops: list[MindItem] = Field(default_factory=list)
    goals: list[MindItem] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ids(self) -> list[int]:
        """Every selected id once, for the caller to bump `uses` and `last_used`."""
        seen: dict[int, None] = {}
        for group in (self.goals, self.memories, self.people, self.lessons, self.playbook,
                      self.skills, self.open_loops):
            for item in group:
                seen.setdefault(item.id, None)
        return list(seen)


def scored(items: Iterable[MindItem], query_words: Set[str], now: float,
           strengths: Mapping[int, float] | None = None) -> list[tuple[float, MindItem]]:
    """(score, item) for each item: `scoring.score`, or the OLD blend `hybrid.hybrid_score` where
    `strengths` (from `hybrid.standardise`) has the item. The prompt no longer ranks with this
    (see `rank`/`select`, on the fused score); the benchmark keeps it as its "old hybrid"."""
    # Both functions spelled out in one loop, same arithmetic in the same order: this runs over
    # every active item before every model call, and the per-item function calls were 20-40%
    # of its time at 10,000 items (measured here). tests/test_memory_embed.py checks the scores
    # are bit-identical to those functions'.
    out: list[tuple[float, MindItem]] = []
    for item in items:
        item_words = word_set(item.text)
        rel = len(query_words & item_words) / math.sqrt(len(item_words) + 1)
        rel = rel if rel < 1.0 else 1.0
        if strengths is not None:
            z = strengths.get(item.id)
            if z is not None and z > Z_FLOOR:
                sem = (z - Z_FLOOR) / (Z_CEIL - Z_FLOOR)
                if sem > rel:
                    rel = sem if sem < 1.0 else 1.0
        hours = (now - (item.last_used or item.created)) / SECONDS_PER_HOUR
        out.append((RECENCY_BASE ** (hours if hours > 0.0 else 0.0)
                    + item.importance / IMPORTANCE_DIVISOR + RELEVANCE_WEIGHT * rel, item))
    return out


def _chosen(index: MemoryIndex, scores: Scores, mask: np.ndarray | None, limit: int | None) -> list[MindItem]:
    return [index.items[row] for row in scores.top(mask, limit)]


def rank(items: Iterable[MindItem], query: str, now: float, limit: int | None = None,
         similarities: Mapping[int, float] | None = None) -> list[MindItem]:
    """`items` best first for `query`: the spec's score, or the fused one when `similarities`
    (item id -> cosine with the query, from `vectors.similarities_for`) is given. Items missing
    from `similarities` are scored lexically. Ties go to the older id."""
    index = index_for(items)
    strengths = None if similarities is None else standardise(similarities)
    return _chosen(index, index.score(word_set(query), now, strengths), None, limit)


class Found(BaseModel):
    """One search hit: the item, its prompt score and the terms of that score."""

    item: MindItem
    score: float
    why: Why


def search(items: Iterable[MindItem], query: str, now: float, limit: int = 20, kind: str | None = None,
           similarities: Mapping[int, float] | None = None, index: MemoryIndex | None = None) -> list[Found]:
    """The active items about `query` (a shared word, or a similarity that stands out:
    `hybrid.is_related`), best first, scored exactly as the prompt scores them. `similarities`
    should cover the same pool the prompt standardises over (all active items); `kind` only
    filters what is shown, so a score here is the score the prompt gives. `index`: as in `select`."""
    index = index if index is not None else index_for(items)
    strengths = None if similarities is None else standardise(similarities)
    scores = index.score(word_set(query), now, strengths)
    mask = scores.related() & index.active
    if kind is not None:
        mask &= index.kinds_mask((kind,))
    return [Found(item=index.items[row], score=float(scores.total[row]), why=scores.why(row))
            for row in scores.top(mask, limit)]


def select(items: Iterable[MindItem], query: str, now: float,
           similarities: Mapping[int, float] | None = None, index: MemoryIndex | None = None) -> Selection:
    """The active items to show for a prompt about `query` at time `now`.

    Without `similarities` this is exactly the spec's lexical selection. With them (item id ->
    cosine similarity with the query, from `vectors.similarities_for`) relevance is the fused
    term of `actors.memory.hybrid`, and a playbook rule also counts as sharing the query's
    subject when its similarity stands out (`hybrid.Z_RELATED`), so a rule phrased in other
    words still reaches the prompt. `index`, when given, is the index of `items` already built
    (`actors.memory.live` keeps one current); only its active rows are chosen."""
    index = index if index is not None else index_for(items)
    # Standardised over everything the caller scored, so "stands out" means against all memory.
    strengths = None if similarities is None else standardise(similarities)
    scores = index.score(word_set(query), now, strengths)

    def group(kinds: Iterable[Kind], limit: int | None) -> list[MindItem]:
        return _chosen(index, scores, index.kinds_mask(kinds), limit)

    rules = index.kinds_mask(("playbook",)) & scores.related()
    return Selection(
        memories=group(MEMORY_KINDS, MAX_MEMORIES),
        people=group(("person",), MAX_PEOPLE),
        lessons=group(("lesson",), MAX_LESSONS),
        playbook=_chosen(index, scores, rules, MAX_PLAYBOOK),
        skills=group(("skill",), MAX_SKILLS),
        open_loops=group(("open_loop",), MAX_OPEN_LOOPS),
        goals=group(("goal",), None),
    )
