"""Issue 20: the fused relevance, the inverted index behind selection, the ranked search (HTTP and
the MCP recall, one function), and memory import/export as JSON lines on both backends."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from mcp import Client

from actors.common.text import word_set, words
from actors.memory import embed, hybrid, transfer, vectors
from actors.memory import repository as memory
from actors.memory.index import MemoryIndex, index_for, reset_index_cache
from actors.memory.model import MindItem
from actors.memory.scoring import score
from actors.memory.select import rank, scored, search, select
from actors.store.store import Store
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.http.errors import ApiError
from serve_apps.routes import memory as memory_routes

NOW = 2_000_000.0
HOUR = 3600.0
KEY = "owner-key-for-tests"
HELD_OUT = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "memory_retrieval_heldout.json"
DATA = HELD_OUT.with_name("memory_retrieval.json")


def _item(item_id: int, kind: str, text: str, importance: float = 5.0, age_hours: float = 0.0,
          last_used: float | None = None) -> MindItem:
    return MindItem(id=item_id, kind=kind, text=text, importance=importance, created=NOW - age_hours * HOUR,
                    last_used=last_used)


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(embed.ENV_MODEL, raising=False)
    vectors.reset_vector_cache()
    reset_index_cache()
    yield
    vectors.reset_vector_cache()
    reset_index_cache()


class BagOfWords:
    """A tiny deterministic encoder (hashed words), so search tests need no model."""

    def __init__(self, model_id: str = "bag-of-words-search", dim: int = 64) -> None:
        self.model_id, self.dim = model_id, dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


# ---- the fusion, pure ------------------------------------------------------------------------

def test_a_word_match_that_also_means_it_beats_a_newer_item_sharing_no_word() -> None:
    query = words("Who is my dentist on Belmont Street?")
    target = _item(1, "person", "Dentist: Dr Okafor on Belmont Street", importance=5, age_hours=200)
    newer = _item(2, "person", "The owner's GP at the Hyde Park surgery", importance=5, age_hours=0)
    assert hybrid.relevance(target, query) == 1.0 and hybrid.relevance(newer, query) == 0.0
    # The case: lexical 1.0 and z 6.4 against no shared word and z 4.
    assert hybrid.fused_score(target, query, NOW, 6.4) > hybrid.fused_score(newer, query, NOW, 4.0)
    # The old max() blend tied them on relevance and let recency decide.
    assert hybrid.hybrid_score(target, query, NOW, 6.4) < hybrid.hybrid_score(newer, query, NOW, 4.0)
    # Through the ranking itself, with z-scores that reach those values.
    index = MemoryIndex([target, newer])
    scores = index.score(query, NOW, {1: 6.4, 2: 4.0})
    assert scores.top(None, None) == [0, 1]


def test_a_stray_shared_word_does_not_lift_a_distractor_over_a_paraphrase() -> None:
    # Nothing in memory shares most of the query's words: a paraphrase. The distractor shares
    # one stray word ("live") and is about as close in meaning; the target is closer.
    query = words("Where does my sibling live these days?")
    target = _item(1, "person", "The owner's sister Ana moved to Lisbon in March", importance=5, age_hours=100)
    distractor = _item(2, "fact", "Live music on Fridays at the corner pub", importance=5, age_hours=100)
    assert hybrid.relevance(target, query) == 0.0 and 0.0 < hybrid.relevance(distractor, query) < 0.5
    assert hybrid.lexical_weight(hybrid.relevance(distractor, query)) == 0.0
    scores = MemoryIndex([target, distractor]).score(query, NOW, {1: 3.9, 2: 3.7})
    assert scores.top(None, None) == [0, 1]
    assert scores.why(1).words == 0.0 and scores.why(1).shared_words == sorted(query & word_set(distractor.text))
    # A plain sum (every shared word counted in full) would have put the distractor first.
    assert hybrid.fused_score(distractor, query, NOW, 3.7) > hybrid.fused_score(target, query, NOW, 3.9)


def test_the_words_count_in_full_when_the_best_match_covers_the_query() -> None:
    assert hybrid.lexical_weight(1.0) == 1.0
    assert hybrid.lexical_weight(hybrid.LEXICAL_FLOOR) == 0.0
    assert hybrid.lexical_weight(0.75) == pytest.approx(0.5)
    assert hybrid.lexical_weight(0.1) == 0.0


def test_fused_relevance_is_the_lexical_term_plus_the_weighted_semantic_one() -> None:
    assert hybrid.fused_relevance(0.7, None) == 0.7
    assert hybrid.fused_relevance(0.7, hybrid.FUSION_FLOOR) == 0.7
    mid = (hybrid.FUSION_FLOOR + hybrid.FUSION_CEIL) / 2
    assert hybrid.fused_relevance(0.0, mid) == pytest.approx(hybrid.FUSION_WEIGHT / 2)
    assert hybrid.fused_relevance(1.0, hybrid.FUSION_CEIL + 9) == pytest.approx(1.0 + hybrid.FUSION_WEIGHT)
    item = _item(1, "fact", "Owner writes poems daily", importance=5, age_hours=10)
    # No vector: exactly the spec's score.
    assert hybrid.fused_score(item, words("verse at night"), NOW, None) == score(item, "verse at night", NOW)


def test_index_scores_are_the_fused_score_functions() -> None:
    rng = np.random.default_rng(5)
    vocab = ["jazz", "owner", "writes", "poems", "leeds", "plumber", "sister", "lisbon", "coffee", "run"]
    items = []
    for i in range(1, 300):
        text = " ".join(rng.choice(vocab, size=int(rng.integers(0, 8))))
        last_used = [None, 0.0, NOW - float(rng.uniform(0, 900)) * HOUR, NOW + HOUR][i % 4]
        items.append(MindItem(id=i, kind="fact", text=text, importance=float(rng.uniform(1, 10)),
                              created=NOW - float(rng.uniform(-5, 900)) * HOUR, last_used=last_used))
    query = words("the owner writes jazz in Leeds")
    sims = {i.id: float(rng.normal(0.05, 0.1)) for i in items[::2]}
    strengths = hybrid.standardise(sims)
    index = MemoryIndex(items)
    lexical_only = index.score(query, NOW)
    fused = index.score(query, NOW, strengths)
    weight = hybrid.lexical_weight(max(hybrid.relevance(i, query) for i in items if i.id in strengths))
    assert 0.0 < weight <= 1.0
    for row, item in enumerate(items):
        assert lexical_only.total[row] == pytest.approx(score(item, query, NOW), abs=1e-12)
        assert fused.total[row] == pytest.approx(
            hybrid.fused_score(item, query, NOW, strengths.get(item.id), weight), abs=1e-12)
        why = fused.why(row)
        assert why.recency + why.importance + why.words + why.meaning == pytest.approx(fused.total[row], abs=1e-9)
        assert why.shared_words == sorted(query & word_set(item.text))


def test_ranking_breaks_ties_by_the_older_id_even_at_the_cut() -> None:
    items = [_item(i, "fact", "same words here", importance=5, age_hours=1) for i in (9, 3, 7, 1, 5)]
    assert [i.id for i in rank(items, "words", NOW, limit=3)] == [1, 3, 5]
    assert [i.id for i in rank(items, "words", NOW)] == [1, 3, 5, 7, 9]
    assert rank(items, "words", NOW, limit=0) == []


def test_the_index_is_reused_refreshed_or_rebuilt_as_the_items_change() -> None:
    items = [_item(1, "fact", "The owner likes jazz", age_hours=5), _item(2, "fact", "The owner lives in Leeds")]
    first = index_for(items)
    assert index_for(list(items)) is first                      # the same objects
    reread = [item.model_copy(update={"last_used": NOW}) for item in items]
    refreshed = index_for(reread)                                # same ids and texts, re-read
    assert refreshed is not first and refreshed.postings is first.postings
    assert refreshed.stamp[0] == NOW and first.stamp[0] == items[0].created
    edited = [reread[0].model_copy(update={"text": "The owner likes opera"}), reread[1]]
    rebuilt = index_for(edited)
    assert rebuilt.postings is not first.postings and "opera" in rebuilt.postings
    assert [i.id for i in rank(edited, "opera tonight", NOW, limit=1)] == [1]
    # Another caller's pool (a subset, say) does not push out the prompt's.
    subset = edited[1:]
    assert index_for(subset) is not rebuilt
    assert index_for(edited) is rebuilt and index_for(subset) is index_for(subset)


def test_select_on_the_index_keeps_the_spec_groups_and_the_playbook_rule() -> None:
    items = [_item(1, "fact", "The owner likes jazz", 3, 5), _item(2, "fact", "The owner lives in Leeds", 6, 1),
             _item(3, "playbook", "[music] Suggest vinyl over streaming", 5, 1),
             _item(4, "playbook", "[travel] Book window seats", 5, 1),
             _item(5, "fact", "retired jazz fact", 9, 0).model_copy(update={"active": False})]
    plain = select(items, "play some jazz", NOW)
    assert [i.id for i in plain.memories] == [1, 2] and plain.playbook == []
    assert select(items, "vinyl jazz", NOW).playbook == [items[2]]
    # The same as ranking each group by the spec's score.
    expected = sorted((i for i in items[:2]), key=lambda i: (-score(i, "play some jazz", NOW), i.id))
    assert plain.memories == expected


def test_search_shows_related_active_items_with_the_prompt_score() -> None:
    items = [_item(1, "person", "Dr Okafor: the owner's dentist on Belmont Street", 6, 30),
             _item(2, "fact", "The owner likes jazz", 9, 0),
             _item(3, "fact", "The dentist appointment is on the 3rd", 5, 2),
             _item(4, "fact", "old dentist", 5, 2).model_copy(update={"active": False})]
    found = search(items, "Who is my dentist on Belmont Street?", NOW)
    assert [f.item.id for f in found] == [1, 3]                 # jazz shares nothing; 4 is retired
    assert found[0].why.shared_words == ["belmont", "dentist", "street"]
    assert found[0].score == pytest.approx(score(items[0], "Who is my dentist on Belmont Street?", NOW))
    assert [f.item.id for f in search(items, "dentist", NOW, kind="fact")] == [3]
    assert [f.item.id for f in search(items, "dentist", NOW, limit=1)] == [3]  # shorter and newer


# ---- JSON lines, pure ---------------------------------------------------------------------------

def test_parse_lines_reports_every_bad_line_with_its_number() -> None:
    body = b"\n".join([
        json.dumps({"kind": "fact", "text": "The owner likes jazz"}).encode(),
        b"{not json",
        b"",
        json.dumps({"kind": "spaceship", "text": "x"}).encode(),
        json.dumps({"kind": "fact", "text": "my password is hunter2"}).encode(),
        json.dumps({"kind": "fact", "text": "ok", "created": 10.0, "last_used": 5.0}).encode(),
        json.dumps([1, 2]).encode(),
        json.dumps({"kind": "fact", "text": "later", "created": NOW + 3 * 86_400}).encode(),
    ])
    records, errs = transfer.parse_lines(body, NOW)
    assert [r.text for r in records] == ["The owner likes jazz"] and records[0].created == NOW
    assert [(e.line, e.code) for e in errs] == [(2, "bad_json"), (4, "invalid"), (5, "secret_refused"),
                                               (6, "invalid"), (7, "bad_json"), (8, "invalid")]


def test_parse_lines_limits_at_over_and_under() -> None:
    line = json.dumps({"kind": "fact", "text": "The owner likes jazz"}).encode() + b"\n"
    assert len(transfer.parse_lines(line * 3, NOW, max_lines=3)[0]) == 3          # at the limit
    assert len(transfer.parse_lines(line * 2, NOW, max_lines=3)[0]) == 2          # under
    with pytest.raises(transfer.ImportTooLarge):
        transfer.parse_lines(line * 4, NOW, max_lines=3)                          # over
    assert len(transfer.parse_lines(line * 2, NOW, max_bytes=2 * len(line))[0]) == 2
    with pytest.raises(transfer.ImportTooLarge):
        transfer.parse_lines(line * 2, NOW, max_bytes=2 * len(line) - 1)
    too_long = json.dumps({"kind": "fact", "text": "a" * (transfer.MAX_TEXT + 1)}).encode()
    assert transfer.parse_lines(too_long, NOW)[1][0].code == "invalid"
    assert transfer.parse_lines(b"\xff\xfe", NOW)[1][0].code == "not_utf8"


# ---- the routes, in-process on both backends ----------------------------------------------------

class _Gateway:
    """What the memory routes use of the Gateway's context: the store and the owner check."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def refresh_keys(self, force: bool = False) -> None:
        """The memory routes' owner check reloads stored keys first; this fake has one fixed key."""

    def owner(self, connection: object) -> None:
        if connection.headers.get("authorization") != f"Bearer {KEY}":  # type: ignore[attr-defined]
            raise ApiError(401, "unauthorized", "Send the owner key as 'Authorization: Bearer <key>'.")


