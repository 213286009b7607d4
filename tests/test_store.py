"""The store on both backends: migrations, conversations, buffered writes, files, kv, audit."""

from __future__ import annotations

import pytest

from actors.session.core import SessionCore
from actors.store.buffer import ConversationBuffer
from actors.store.migrate import current_revision, head_revision, migrate
from actors.store.models import AuditEntry, ConversationRecord, MessageRecord
from actors.store.store import Store


async def test_migrations_reach_head_and_rerun_harmlessly(store: Store) -> None:
    assert head_revision() is not None and int(head_revision()) >= 4
    assert await current_revision(store) == head_revision()
    await migrate(store)  # start-up runs it every time
    assert head_revision() is not None and int(head_revision()) >= 4
    assert await current_revision(store) == head_revision()


async def test_batch_write_and_read_back_in_order(store: Store) -> None:
    conv = ConversationRecord(id="c1", title="first")
    msgs = [MessageRecord(conversation_id="c1", seq=i, role="user" if i % 2 else "assistant",
                          content=f"m{i}", meta={"i": i}) for i in range(1, 6)]
    await store.write_batch([conv], list(reversed(msgs)))
    got = await store.list_messages("c1")
    assert [m.content for m in got] == ["m1", "m2", "m3", "m4", "m5"]
    assert got[2].meta == {"i": 3}
    assert [m.content for m in await store.list_messages("c1", limit=2)] == ["m4", "m5"]
    assert (await store.get_conversation("c1")).title == "first"
    assert await store.get_conversation("missing") is None


async def test_conversation_upsert_keeps_latest_summary(store: Store) -> None:
    await store.write_batch([ConversationRecord(id="c2")], [])
    await store.write_batch([ConversationRecord(id="c2", summary="so far: tea", summary_upto=4)], [])
    conv = await store.get_conversation("c2")
    assert (conv.summary, conv.summary_upto) == ("so far: tea", 4)


async def test_deleting_a_message_removes_it(store: Store) -> None:
    m = MessageRecord(conversation_id="c3", seq=1, role="user", content="secret plan")
    await store.write_batch([ConversationRecord(id="c3")], [m])
    await store.write_batch([], [], deleted_ids=[m.id])
    assert await store.list_messages("c3") == []


async def test_buffer_holds_writes_until_flushed(store: Store) -> None:
    buf = ConversationBuffer()
    conv = ConversationRecord(id="c4")
    buf.touch(conv)
    buf.add(MessageRecord(conversation_id="c4", seq=1, role="user", content="hello"))
    assert await store.get_conversation("c4") is None  # nothing written yet
    assert await buf.flush(store) == 2
    assert buf.pending == 0
    assert [m.content for m in await store.list_messages("c4")] == ["hello"]


async def test_failed_flush_keeps_the_batch(store: Store) -> None:
    buf = ConversationBuffer()
    buf.touch(ConversationRecord(id="c5"))
    buf.add(MessageRecord(conversation_id="c5", seq=1, role="user", content="keep me"))
    broken = Store.open("sqlite+aiosqlite:////nonexistent-dir/x.sqlite3")
    with pytest.raises(Exception):
        await buf.flush(broken)
    await broken.close()
    assert buf.pending == 2
    await buf.flush(store)
    assert [m.content for m in await store.list_messages("c5")] == ["keep me"]


async def test_session_state_survives_a_restart(store: Store) -> None:
    """What a SessionActor accepted is rebuilt by a new one from the store, seq intact."""
    first = SessionCore("c6")
    first.create()
    first.add("user", "what's the capital of France?")
    first.add("assistant", "Paris.")
    await first.buffer.flush(store)

    second = SessionCore("c6")
    assert await second.load(store)
    second.add("user", "and of Spain?")
    await second.buffer.flush(store)
    got = await store.list_messages("c6")
    assert [(m.seq, m.role) for m in got] == [(1, "user"), (2, "assistant"), (3, "user")]
    assert (await store.get_conversation("c6")).title == "what's the capital of France?"
    assert not await SessionCore("nope").load(store)


async def test_prompt_window_keeps_recent_history_within_budget(store: Store) -> None:
    core = SessionCore("c7")
    core.create()
    for i in range(60):
        core.add("user" if i % 2 == 0 else "assistant", f"{i:02d} " + "x" * 997)
    prompt = core.prompt("system text")
    assert prompt[0] == {"role": "system", "content": "system text"}
    kept = [m["content"][:2] for m in prompt[1:]]
    assert kept[-1] == "59" and len(kept) == 20  # 20 x 1,000 characters = the budget


async def test_files_round_trip_bytes(store: Store) -> None:
    data = bytes(range(256)) * 10
    rec = await store.add_file("blob.bin", "application/octet-stream", data, conversation_id="c8")
    got = await store.get_file(rec.id)
    assert got is not None
    meta, raw = got
    assert raw == data and meta.size == len(data) and meta.name == "blob.bin"
    assert await store.get_file(rec.id + 1000) is None


async def test_kv_set_get_overwrite(store: Store) -> None:
    assert await store.get_kv("k", "dflt") == "dflt"
    await store.set_kv("k", {"a": [1, 2]})
    await store.set_kv("k", {"a": [3]})
    assert await store.get_kv("k") == {"a": [3]}


async def test_audit_log_records_tool_runs(store: Store) -> None:
    await store.add_audit(AuditEntry(tool="calculate", arguments={"expression": "1+1"}, result="2",
                                     duration_ms=1.5, confirmed=None))
    entries = await store.list_audit()
    assert entries[0].tool == "calculate" and entries[0].result == "2"
