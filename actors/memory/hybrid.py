"""Relevance that also catches paraphrase: the spec's word overlap fused with embedding similarity.

The spec's relevance term, min(1, |shared words| / sqrt(|item words| + 1)), is zero for "Where does
my sibling reside?" against "The owner's sister lives in Lisbon". A sentence encoder's cosine
similarity is not. How far an item's cosine stands out from the other memories' cosines with the
same query (a z-score, `standardise`) is mapped onto 0..1 and ADDED to the lexical term, while
recency and importance stay exactly as the spec writes them:

    score     = recency + importance / 10 + 1.6 * relevance
    relevance = w_q * lexical + FUSION_WEIGHT * clip((z - FUSION_FLOOR) / (FUSION_CEIL - FUSION_FLOOR), 0, 1)
    w_q       = clip((best lexical in the pool - LEXICAL_FLOOR) / (1 - LEXICAL_FLOOR), 0, 1)

`w_q` is one number per query: how well the best word match in the whole pool covers the query.
When some memory shares most of the query's words (best lexical near 1) the words count in full;
when no memory does (a paraphrase: the best overlap is one stray word), shared words are noise that
lifts distractors, and meaning alone decides. Without a vector the relevance is the spec's lexical
term alone, so a store without the encoder scores exactly as the spec does.

How these were chosen (benchmarks/memory_retrieval.py --sweep; 160 items, the 149 `tuned` queries
split into even and odd halves; the 126 `held_out` queries were not looked at while choosing):
- The first blend (the benchmark's "old hybrid", kept below as `semantic` / `hybrid_relevance` /
  `hybrid_score`) took max(lexical, semantic) capped at 1: a target sharing the query's words
  (lexical 1.0, z 6.4) tied with a loosely related newer item (z 4) and recency decided, so
  word-sharing MRR fell below lexical alone's.
- A plain sum (w_q = 1, weight 2.0) fixed that but a paraphrase query's stray shared words lifted
  distractors: paraphrase MRR 0.61 against the semantic term alone's 0.65 on the even half. Scaling
  the lexical term per item by its own z, or by a constant under 1, did not close that gap
  (distractors with stray words are semantically close too); RRF and noisy-or were worse.
- The rule: on both halves, every query type's recall@5 and MRR at least the better of lexical
  alone and semantic alone. The query-level weight above (floor 0.5) with FUSION_WEIGHT 3.0,
  floor 1.5, ceiling 4.0 was the only family that came within 0.003 of it summed over all
  shortfalls (the best plain sum missed by 0.17).
- The weight is 3.0 because the spec score's recency (0..1) and importance (0.1..1) terms swing
  by up to 1.9 between items, and a paraphrase is only found if its evidence outweighs that.
  Ranking by cosine alone, ignoring recency and importance, does better still on paraphrases
  (the benchmark reports it as `cosine_only`), but the spec's terms are kept.
- A pool of a few items says nothing about what "typical" is, so the pool's mean and spread are
  pulled towards the encoder's typical unrelated-pair statistics (PRIOR_*, measured on the
  benchmark's unrelated pairs) as if PRIOR_WEIGHT such pairs had been seen too. With thousands
  of items the pool's own statistics dominate.
- A playbook rule must be about the query; with embeddings "about" means a shared word or
  z over Z_RELATED (3.0): 63% of paraphrase targets clear it and 0.6% of unrelated pairs do.
  Search and recall show only such related items.
Pure: no model, no store; vectors arrive already unit-length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set

import numpy as np

from actors.memory.model import MindItem
from actors.memory.scoring import IMPORTANCE_DIVISOR, RELEVANCE_WEIGHT, recency, relevance

# The fusion (issue 20).
FUSION_WEIGHT = 3.0
# Shared words count in full once the pool's best word match reaches 1.0, not at all under this.
LEXICAL_FLOOR = 0.5
FUSION_FLOOR = 1.5
FUSION_CEIL = 4.0
# The previous max() blend (issue 19): the benchmark's "old hybrid" baseline.
Z_FLOOR = 2.0
Z_CEIL = 3.5
Z_RELATED = 3.0
# Cosine of unrelated (query, memory) pairs with the default encoder: mean 0.019, sd 0.067.
PRIOR_MEAN = 0.02
PRIOR_STD = 0.067
PRIOR_WEIGHT = 20


def standardise(similarities: Mapping[int, float]) -> dict[int, float]:
    """Item id -> how many standard deviations the item's cosine stands above the pool's."""
    if not similarities:
        return {}
    values = np.fromiter(similarities.values(), dtype=np.float64, count=len(similarities))
    n = len(values)
    mean = (values.sum() + PRIOR_WEIGHT * PRIOR_MEAN) / (n + PRIOR_WEIGHT)
    variance = (((values - mean) ** 2).sum()
                + PRIOR_WEIGHT * (PRIOR_STD ** 2 + (PRIOR_MEAN - mean) ** 2)) / (n + PRIOR_WEIGHT)
    return dict(zip(similarities, ((values - mean) / math.sqrt(variance)).tolist()))


def fused_semantic(z: float | None) -> float:
    """The semantic part of the fused relevance: FUSION_WEIGHT * clip((z - floor) / (ceil - floor))."""
    if z is None or z <= FUSION_FLOOR:
        return 0.0
    return FUSION_WEIGHT * min(1.0, (z - FUSION_FLOOR) / (FUSION_CEIL - FUSION_FLOOR))


def lexical_weight(best_lexical: float) -> float:
    """w_q: how much shared words count for a query, from the best lexical term in the pool."""
    return min(1.0, max(0.0, (best_lexical - LEXICAL_FLOOR) / (1.0 - LEXICAL_FLOOR)))


def fused_relevance(lexical: float, z: float | None, weight: float = 1.0) -> float:
    """The relevance term of the prompt's score: the lexical term times the query's `weight`
    (`lexical_weight`) plus the semantic term; the lexical term alone when the item has no vector."""
    if z is None:
        return lexical
    return weight * lexical + fused_semantic(z)


def fused_score(item: MindItem, query_words: Set[str], now: float, z: float | None, weight: float = 1.0) -> float:
    """The prompt's score: the spec's recency and importance terms unchanged, `fused_relevance`
    as the relevance term (`z` from `standardise(similarities)`, None without a vector; `weight`
    from `lexical_weight` over the pool)."""
    return (recency(item, now) + item.importance / IMPORTANCE_DIVISOR
            + RELEVANCE_WEIGHT * fused_relevance(relevance(item, query_words), z, weight))


def semantic(z: float, floor: float = Z_FLOOR, ceil: float = Z_CEIL) -> float:
    """The old blend's semantic term: a standardised similarity mapped onto 0..1."""
    if z <= floor:
        return 0.0
    return min(1.0, (z - floor) / (ceil - floor))


