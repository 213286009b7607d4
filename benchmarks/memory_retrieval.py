"""Memory retrieval benchmark: does the memory a prompt needs get ranked near the top, with the
spec's lexical relevance alone and with the embedding (hybrid) relevance, and what does it cost?

Quality: benchmarks/data/memory_retrieval.json holds 160 hand-written memories of one fictional
owner and 149 queries with the ids of the items that answer them; 89 are paraphrases that share
no content word with their targets (tests/test_memory_embed.py checks that). Every query ranks
the whole pool with the spec's full score (recency and importance included, from a fixed seed),
and we report recall@5 (share of a query's targets in the top 5) and MRR (1 / rank of the first
target), overall and for the paraphrase and word-sharing halves.

Cost, over 10,000 items in a real SQLite store: lexical `select` latency p50/p95; hybrid latency
with vectors cached in the process (what each prompt pays: query encode + similarities + select);
hybrid after a restart (vectors read back from `mind_vectors`); the one-off cold encode of all
10,000 items (`vectors_for`; a prompt itself encodes at most 64 and leaves the rest to a
background task).

Prints one JSON line. Usage: python benchmarks/memory_retrieval.py [--sweep]
(--sweep prints one line per blend setting, on the even and odd halves of the queries, to choose
the blend in actors/memory/hybrid.py without fitting it to the queries it is scored on.)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.memory import hybrid  # noqa: E402
from actors.memory.embed import get_embedder  # noqa: E402
from actors.memory.model import MindItem  # noqa: E402
from actors.memory.scoring import IMPORTANCE_DIVISOR, RELEVANCE_WEIGHT, recency, relevance  # noqa: E402
from actors.memory.select import rank, select  # noqa: E402
from actors.common.text import word_set  # noqa: E402
from actors.memory.vectors import reset_vector_cache, similarities_for, vectors_for  # noqa: E402
from actors.store import schema  # noqa: E402
from actors.store.migrate import migrate  # noqa: E402
from actors.store.store import Store  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "memory_retrieval.json"
SEED = 20261129
NOW = 1_900_000_000.0
HOUR = 3600.0
K = 5
LATENCY_ITEMS = 10_000
LATENCY_QUERIES = 100
KIND_IMPORTANCE = {"goal": 7.0, "lesson": 6.0, "playbook": 6.0, "person": 6.0}


def load() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def build_items(raw: list[dict[str, Any]], seed: int = SEED) -> list[MindItem]:
    """Dataset items with the importance and age a lived-in memory would have (fixed seed), so
    recency and importance pull on the ranking as they do in a real prompt."""
    rng = random.Random(seed)
    items = []
    for r in raw:
        importance = min(10.0, max(1.0, KIND_IMPORTANCE.get(r["kind"], 5.0) + rng.uniform(-1.5, 1.5)))
        age = rng.uniform(0, 21 * 24) * HOUR
        used = rng.random() < 0.3
        items.append(MindItem(id=r["id"], kind=r["kind"], text=r["text"], importance=round(importance, 1),
                              created=NOW - age, last_used=NOW - rng.uniform(0, age) if used else None))
    return items


Relevance = Callable[[float, float | None], float]
Transform = Callable[[dict[int, float]], dict[int, float]]


def _ranked_ids(items: list[MindItem], query: str, sims: dict[int, float] | None,
                blend: tuple[Transform, Relevance] | None) -> list[int]:
    if blend is None:
        return [item.id for item in rank(items, query, NOW, similarities=sims)]
    # A candidate from the sweep, scored as hybrid_score would score it.
    transform, relevance_of = blend
    values = transform(sims or {})
    qw = word_set(query)
    scored = sorted(((recency(i, NOW) + i.importance / IMPORTANCE_DIVISOR
                      + RELEVANCE_WEIGHT * relevance_of(relevance(i, qw), values.get(i.id)), i.id)
                     for i in items), key=lambda p: (-p[0], p[1]))
    return [item_id for _, item_id in scored]


def quality(items: list[MindItem], queries: list[dict[str, Any]], sims: list[dict[int, float] | None],
            blend: tuple[Transform, Relevance] | None = None) -> dict[str, Any]:
    """recall@5 and MRR, overall and split by paraphrase / word-sharing queries."""
    per: dict[str, list[tuple[float, float]]] = {"all": [], "paraphrase": [], "lexical": []}
    for query, sim in zip(queries, sims):
        order = _ranked_ids(items, query["query"], sim, blend)
        targets = set(query["relevant"])
        top = set(order[:K])
        recall = len(targets & top) / min(len(targets), K)
        first = next(pos for pos, item_id in enumerate(order, 1) if item_id in targets)
        for group in ("all", "paraphrase" if query["paraphrase"] else "lexical"):
            per[group].append((recall, 1.0 / first))
    return {group: {"n": len(rows), f"recall@{K}": round(statistics.fmean(r for r, _ in rows), 4),
                    "mrr": round(statistics.fmean(m for _, m in rows), 4)}
            for group, rows in per.items() if rows}


def query_sims(embedder: Any, items: list[MindItem], queries: list[dict[str, Any]]) -> list[dict[int, float]]:
    item_vecs = embedder.encode([i.text for i in items])
    query_vecs = embedder.encode([q["query"] for q in queries])
    ids = [i.id for i in items]
    return [hybrid.cosine_by_id(qv, ids, item_vecs) for qv in query_vecs]


def percentiles(ms: list[float], cpu_ms: list[float]) -> dict[str, float]:
    """Wall-clock p50/p95, plus the p50 of CPU time used by the process (all its threads),
    which a busy shared machine disturbs far less than the wall clock."""
    ordered = sorted(ms)
    return {"p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
            "cpu_p50_ms": round(statistics.median(cpu_ms), 2)}


def synthetic_items(base: list[MindItem], n: int, seed: int = SEED) -> list[MindItem]:
    """n items shaped like the dataset's (same kinds, lengths and vocabulary, shuffled into new
    sentences), so the latency figures see realistic word counts and overlap rates."""
    rng = random.Random(seed)
    vocab = [w for item in base for w in item.text.split()]
    items = []
    for item_id in range(1, n + 1):
        model = rng.choice(base)
        length = max(4, len(model.text.split()) + rng.randint(-3, 3))
        text = " ".join(rng.choice(vocab) for _ in range(length))
        age = rng.uniform(0, 60 * 24) * HOUR
        items.append(MindItem(id=item_id, kind=model.kind, text=text, importance=round(rng.uniform(1, 10), 1),
                              created=NOW - age, last_used=None))
    return items


async def latency(base: list[MindItem], queries: list[str], embedder: Any) -> dict[str, Any]:
    items = synthetic_items(base, LATENCY_ITEMS)
    out: dict[str, Any] = {"items": len(items)}
    lexical, lexical_cpu = [], []
    for q in queries:
        start, cpu = time.perf_counter(), time.process_time()
        select(items, q, NOW)
        lexical.append((time.perf_counter() - start) * 1000)
        lexical_cpu.append((time.process_time() - cpu) * 1000)
    out["lexical"] = percentiles(lexical, lexical_cpu)
    if embedder is None:
        return out
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.sqlite3'}")
        try:
            await migrate(store)
            async with store.engine.begin() as conn:
                await conn.execute(sa.insert(schema.mind), [
                    {"id": i.id, "kind": i.kind, "text": i.text, "importance": i.importance, "uses": 0,
                     "active": True, "created": i.created, "last_used": None} for i in items])
            reset_vector_cache()
            start = time.perf_counter()
            await vectors_for(store, items)
            out["cold_encode_s"] = round(time.perf_counter() - start, 2)

            ms, cpu_ms = [], []
            # Each query is new to the process, so its own encode is in the figure.
            for q in queries:
                start, cpu = time.perf_counter(), time.process_time()
                sims = await similarities_for(store, items, q)
                select(items, q, NOW, similarities=sims)
                ms.append((time.perf_counter() - start) * 1000)
                cpu_ms.append((time.process_time() - cpu) * 1000)
            out["hybrid_cached"] = percentiles(ms, cpu_ms)
            reset_vector_cache()
            start = time.perf_counter()
            await similarities_for(store, items, "after a restart")
            out["reload_from_store_s"] = round(time.perf_counter() - start, 2)
        finally:
            await store.close()
    return out


def _clip(value: float | None, floor: float, ceil: float) -> float:
    return 0.0 if value is None else min(1.0, max(0.0, (value - floor) / (ceil - floor)))


def sweep(items: list[MindItem], queries: list[dict[str, Any]], sims: list[dict[int, float]]) -> None:
    """One JSON line per candidate: max() or a weighted sum, over raw cosines or z-scores."""
    halves = {"tune": slice(0, None, 2), "held_out": slice(1, None, 2)}
    raw: Transform = dict
    z: Transform = hybrid.standardise
    configs: list[tuple[str, tuple[Transform, Relevance]]] = [("lexical", (raw, lambda lex, v: lex))]
    grids = {"cosine": (raw, (0.0, 0.05, 0.1, 0.15, 0.2), (0.3, 0.35, 0.4, 0.45, 0.5, 0.6)),
             "z": (z, (0.5, 1.0, 1.5, 2.0, 2.5), (3.0, 3.5, 4.0, 4.5, 5.0, 6.0))}
    for scale, (transform, floors, ceils) in grids.items():
        for floor in floors:
            for ceil in ceils:
                configs.append((f"max {scale} floor={floor} ceil={ceil}", (transform, (
                    lambda lex, v, f=floor, c=ceil: max(lex, _clip(v, f, c))))))
                for a in (0.3, 0.5, 0.7):
                    configs.append((f"sum a={a} {scale} floor={floor} ceil={ceil}", (transform, (
                        lambda lex, v, f=floor, c=ceil, a=a: a * lex + (1 - a) * _clip(v, f, c)))))
    for name, blend in configs:
        row: dict[str, Any] = {"config": name}
        for half, part in halves.items():
            row[half] = quality(items, queries[part], sims[part], blend)
        print(json.dumps(row))


def main() -> None:
    data = load()
    items = build_items(data["items"])
    queries = data["queries"]
    embedder = get_embedder()
    result: dict[str, Any] = {
        "benchmark": "memory_retrieval", "items": len(items), "queries": len(queries),
        "paraphrase_queries": sum(q["paraphrase"] for q in queries),
        "model": embedder.model_id if embedder else None,
        "lexical": quality(items, queries, [None] * len(queries)),
    }
    if embedder is not None:
        start = time.perf_counter()
        sims = query_sims(embedder, items, queries)
        result["encode_dataset_s"] = round(time.perf_counter() - start, 2)
        if "--sweep" in sys.argv:
            sweep(items, queries, sims)
            return
        result["hybrid"] = quality(items, queries, sims)
        result["blend"] = {"rule": "max(lexical, semantic(z))", "z_floor": hybrid.Z_FLOOR,
                           "z_ceil": hybrid.Z_CEIL}
    latency_queries = [q["query"] for q in queries][:LATENCY_QUERIES]
    # Timings on a shared 2-core machine swing with its load, so the load goes with them.
    load_before = os.getloadavg()[0]
    result["latency"] = asyncio.run(latency(items, latency_queries, embedder))
    result["latency"]["load_avg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
