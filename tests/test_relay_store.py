"""Relay sessions, logs and files in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

from actors.relay import repository as repo
from actors.relay.core import SessionCore
from actors.relay.lifecycle import SessionState
from actors.relay.limits import RelayLimits
from actors.store.store import Store

T0 = 1_800_000_000.0


async def test_session_log_files_and_purge_round_trip(store: Store) -> None:
    state = SessionState(uid="00112233aabbccdd", key_hash="h", created=T0, last_write=T0,
                         limits=RelayLimits(max_messages=50))
    await repo.create_session(store, state)
    core = SessionCore(state)
    for i, urgent in enumerate([False, True, False]):
        plan = core.plan_post({"role": "user", "name": "a", "content": f"m{i}"}, {"urgent": urgent}, T0 + i)
        await repo.save_plan(store, plan)
        core.commit(plan)
    plan = core.plan_file("notes.txt", 12, "text/plain", None, T0 + 5)
    await repo.save_plan(store, plan, "/data/x")
    core.commit(plan)

    loaded = await repo.load_session(store, state.uid)
    assert loaded is not None and loaded.last_seq == 4 and loaded.limits.max_messages == 50
    assert loaded.last_write == T0 + 5 and loaded.message_count == 4
    everything = await repo.read_messages(store, state.uid, 0, 100)
    assert [e["seq"] for e in everything] == [1, 2, 3, 4]
    assert everything[0]["message"]["content"] == "m0"
    assert [e["seq"] for e in await repo.read_messages(store, state.uid, 0, 100, urgent_only=True)] == [2]
    assert [e["seq"] for e in await repo.read_messages(store, state.uid, 1, 2)] == [2, 3]
    files = await repo.list_files(store, state.uid)
    assert [(f.name, f.seq, f.size) for f in files] == [("notes.txt", 4, 12)]

    # Same name again: one row, the newer seq.
    plan = core.plan_file("notes.txt", 3, "text/markdown", 12, T0 + 6)
    await repo.save_plan(store, plan, "/data/x")
    found = await repo.get_file(store, state.uid, "notes.txt")
    assert found is not None and found[0].seq == 5 and found[0].content_type == "text/markdown"

    assert [s.uid for s in await repo.live_sessions(store)] == [state.uid]
    assert await repo.purge(store, state.uid) == ["/data/x"]
    assert await repo.read_messages(store, state.uid, 0, 100) == []
    assert await repo.list_files(store, state.uid) == []
    tomb = await repo.load_session(store, state.uid)
    assert tomb is not None and tomb.purged and tomb.last_seq == 5
    assert await repo.live_sessions(store) == []
    assert await repo.load_session(store, "ffffffffffffffff") is None


async def test_the_rate_and_creation_counts_are_read_back_from_the_store(store: Store) -> None:
    state = SessionState(uid="99887766aabbccdd", key_hash="h", created=T0, last_write=T0,
                         limits=RelayLimits(max_messages=8))
    await repo.create_session(store, state, created_by="10.0.0.7")
    await repo.create_session(store, SessionState(uid="99887766aabbccde", key_hash="h", created=T0 + 100,
                                                  last_write=T0, limits=RelayLimits()), created_by="10.0.0.7")
    await repo.create_session(store, SessionState(uid="99887766aabbccdf", key_hash="h", created=T0 + 50,
                                                  last_write=T0, limits=RelayLimits()), created_by="10.0.0.8")
    assert sorted(await repo.creations_since(store, "10.0.0.7", T0)) == [T0, T0 + 100]
    assert await repo.creations_since(store, "10.0.0.7", T0 + 1) == [T0 + 100]
    assert await repo.creations_since(store, "10.0.0.9", 0) == []
    # The address is bookkeeping only: the session reads back as it was stored.
    loaded = await repo.load_session(store, state.uid)
    assert loaded is not None and loaded.created == T0

    core = SessionCore(state)
    for i in range(6):  # the 7th message trips the 90% warning: a notice, not a write
        plan = core.plan_post({"role": "user", "name": "a", "content": f"m{i}"}, {}, T0 + 10 * i)
        await repo.save_plan(store, plan)
        core.commit(plan)
    plan = core.plan_file("a.bin", 3, "application/octet-stream", None, T0 + 60)
    await repo.save_plan(store, plan, "/data/a")
    core.commit(plan)
    plan = core.plan_post({"role": "user", "name": "a", "content": "last"}, {}, T0 + 61)
    await repo.save_plan(store, plan)
    core.commit(plan)
    log = await repo.read_messages(store, state.uid, 0, 100)
    assert [e["message"]["role"] for e in log].count("system") == 2  # the upload and the warning
    assert sorted(await repo.recent_writes(store, state.uid, T0 + 20, 60)) == [T0 + 20, T0 + 30, T0 + 40, T0 + 50,
                                                                                T0 + 60, T0 + 61]
    assert sorted(await repo.recent_writes(store, state.uid, T0 + 20, 2)) == [T0 + 60, T0 + 61]
    assert await repo.recent_writes(store, "ffffffffffffffff", 0, 60) == []
