"""Sentence vectors of memory items: encoded once, kept in the `mind_vectors` table and in an
in-process cache, so a prompt pays for a matrix product rather than for the model.

The prompt path is `similarities_for(store, items, query)`: item id -> cosine similarity with the
query, ready for `select(..., similarities=...)`, or None when no embedding model is available
(the caller then stays purely lexical). A stored vector is reused only when it was made by the
same weights from the same text; an edited item or a different model is encoded again.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from actors.memory import hybrid
from actors.memory.embed import Encoder, load_embedder
from actors.memory.model import MindItem
from actors.store import schema
from actors.store.store import Store

log = logging.getLogger(__name__)

# Items whose vectors one process keeps in memory: 20,000 x 512 float32 is 40 MB.
CACHE_ITEMS = 20_000
QUERY_CACHE = 256
# Bound on ids per IN (...) and rows per INSERT, well inside both drivers' parameter limits.
CHUNK = 500
# Items a prompt may encode before it is answered (about 0.1 s on 2 cores); more go to the
# background, in batches that each give the event loop back between them.
ENCODE_INLINE = 64
BACKFILL_BATCH = 256


async def encode(embedder: Encoder, texts: list[str]) -> np.ndarray:
    """Encode off the event loop: in a thread for a local model, by an awaited call for the
    shared encoder actor (which has `encode_async`)."""
    remote = getattr(embedder, "encode_async", None)
    if remote is not None:
        return await remote(texts)
    return await asyncio.to_thread(embedder.encode, texts)


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


class VectorCache:
    """LRU of item vectors stored as rows of one matrix, so the similarity of a query with
    thousands of items is one matrix product instead of stacking thousands of small arrays
    (an order of magnitude apart: benchmarks/MEASURED.md).
    Keyed by (item id, text): an edited item is a new key. The old key's row is not freed at
    once but ages out like any other, because another prompt being ranked concurrently on the
    same event loop may still hold that row; a row is only reused once least recently used, and
    `reserve` keeps every row one prompt touched out of that reach."""

    def __init__(self, model_id: str, dim: int, capacity: int = CACHE_ITEMS) -> None:
        self.model_id, self.dim, self.capacity = model_id, dim, capacity
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.slots: OrderedDict[tuple[int, str], int] = OrderedDict()
        self.high_water = 0

    def __len__(self) -> int:
        return len(self.slots)

    def get(self, item: MindItem) -> int | None:
        key = (item.id, item.text)
        slot = self.slots.get(key)
        if slot is not None:
            self.slots.move_to_end(key)
        return slot

    def put(self, item: MindItem, vector: np.ndarray) -> int:
        key = (item.id, item.text)
        if key in self.slots:
            slot = self.slots[key]
            self.slots.move_to_end(key)
        else:
            slot = self._take_slot()
            self.slots[key] = slot
        self.matrix[slot] = vector
        return slot

    def reserve(self, count: int) -> None:
        """Room for `count` items in one call, so filling the misses of one prompt can never
        evict the hits gathered moments earlier for the same prompt."""
        self.capacity = max(self.capacity, count)

    def _take_slot(self) -> int:
        if len(self.slots) >= self.capacity:
            return self.slots.popitem(last=False)[1]
        if self.high_water == len(self.matrix):
            grown = np.zeros((max(64, 2 * len(self.matrix)), self.dim), dtype=np.float32)
            grown[:len(self.matrix)] = self.matrix
            self.matrix = grown
        self.high_water += 1
        return self.high_water - 1

    def cosines(self, query: np.ndarray, slots: dict[int, int]) -> dict[int, float]:
        """Item id -> cosine with the unit `query`, for the items at `slots`."""
        if not slots:
            return {}
        index = np.fromiter(slots.values(), dtype=np.intp, count=len(slots))
        # Multiplying every used row and picking is cheaper than gathering rows first, unless
        # the cache holds far more items than this prompt asks about.
        rows = self.matrix[:self.high_water] if self.high_water <= 2 * len(index) else self.matrix[index]
        sims = hybrid.row_dots(rows, query)
        if rows.shape[0] != len(index):
            sims = sims[index]
        return dict(zip(slots, sims.tolist()))


_cache: VectorCache | None = None
_queries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


def _cache_for(embedder: Encoder) -> VectorCache:
    global _cache
    if _cache is None or _cache.model_id != embedder.model_id:
        _cache = VectorCache(embedder.model_id, embedder.dim)
        _queries.clear()
    return _cache


def reset_vector_cache() -> None:
    """Drop the in-process caches (tests, or after changing models)."""
    global _cache, _backfill
    if _backfill is not None and not _backfill.done():
        _backfill.cancel()
    _cache, _backfill = None, None
    _queries.clear()


def _chunks(seq: Sequence, size: int = CHUNK) -> Iterable[Sequence]:
    for start in range(0, len(seq), size):
        yield seq[start:start + size]


async def _read_stored(store: Store, ids: list[int], model_id: str) -> dict[int, tuple[str, int, bytes]]:
    table = schema.mind_vectors
    found: dict[int, tuple[str, int, bytes]] = {}
    async with store.engine.connect() as conn:
        for chunk in _chunks(ids):
            rows = await conn.execute(
                sa.select(table.c.item_id, table.c.text_hash, table.c.dim, table.c.vector)
                .where(table.c.item_id.in_(chunk), table.c.model == model_id))
            for item_id, digest, dim, blob in rows:
                found[item_id] = (digest, dim, bytes(blob))
    return found


async def _write(store: Store, embedder: Encoder, items: list[MindItem], vectors: np.ndarray) -> None:
    rows = [{"item_id": item.id, "model": embedder.model_id, "dim": embedder.dim,
             "text_hash": text_hash(item.text), "vector": vec.astype(np.float32).tobytes()}
            for item, vec in zip(items, vectors)]
    insert = (sqlite.insert if store.is_sqlite else postgresql.insert)(schema.mind_vectors)
    stmt = insert.on_conflict_do_update(index_elements=["item_id"], set_={
        c: insert.excluded[c] for c in ("model", "dim", "text_hash", "vector")})
    try:
        async with store.engine.begin() as conn:
            for chunk in _chunks(rows):
                await conn.execute(stmt, list(chunk))
    except IntegrityError:
        # An item was deleted while we encoded it; keep the vectors of the ones still there.
        async with store.engine.begin() as conn:
            alive: set[int] = set()
            for chunk in _chunks([r["item_id"] for r in rows]):
                alive.update((await conn.execute(
                    sa.select(schema.mind.c.id).where(schema.mind.c.id.in_(chunk)))).scalars())
            for chunk in _chunks([r for r in rows if r["item_id"] in alive]):
                await conn.execute(stmt, list(chunk))


async def _slots(store: Store, items: Sequence[MindItem], embedder: Encoder,
                 inline_limit: int | None = None) -> tuple[VectorCache, dict[int, int]]:
    cache = _cache_for(embedder)
    cache.reserve(len(items))
    slots: dict[int, int] = {}
    missing: list[MindItem] = []
    for item in items:
        slot = cache.get(item)
        if slot is None:
            missing.append(item)
        else:
            slots[item.id] = slot
    if not missing:
        return cache, slots
    stored = await _read_stored(store, [item.id for item in missing], embedder.model_id)
    to_encode: list[MindItem] = []
    for item in missing:
        row = stored.get(item.id)
        if row is not None and row[0] == text_hash(item.text) and row[1] == embedder.dim:
            slots[item.id] = cache.put(item, np.frombuffer(row[2], dtype=np.float32))
        else:
            to_encode.append(item)
    if inline_limit is not None and len(to_encode) > inline_limit:
        # A store full of items never encoded (first start with the model, or a new model)
        # would hold this prompt for seconds: encode a few now, the rest in the background,
        # and let the items without a vector yet be scored lexically meanwhile.
        _start_backfill(store, embedder, to_encode[inline_limit:])
        to_encode = to_encode[:inline_limit]
    if to_encode:
        slots.update(await _encode_and_store(store, embedder, cache, to_encode))
    return cache, slots


async def _encode_and_store(store: Store, embedder: Encoder, cache: VectorCache,
                            items: list[MindItem]) -> dict[int, int]:
    # CPU work for the model; the event loop keeps serving other sessions meanwhile.
    vectors = await encode(embedder, [item.text for item in items])
    slots = {item.id: cache.put(item, vector) for item, vector in zip(items, vectors)}
    try:
        await _write(store, embedder, items, vectors)
    except Exception:  # noqa: BLE001 - storing is a saving for the next process, not a need
        log.warning("could not store %d memory vectors; they stay in this process only",
                    len(items), exc_info=True)
    return slots


_backfill: asyncio.Task[None] | None = None


def _start_backfill(store: Store, embedder: Encoder, items: list[MindItem]) -> None:
    """Encode `items` in the background, unless a backfill is already running (the next
    prompt then schedules whatever is still missing)."""
    global _backfill
    if _backfill is not None and not _backfill.done():
        return

    async def run() -> None:
        try:
            cache = _cache_for(embedder)
            cache.reserve(len(items))
            for start in range(0, len(items), BACKFILL_BATCH):
                await _encode_and_store(store, embedder, cache, items[start:start + BACKFILL_BATCH])
        except Exception:  # noqa: BLE001 - a background nicety; prompts fall back to words
            log.warning("memory vector backfill stopped", exc_info=True)

    # A fresh context: a prompt's request being cancelled must not cancel the backfill.
    _backfill = asyncio.create_task(run(), context=contextvars.Context())


async def wait_for_backfill() -> None:
    """Until the background encoding started by a prompt has finished (tests, benchmarks)."""
    if _backfill is not None:
        await asyncio.shield(_backfill)


async def vectors_for(store: Store, items: Iterable[MindItem],
                      embedder: Encoder | None = None) -> dict[int, np.ndarray]:
    """Item id -> unit float32 vector for each item: from memory, else from `mind_vectors` when
    the model and text match, else encoded now (one batch, in a thread) and stored.
    Empty when no embedding model is available."""
    embedder = embedder or await load_embedder()
    items = list(items)
    if embedder is None or not items:
        return {}
    cache, slots = await _slots(store, items, embedder)
    # A copy: cache rows are reused as items come and go.
    rows = cache.matrix[np.fromiter(slots.values(), dtype=np.intp, count=len(slots))]
    return dict(zip(slots, rows))


async def query_vector(query: str, embedder: Encoder) -> np.ndarray:
    key = (embedder.model_id, query)
    vector = _queries.get(key)
    if vector is None:
        vector = (await encode(embedder, [query]))[0]
        _queries[key] = vector
        if len(_queries) > QUERY_CACHE:
            _queries.popitem(last=False)
    else:
        _queries.move_to_end(key)
    return vector


async def similarities_for(store: Store, items: Iterable[MindItem], query: str,
                           embedder: Encoder | None = None,
                           inline_limit: int | None = ENCODE_INLINE) -> dict[int, float] | None:
    """Item id -> cosine similarity of each item with `query`, for `select(..., similarities=)`.

    At most `inline_limit` items without a stored vector are encoded before answering; any
    more are encoded in the background and are missing from this answer (scored lexically).

    None means "stay lexical": no model installed, a blank query, or a failure in the model or
    the vector table (logged), since memory must never cost the owner a reply."""
    embedder = embedder or await load_embedder()
    if embedder is None or not query.strip():
        return None
    items = list(items)
    try:
        cache, slots = await _slots(store, items, embedder, inline_limit)
        return cache.cosines(await query_vector(query, embedder), slots)
    except Exception:
        log.warning("memory embeddings unavailable for this prompt; using word overlap only", exc_info=True)
        return None