def _app(store: Store, encoder: object = None) -> FastAPI:
    app = FastAPI()
    app.include_router(memory_routes.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)

    async def no_ray() -> object:
        return encoder
    app.dependency_overrides[memory_routes.search_encoder] = no_ray
    return app


@pytest.fixture
async def api(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(store)), base_url="http://test",
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client


async def test_search_route_shape_why_and_owner_only(store: Store, api: httpx.AsyncClient) -> None:
    now = time.time()
    for kind, text, importance in (("person", "Dr Okafor: the owner's dentist on Belmont Street", 6),
                                   ("fact", "The owner likes jazz", 9),
                                   ("open_loop", "Book the dentist check-up", 5)):
        await memory.remember(store, kind, text, importance, now=now - 3600)
    resp = await api.get("/v1/memory/search", params={"q": "Who is my dentist on Belmont Street?"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["count"] == len(body["data"]) == 2
    first = body["data"][0]
    assert set(first) == {"id", "kind", "text", "importance", "score", "why"}
    assert first["text"].startswith("Dr Okafor") and first["why"]["shared_words"] == ["belmont", "dentist", "street"]
    why = first["why"]
    assert why["recency"] + why["importance"] + why["words"] + why["meaning"] == pytest.approx(first["score"])
    assert why["meaning"] == 0.0                                 # no encoder: words only
    # Exactly the prompt's score (the search and the prompt rank the same pool the same way).
    items = await memory.list_items(store, active=True)
    item = next(i for i in items if i.id == first["id"])
    assert first["score"] == pytest.approx(score(item, "Who is my dentist on Belmont Street?", time.time()), abs=1e-4)
    only = (await api.get("/v1/memory/search", params={"q": "dentist", "kind": "open_loop"})).json()
    assert [d["kind"] for d in only["data"]] == ["open_loop"]
    assert (await api.get("/v1/memory/search", params={"q": "zebra"})).json() == {"data": [], "count": 0}
    assert (await api.get("/v1/memory/search", params={"q": ""})).status_code == 422
    assert (await api.get("/v1/memory/search", params={"q": "x", "limit": 101})).status_code == 422
    anonymous = await api.get("/v1/memory/search", params={"q": "dentist"}, headers={"Authorization": ""})
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "unauthorized"
    for method, path in (("GET", "/v1/memory/export"), ("POST", "/v1/memory/import")):
        resp = await api.request(method, path, headers={"Authorization": "Bearer wrong"})
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "unauthorized"


async def test_search_route_with_an_encoder_adds_the_meaning_term(store: Store) -> None:
    now = time.time()
    await memory.remember(store, "fact", "The owner likes jazz records", 5, now=now)
    for n in range(30):
        await memory.remember(store, "fact", f"Unrelated note number {n} about gardening tools {n * 7}", 5, now=now)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(store, BagOfWords())),
                                 base_url="http://test", headers={"Authorization": f"Bearer {KEY}"}) as client:
        hit = (await client.get("/v1/memory/search", params={"q": "jazz records"})).json()["data"][0]
    assert hit["text"] == "The owner likes jazz records" and hit["why"]["meaning"] > 0.0
    assert hit["why"]["recency"] + hit["why"]["importance"] + hit["why"]["words"] + hit["why"]["meaning"] \
        == pytest.approx(hit["score"])


