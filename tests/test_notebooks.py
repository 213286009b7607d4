"""The owner's notebooks, executed with nbclient against a store the test fills."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from actors.memory import jobs
from actors.memory.reflect_prompt import Exchange
from actors.memory.repository import memory_block, remember
from actors.store.migrate import migrate
from actors.store.models import ConversationRecord, MessageRecord
from actors.store.store import Store

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
DAY1, DAY2 = 1_796_000_000.0, 1_796_086_400.0  # 2026-11-30 and 2026-12-01 UTC (approximately)


def answer(*texts: str):
    queue = list(texts)

    async def complete(messages, purpose):
        return queue.pop(0) if queue else "{}"
    return complete


async def fill(url: str) -> None:
    store = Store.open(url)
    await migrate(store)
    try:
        await store.write_batch([ConversationRecord(id="c1", created=DAY1, updated=DAY2)], [
            MessageRecord(conversation_id="c1", seq=i + 1, role=role, content=text, created=ts)
            for i, (role, text, ts) in enumerate([
                ("user", "Where does Zofia live?", DAY1), ("assistant", "Gdansk.", DAY1 + 1),
                ("user", "No, she lives in Krakow", DAY1 + 60), ("assistant", "Noted.", DAY1 + 61),
                ("user", "Plan my Tuesday", DAY2), ("assistant", "Done.", DAY2 + 1)])])
        await jobs.reflect_exchange(store, answer(json.dumps({"observations": [
            {"text": "Zofia lives in Gdansk", "importance": 7}]})),
            Exchange(user="My aunt Zofia lives in Gdansk", reply="Nice"), now=DAY1)
        fact_id = (await memory_block_ids(store))[0]
        await jobs.reflect_exchange(store, answer(json.dumps({"updates": [{"id": fact_id, "text": "Zofia lives in Krakow"}]})),
                                    Exchange(user="No, Zofia lives in Krakow", reply="Noted"), now=DAY1 + 60)
        await jobs.reflect_exchange(store, answer("no idea"), Exchange(user="Tell me a long story about the sea please",
                                                                     reply="Once..."), now=DAY1 + 90)
        await remember(store, "fact", "Zofia lives in Krakow", now=DAY1 + 100)  # dedup: reinforces
        await jobs.distill_playbook(store, answer(json.dumps({"rules": [
            {"domain": "calendar", "rule": "Plan Tuesday around the owner's run"}]})), "Asked: plan my Tuesday", now=DAY2)
        await memory_block(store, "plan my Tuesday around the run", now=DAY2 + 10)
        await memory_block(store, "where does Zofia live?", now=DAY2 + 20)
    finally:
        await store.close()


async def memory_block_ids(store: Store) -> list[int]:
    from actors.memory.repository import list_items
    return [i.id for i in await list_items(store, kind="fact")]


def run(name: str, monkeypatch: pytest.MonkeyPatch, url: str) -> str:
    monkeypatch.setenv("IRIIS_DATABASE_URL", url)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", out
            texts.append(out.get("text", ""))
    return "".join(texts)


@pytest.fixture
async def filled(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'iriis.sqlite3'}"
    await fill(url)
    return url


def test_memory_notebook(filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = run("memory.ipynb", monkeypatch, filled)
    assert "fact       active=1    retired=0" in out
    assert "playbook   active=1" in out
    assert "after  24 h: 0.887" in out
    assert "changes: {'insert': 2, 'reinforce': 1, 'update': 1, 'deactivate': 0}" in out
    assert "'Zofia lives in Gdansk' -> 'Zofia lives in Krakow'" in out
    assert "query: where does Zofia live?" in out and "Zofia lives in Krakow" in out


def _eval_record(id_: str, ok: bool, memory: bool, multi: bool, first: float, tool: bool) -> dict:
    return {"id": id_, "category": "memory" if multi else "reminders", "tags": [], "multi_session": multi,
            "memory": memory, "ok": ok, "run": "20261207T0300",
            "checks": [{"at": "end", "kind": "reply", "ok": ok, "why": "reply as expected" if ok else
                        "the reply has none of ['Tomás']: \"I don't know.\""}],
            "steps": [{"say": "What's my brother's name?", "conversation": "b", "reply": "I don't know." if not ok
                       else "Tomás.", "tools": [], "first_sentence_s": first, "tool_turn": tool, "error": None}]}


def test_evaluation_notebook(filled: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    results = tmp_path / "agent_eval-20261207T0300.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in [
        _eval_record("memory-brother", True, True, True, 2.0, False),
        _eval_record("memory-brother", False, False, True, 1.0, False),
        _eval_record("remind-9", True, True, False, 6.0, True)]))
    monkeypatch.setenv("IRIIS_EVAL_RESULTS", str(results))
    out = run("evaluation.ipynb", monkeypatch, filled)
    assert "3 scenario records" in out
    assert "memory               1/1   100.0%" in out and "reminders            1/1   100.0%" in out
    assert "'on_pct': 100.0" in out and "'off_pct': 0.0" in out and "'margin_points': 100.0" in out
    assert "'tool': {'n': 1, 'p50': 6.0" in out
    assert "memory-brother [memory, memory off]" in out and "I don't know." in out
    assert "1/2 corrected" in out and "0/1 corrected" in out
    assert "active  selected=1   " in out and "[calendar] Plan Tuesday around the owner's run" in out
    assert "reflection outcomes: {'applied': 2, 'unparsed': 1}" in out
