"""Relevance that also catches paraphrase: the spec's word overlap blended with embedding similarity.

The spec's relevance term, min(1, |shared words| / sqrt(|item words| + 1)), is zero for "Where does
my sibling reside?" against "The owner's sister lives in Lisbon". A sentence encoder's cosine
similarity is not. How far an item's cosine stands out from the other memories' cosines with the
same query (a z-score, `standardise`) is mapped onto the lexical term's 0..1 scale and the larger
of the two is used, so the score formula keeps its shape:

    score = recency + importance / 10 + 1.6 * relevance
    relevance = max(lexical, semantic)      semantic = clip((z - Z_FLOOR) / (Z_CEIL - Z_FLOOR), 0, 1)

Chosen by measurement (benchmarks/memory_retrieval.py --sweep: 160 items, 149 queries, 89 of them
paraphrases sharing no word with their targets; settings picked on the even-numbered queries,
then checked on the odd ones):
- The rule: the most paraphrase recall@5 whose word-sharing queries still rank their targets at
  least as well as the spec formula alone does (recall@5 and MRR, tuning half).
- Standardised rather than raw cosines: with the default encoder a paraphrase is a small signal
  (median cosine 0.22 against 0.01 for unrelated pairs) and how large it is depends on the query.
  Measured against the rest of memory it separates better: the best raw-cosine mapping allowed
  by the rule (FLOOR 0.05, CEIL 0.40) reaches paraphrase recall@5 0.56 on the tuning half and
  0.64 on the held-out half; the z-score mapping reaches 0.71 and 0.72.
- Z_FLOOR 2.0 / Z_CEIL 3.5 is the rule's pick (tuning half: paraphrase recall@5 0.01 -> 0.71,
  word-sharing recall@5 0.87 -> 0.97, MRR 0.84 -> 0.85; held-out half: paraphrase 0.02 ->
  0.72, word-sharing recall@5 0.83 -> 0.95 but MRR 0.84 -> 0.81). Lower ceilings catch
  slightly more paraphrase but let loosely similar items tie with exact word matches, and
  word-sharing MRR drops below the spec's.
- max() rather than a weighted sum: an item that shares the query's words scores at least what
  the spec gives it, so the hybrid never buries a lexical hit, whereas a sum a * lexical +
  (1 - a) * semantic must shrink the lexical term to make room; none of the 180 sums in the
  sweep (a = 0.3, 0.5, 0.7, both scales) beat the chosen max() on the tuning half in recall@5,
  paraphrase recall@5 or MRR.
- A pool of a few items says nothing about what "typical" is, so the pool's mean and spread are
  pulled towards the encoder's typical unrelated-pair statistics (PRIOR_*, measured on the
  benchmark's unrelated pairs) as if PRIOR_WEIGHT such pairs had been seen too. With thousands
  of items the pool's own statistics dominate.
- A playbook rule must be about the query; with embeddings "about" means a shared word or
  z over Z_RELATED (3.0): 63% of paraphrase targets clear it and 0.6% of unrelated pairs do.
Pure: no model, no store; vectors arrive already unit-length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set

import numpy as np

from actors.memory.model import MindItem
from actors.memory.scoring import IMPORTANCE_DIVISOR, RELEVANCE_WEIGHT, recency, relevance

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


def semantic(z: float, floor: float = Z_FLOOR, ceil: float = Z_CEIL) -> float:
    """A standardised similarity mapped onto the lexical term's 0..1 scale."""
    if z <= floor:
        return 0.0
    return min(1.0, (z - floor) / (ceil - floor))


def hybrid_relevance(lexical: float, z: float | None) -> float:
    """The relevance term with embeddings; the spec's lexical term alone when there is no vector."""
    if z is None:
        return lexical
    return max(lexical, semantic(z))


def hybrid_score(item: MindItem, query_words: Set[str], now: float, z: float | None) -> float:
    """The spec's score with `hybrid_relevance` in place of the lexical relevance term; `z` is
    the item's entry in `standardise(similarities)`."""
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
    about twice as slow beside them (measured here); einsum's own loop is single-threaded and
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