async def test_export_import_round_trip_keeps_every_field(store: Store, api: httpx.AsyncClient,
                                                          tmp_path: Path) -> None:
    now = time.time()
    created = now - 40 * 86_400
    resp = await api.post("/v1/memory", json={"kind": "person", "text": "Leila: best friend in Manchester",
                                              "importance": 7, "created": created, "last_used": now - 86_400})
    assert resp.status_code == 201 and resp.json()["created"] is True
    item = await memory.get_item(store, resp.json()["id"])
    assert item.created == pytest.approx(created) and item.last_used == pytest.approx(now - 86_400)
    await memory.remember(store, "fact", "The owner likes jazz", 5, now=now, provenance="web:example.com")
    retired, _ = await memory.remember(store, "fact", "The owner lives in York", 4, now=now)
    await memory.deactivate(store, retired.id)
    assert (await api.post("/v1/memory", json={"kind": "fact", "text": "x", "created": now + 9 * 86_400})).json()[
        "error"]["code"] == "invalid"

    exported = await api.get("/v1/memory/export")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert [set(line) for line in lines] == [{"kind", "text", "importance", "uses", "active", "created",
                                              "last_used", "provenance"}] * 3
    assert [line["active"] for line in lines] == [True, True, False]
    assert [line["provenance"] for line in lines] == [None, "web:example.com", None]

    # Into an empty store on a fresh SQLite file: every field comes back.
    other = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'other.sqlite3'}")
    from actors.store.migrate import migrate
    await migrate(other)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(other)), base_url="http://test",
                                     headers={"Authorization": f"Bearer {KEY}"}) as client:
            resp = await client.post("/v1/memory/import", content=exported.content,
                                     headers={"Content-Type": "application/x-ndjson"})
            assert resp.status_code == 201 and resp.json() == {"inserted": 3, "skipped": 0}
            again = await client.post("/v1/memory/import", content=exported.content)
            assert again.json() == {"inserted": 0, "skipped": 3}
            round_trip = [json.loads(line) for line in (await client.get("/v1/memory/export")).text.splitlines()]
        assert round_trip == lines
    finally:
        await other.close()

    # Back into this store as well, where all three already are: nothing changes.
    assert (await api.post("/v1/memory/import", content=exported.content)).json() == {"inserted": 0, "skipped": 3}