def hybrid_relevance(lexical: float, z: float | None) -> float:
    """The old blend's relevance term, max(lexical, semantic); lexical alone without a vector."""
    if z is None:
        return lexical
    return max(lexical, semantic(z))


def hybrid_score(item: MindItem, query_words: Set[str], now: float, z: float | None) -> float:
    """The old blend's score (the benchmark's "old hybrid"): the spec's score with
    `hybrid_relevance` in place of the lexical relevance term; `z` from `standardise`."""
    # `hybrid_relevance` spelled out: this runs once per item per prompt.
    rel = relevance(item, query_words)
    if z is not None and z > Z_FLOOR:
        sem = (z - Z_FLOOR) / (Z_CEIL - Z_FLOOR)
        if sem > rel:
            rel = sem if sem < 1.0 else 1.0
    return recency(item, now) + item.importance / IMPORTANCE_DIVISOR + RELEVANCE_WEIGHT * rel


def is_related(lexical_overlap: bool, z: float | None) -> bool:
    """Whether an item is about the query at all (playbook rules must be): a shared word, or
    a standardised similarity above Z_RELATED."""
    return lexical_overlap or (z is not None and z > Z_RELATED)


def row_dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """matrix @ vector without BLAS. OpenBLAS runs this product on several threads that then
    busy-wait for more work, and the Python ranking loop that follows on a 2-core machine ran
    much slower beside them (benchmarks/MEASURED.md); einsum's own loop is single-threaded and
    as fast for one vector."""
    return np.einsum("ij,j->i", matrix, np.asarray(vector, dtype=np.float32))


def cosine_by_id(query: np.ndarray, ids: Sequence[int], matrix: np.ndarray) -> dict[int, float]:
    """Cosine of the unit query vector with each unit row of `matrix` (row i belongs to ids[i])."""
    if not len(ids):
        return {}
    return dict(zip(ids, row_dots(matrix, query).tolist()))


def cosine_map(query: np.ndarray, vectors: Mapping[int, np.ndarray]) -> dict[int, float]:
    """`cosine_by_id` for vectors held one per item."""
    ids = list(vectors)
    if not ids:
        return {}
    return cosine_by_id(query, ids, np.stack([vectors[i] for i in ids]))
