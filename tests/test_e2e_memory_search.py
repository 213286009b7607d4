"""Memory search, import and export through the real server (issue 20): the route reaches the
cluster's shared sentence encoder, ranks with the prompt's score and moves items with their age."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.conftest import OWNER_KEY

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {OWNER_KEY}"}


def test_search_import_and_export_through_the_server(server) -> None:
    now = time.time()
    with httpx.Client(base_url=server.url, timeout=120, headers=AUTH) as client:
        added = client.post("/v1/memory", json={"kind": "person", "text": "Dr Adeyemi: the owner's dentist on "
                                                "Belmont Street", "importance": 6, "created": now - 30 * 86_400})
        assert added.status_code == 201, added.text
        assert added.json()["created"] is True
        lines = "".join(json.dumps(r) + "\n" for r in (
            {"kind": "fact", "text": "The owner's allotment is plot 14 behind the rugby ground",
             "importance": 4, "uses": 3, "created": now - 400 * 86_400, "last_used": now - 90 * 86_400},
            {"kind": "fact", "text": "The owner keeps bees at the allotment", "active": False,
             "created": now - 200 * 86_400},
        ))
        bad = client.post("/v1/memory/import", content=(lines + "{broken\n").encode())
        assert bad.status_code == 422 and bad.json()["error"]["lines"][0]["line"] == 3
        ok = client.post("/v1/memory/import", content=lines.encode(),
                         headers={"Content-Type": "application/x-ndjson"})
        assert ok.status_code == 201 and ok.json() == {"inserted": 2, "skipped": 0}

        found = client.get("/v1/memory/search", params={"q": "Who is my dentist on Belmont Street?"})
        assert found.status_code == 200, found.text
        hit = found.json()["data"][0]
        assert hit["text"].startswith("Dr Adeyemi") and "dentist" in hit["why"]["shared_words"]
        why = hit["why"]
        assert why["recency"] + why["importance"] + why["words"] + why["meaning"] == pytest.approx(hit["score"])
        # Retired items are exported but never found.
        assert all("bees" not in d["text"] for d in client.get(
            "/v1/memory/search", params={"q": "bees allotment"}).json()["data"])

        exported = client.get("/v1/memory/export")
        assert exported.headers["content-type"].startswith("application/x-ndjson")
        rows = {r["text"]: r for r in map(json.loads, exported.text.splitlines())}
        plot = rows["The owner's allotment is plot 14 behind the rugby ground"]
        assert plot["uses"] == 3 and abs(plot["created"] - (now - 400 * 86_400)) < 1
        assert rows["The owner keeps bees at the allotment"]["active"] is False