async def test_a_bad_import_writes_nothing_and_names_its_lines(store: Store, api: httpx.AsyncClient,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    good = json.dumps({"kind": "fact", "text": "The owner likes jazz", "created": 1_700_000_000.0}) + "\n"
    bad = good + "{oops\n" + json.dumps({"kind": "fact", "text": "my PIN is 4321"}) + "\n"
    resp = await api.post("/v1/memory/import", content=bad.encode())
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["code"] == "invalid_lines"
    assert [(e["line"], e["code"]) for e in error["lines"]] == [(2, "bad_json"), (3, "secret_refused")]
    assert await memory.list_items(store) == []

    monkeypatch.setattr(transfer, "MAX_IMPORT_LINES", 2)
    lines = [json.dumps({"kind": "fact", "text": f"Fact number {n} about the owner"}) + "\n" for n in range(3)]
    over = await api.post("/v1/memory/import", content="".join(lines).encode())
    assert over.status_code == 413 and over.json()["error"]["code"] == "too_large"
    assert await memory.list_items(store) == []
    at = await api.post("/v1/memory/import", content="".join(lines[:2]).encode())
    assert at.status_code == 201 and at.json()["inserted"] == 2
    under = await api.post("/v1/memory/import", content=lines[2].encode())
    assert under.status_code == 201 and under.json()["inserted"] == 1
    imported = await memory.list_items(store)
    assert sorted(i.text for i in imported) == sorted(json.loads(line)["text"] for line in lines)

    monkeypatch.setattr(transfer, "MAX_IMPORT_BYTES", 64)
    big = await api.post("/v1/memory/import", content=("x" * 65).encode())
    assert big.status_code == 413 and big.json()["error"]["code"] == "too_large"


# ---- the MCP recall uses the same function ----------------------------------------------------

async def test_recall_ranks_exactly_like_the_search(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.tools.servers.memory import mcp

    now = time.time()
    for kind, text, importance, age in (("person", "Dr Okafor: the owner's dentist on Belmont Street", 6, 300),
                                        ("open_loop", "Book the dentist check-up", 5, 1),
                                        ("fact", "The dentist said to floss more", 8, 50),
                                        ("fact", "The owner likes jazz", 9, 0)):
        await memory.remember(store, kind, text, importance, now=now - age * 3600)
    monkeypatch.setenv("IRIIS_DATABASE_URL", store.engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv(embed.ENV_MODEL, "off")
    embed.reset_embedder_cache()
    try:
        async with Client(mcp) as client:
            result = await client.call_tool("recall", {"query": "dentist on Belmont Street"})
            hits = result.structured_content["result"]
            by_kind = (await client.call_tool("recall", {"query": "dentist", "kind": "fact"})).structured_content
    finally:
        embed.reset_embedder_cache()
    found = await memory.search(store, "dentist on Belmont Street", 8)
    assert [h["id"] for h in hits] == [f.item.id for f in found] and len(hits) == 3
    assert [h["score"] for h in hits] == pytest.approx([f.score for f in found], abs=1e-3)
    assert hits[0]["why"]["shared_words"] == ["belmont", "dentist", "street"]
    assert [h["kind"] for h in by_kind["result"]] == ["fact"]


# ---- the held-out benchmark set ------------------------------------------------------------------

def test_held_out_set_is_large_typed_and_its_paraphrases_share_no_word() -> None:
    texts = {item["id"]: item["text"] for item in json.loads(DATA.read_text())["items"]}
    tuned = {q["query"] for q in json.loads(DATA.read_text())["queries"]}
    queries = json.loads(HELD_OUT.read_text())["queries"]
    assert len(queries) >= 100 and len({q["query"] for q in queries}) == len(queries)
    assert not tuned & {q["query"] for q in queries}
    assert {q["type"] for q in queries} == {"word-sharing", "mixed", "paraphrase"}
    for q in queries:
        assert q["relevant"] and all(r in texts for r in q["relevant"]), q
        shared = [words(q["query"]) & words(texts[r]) for r in q["relevant"]]
        assert any(shared) == (q["type"] != "paraphrase"), (q["query"], shared)


def test_benchmark_rankers_agree_with_the_code_they_name() -> None:
    import importlib.util
    import sys

    path = DATA.parent.parent / "memory_retrieval.py"
    spec = importlib.util.spec_from_file_location("memory_retrieval_bench", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    items = [_item(1, "fact", "The owner likes jazz", 5, 2), _item(2, "fact", "The owner lives in Leeds", 6, 1),
             _item(3, "fact", "Sister in Lisbon", 4, 9)]
    sims = {1: 0.4, 2: 0.0, 3: 0.1}
    assert bench.fusion_ids(items, "jazz", sims) == [i.id for i in rank(items, "jazz", bench.NOW, similarities=sims)]
    old = sorted(scored(items, words("jazz"), bench.NOW, hybrid.standardise(sims)), key=lambda p: (-p[0], p[1].id))
    assert bench.old_hybrid_ids(items, "jazz", sims) == [i.id for _, i in old]
    assert bench.cosine_ids(items, "jazz", sims) == [1, 3, 2]
    assert math.isclose(len(bench.lexical_ids(items, "jazz", None)), 3)
