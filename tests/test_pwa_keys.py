"""Owner keys with labels and last use, revoked without a restart: the pure key ring, the
store functions on both backends, and the `iriis key new|list|revoke` commands."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from actors.session.actor import SessionConfig
from serve_apps.http import context as context_module

from serve_apps.http.auth import (
    LAST_USED_WRITE_SECONDS,
    REFRESH_SECONDS,
    KeyRing,
    create_key,
    hash_key,
    key_records,
    load_key_records,
    public_key_record,
    revoke_key,
)
from serve_apps.http.context import GatewayConfig, GatewayContext

IRIIS = Path(sys.executable).parent / "iriis"


def test_old_bare_hashes_become_labelled_records_once() -> None:
    records = key_records([{"id": 1, "label": "phone", "hash": "aa", "created": 5.0}], ["aa", "bb"])
    assert [(r["id"], r["label"], r["hash"]) for r in records] == [(1, "phone", "aa"), (2, "key 2", "bb")]
    assert key_records(None, []) == []


def test_the_ring_accepts_fixed_and_stored_keys_and_notes_last_use() -> None:
    ring = KeyRing(frozenset({hash_key("env-key")}))
    assert ring.stale(0.0)
    ring.load([hash_key("stored")], now=100.0)
    assert not ring.stale(100.0 + REFRESH_SECONDS - 0.01) and ring.stale(100.0 + REFRESH_SECONDS)
    assert ring.check("env-key", 1.0) and ring.check(" stored ", 2.0) and not ring.check("other", 3.0)
    assert not ring.check(None, 3.0) and not ring.check("", 3.0)
    # Only stored keys have a last use to write; each at most once a minute.
    assert ring.due_writes(10.0) == {hash_key("stored"): 2.0}
    ring.check("stored", 2.0 + LAST_USED_WRITE_SECONDS - 1)
    assert ring.due_writes(20.0) == {}
    ring.check("stored", 2.0 + LAST_USED_WRITE_SECONDS)
    assert ring.due_writes(30.0) == {hash_key("stored"): 2.0 + LAST_USED_WRITE_SECONDS}
    # A revoked key (gone from the next load) is refused at once.
    ring.load([], now=200.0)
    assert not ring.check("stored", 4.0)


def test_a_listed_key_shows_its_label_and_last_use_never_the_hash() -> None:
    record = {"id": 3, "label": "ha", "hash": hash_key("k"), "created": 9.0}
    shown = public_key_record(record, {hash_key("k"): 12.0}, "k")
    assert shown == {"id": 3, "label": "ha", "created": 9.0, "last_used": 12.0, "current": True, "revocable": True}
    assert public_key_record(record, {}, None)["last_used"] is None


async def test_keys_are_created_and_revoked_in_the_store(store) -> None:
    key, record = await create_key(store, "  Home   Assistant ", 50.0)
    assert key.startswith("iriis_") and record["label"] == "Home Assistant"
    second, _ = await create_key(store, "", 51.0)
    records = await load_key_records(store)
    assert [r["id"] for r in records] == [1, 2] and records[1]["label"] == "key"
    assert key not in str(records) and records[0]["hash"] == hash_key(key)
    assert await store.get_kv("owner_key_hashes") == sorted([hash_key(key), hash_key(second)])
    assert await revoke_key(store, 1) and not await revoke_key(store, 1)
    assert [r["hash"] for r in await load_key_records(store)] == [hash_key(second)]
    assert await store.get_kv("owner_key_hashes") == [hash_key(second)]


def test_the_key_commands(tmp_path: Path) -> None:
    env = {**os.environ, "IRIIS_HOME": str(tmp_path), "DATABASE_URL": "", "IRIIS_OWNER_KEYS": ""}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(IRIIS), *args], env=env, capture_output=True, text=True, timeout=60)

    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("iriis ")
    made = run("key", "new", "--label", "backup script")
    assert made.returncode == 0 and made.stdout.strip().startswith("iriis_")
    assert "no restart" in made.stderr
    listed = run("key", "list")
    assert "backup script" in listed.stdout and "never" in listed.stdout
    assert made.stdout.strip() not in listed.stdout
    assert run("key", "revoke", "1").returncode == 0
    assert run("key", "revoke", "1").returncode == 1
    assert "no stored owner keys" in run("key", "list").stderr


async def test_a_replica_keeps_the_stored_keys_current_with_no_request_waiting(store, monkeypatch) -> None:
    """Keys made or revoked elsewhere (another replica, `iriis key`) reach a replica's copy in
    the background; a request only checks that copy."""
    monkeypatch.setattr(context_module, "REFRESH_SECONDS", 0.2)
    config = GatewayConfig.model_construct(web_dir=".", session=SessionConfig(database_url="sqlite://"))
    gw = GatewayContext(store=store, hashes=frozenset(), config=config, agent=None, perception=None)

    async def until(accepted: bool) -> None:
        for _ in range(100):
            if gw.keys.check(key, time.time()) is accepted:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"the copy never had the key {'in' if accepted else 'out'}")

    try:
        key, _ = await create_key(store, "phone", time.time())
        await until(True)
        assert await revoke_key(store, 1)
        await until(False)
    finally:
        assert gw._key_refresh is not None
        gw._key_refresh.cancel()
