"""The relay's HTTP contract in-process: the real app, real RelayActors on the test Ray, a
real SQLite store; time moved through the service's clock, never waited for."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from actors.common.names import NAMESPACE
from actors.relay import repository as repo
from actors.relay.actor import RelayConfig, relay_actor, stored_file_path
from actors.relay.errors import RelayError
from actors.relay.limits import RelayLimits
from actors.relay.service import Clock, RelayService
from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.http.relay_app import build_relay_app

pytestmark = pytest.mark.ray
BASE = "http://127.0.0.1:7433"


def _pid(actor_self: Any) -> int:
    return os.getpid()


async def kill_and_wait_for_restart(actor: Any, timeout: float = 120.0) -> None:
    """ray.kill returns before the old process is gone, so a call made at once can still reach
    it (a loaded clean-clone run saw one do so, not yet restarted). Wait until a new process
    answers."""
    from ray.exceptions import RayActorError

    before = await actor.__ray_call__.remote(_pid)
    ray.kill(actor, no_restart=False)
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            if await actor.__ray_call__.remote(_pid) != before:
                return
        except RayActorError:
            pass   # dying or restarting: ask again
        await asyncio.sleep(0.1)
    raise AssertionError(f"the relay actor was not restarted within {timeout:.0f} s")


class Relay:
    def __init__(self, service: RelayService, client: httpx.AsyncClient, clock: Clock) -> None:
        self.service, self.client, self.clock = service, client, clock
        self.url = self.key = ""

    async def create(self) -> dict[str, Any]:
        reply = await self.client.post("/sessions")
        assert reply.status_code == 201
        data = reply.json()
        self.url, self.key = data["url"][len(BASE):], data["key"]
        return data

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    async def post(self, content: Any = "hi", metadata: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
        payload: dict[str, Any] = {"message": {"role": "assistant", "name": "otter", "content": content}}
        if metadata is not None:
            payload["metadata"] = metadata
        return await self.client.post(self.url, json=payload, headers=self.auth, **kw)

    async def read(self, since: int = 0) -> httpx.Response:
        return await self.client.get(self.url, params={"since": since}, headers=self.auth)


def error_code(reply: httpx.Response) -> str:
    return reply.json()["error"]["code"]


@pytest.fixture
async def make_relay(ray_session: None, tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Relay]]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'relay.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    opened: list[httpx.AsyncClient] = []

    async def make(peer: bool = False, **limits: Any) -> Relay:
        clock = Clock()
        service = RelayService(store, RelayConfig(database_url=url, data_dir=str(tmp_path / "data")),
                               RelayLimits(**limits), clock=clock)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=build_relay_app(service, peer=peer)),
                                   base_url=BASE, timeout=30)
        opened.append(client)
        return Relay(service, client, clock)

    yield make
    for client in opened:
        await client.aclose()
    await store.close()


async def parked(relay: Relay, uid: str, count: int = 1) -> None:
    """Wait (with a deadline) until `count` long-polls are parked in the session's actor."""
    actor = ray.get_actor(f"relay:{uid}", namespace=NAMESPACE)
    async def poll() -> None:
        while await actor.waiting.remote() < count:
            await asyncio.sleep(0.02)
    await asyncio.wait_for(poll(), 10)


async def test_creation_returns_the_spec_defaults_and_the_key_works_once_hashed(make_relay) -> None:
    relay = await make_relay()
    created = await relay.create()
    assert created["limits"] == {
        "messages_per_minute": 60, "max_body_bytes": 65536, "max_file_bytes": 104857600,
        "max_storage_bytes": 1073741824, "max_messages": 10000, "inactivity_ttl_seconds": 86400,
        "grace_seconds": 86400, "max_wait_seconds": 55, "sessions_per_ip_per_hour": 30}
    assert created["url"] == f"{BASE}/s/{created['uid']}"
    stored = await relay.service.store.engine.connect()
    try:
        import sqlalchemy as sa
        from actors.store import schema
        key_hash = (await stored.execute(sa.select(schema.relay_sessions.c.key_hash))).scalar_one()
    finally:
        await stored.close()
    assert created["key"] not in key_hash and len(key_hash) == 64
    first = await relay.post("hello")
    assert first.status_code == 201 and first.json()["seq"] == 1
    assert error_code(await relay.client.get(relay.url, headers={"Authorization": "Bearer nope"})) == "unauthorized"


async def test_body_cap_exactly_at_and_one_over(make_relay) -> None:
    relay = await make_relay()
    await relay.create()
    frame = json.dumps({"message": {"role": "user", "name": "a", "content": ""}}, separators=(",", ":"))
    def sized(total: int) -> bytes:
        return json.dumps({"message": {"role": "user", "name": "a", "content": "x" * (total - len(frame))}},
                          separators=(",", ":")).encode()
    assert len(sized(65536)) == 65536
    at = await relay.client.post(relay.url, content=sized(65536), headers=relay.auth)
    assert at.status_code == 201
    under = await relay.client.post(relay.url, content=sized(65535), headers=relay.auth)
    assert under.status_code == 201
    over = await relay.client.post(relay.url, content=sized(65537), headers=relay.auth)
    assert over.status_code == 413 and error_code(over) == "payload_too_large"


async def test_long_poll_wakes_on_append_and_urgent_filter(make_relay) -> None:
    relay = await make_relay()
    uid = (await relay.create())["uid"]
    await relay.post("one")
    instant = await relay.client.get(f"{relay.url}/wait", params={"since": 1, "timeout": 0}, headers=relay.auth)
    assert instant.status_code == 204
    already = await relay.client.get(f"{relay.url}/wait", params={"since": 0, "timeout": 30}, headers=relay.auth)
    assert already.status_code == 200 and already.json()["messages"][0]["seq"] == 1

    plain = asyncio.create_task(relay.client.get(f"{relay.url}/wait", params={"since": 1, "timeout": 30},
                                                 headers=relay.auth))
    urgent = asyncio.create_task(relay.client.get(
        f"{relay.url}/wait", params={"since": 1, "timeout": 30, "filter": "urgent"}, headers=relay.auth))
    await parked(relay, uid, 2)
    await relay.post("two")
    woke = await asyncio.wait_for(plain, 10)
    assert woke.status_code == 200 and [m["seq"] for m in woke.json()["messages"]] == [2]
    assert not urgent.done()
    await relay.post("three", {"urgent": True})
    got = await asyncio.wait_for(urgent, 10)
    assert [m["seq"] for m in got.json()["messages"]] == [3] and got.json()["last_seq"] == 3
    bad = await relay.client.get(f"{relay.url}/wait", params={"filter": "all"}, headers=relay.auth)
    assert bad.status_code == 400 and error_code(bad) == "invalid_request"


async def test_a_stopping_relay_answers_a_parked_long_poll_at_once_and_a_new_one_too(make_relay) -> None:
    """`iriis relay serve` stopping: a reader parked for 55 s must not hold the stop that long."""
    relay = await make_relay()
    uid = (await relay.create())["uid"]
    assert (await relay.post("one")).status_code == 201
    poll = asyncio.create_task(relay.client.get(f"{relay.url}/wait", params={"since": 1, "timeout": 55},
                                                headers=relay.auth))
    await parked(relay, uid)
    assert not poll.done()
    relay.service.release_polls()
    answered = await asyncio.wait_for(poll, 10)
    assert answered.status_code == 204  # nothing new: its client polls again, as after a timeout
    again = await asyncio.wait_for(relay.client.get(f"{relay.url}/wait", params={"since": 1, "timeout": 55},
                                                    headers=relay.auth), 10)
    assert again.status_code == 204
    assert (await relay.post("two")).json()["seq"] == 2  # posts are still taken meanwhile


async def test_concurrent_posts_get_consecutive_seqs_each_stored_before_its_reply(make_relay) -> None:
    relay = await make_relay(messages_per_minute=1000)
    uid = (await relay.create())["uid"]
    assert (await relay.read()).json() == {"messages": [], "last_seq": 0}  # the actor is up
    waiter = asyncio.create_task(relay.client.get(f"{relay.url}/wait", params={"since": 0, "timeout": 30},
                                                  headers=relay.auth))
    await parked(relay, uid)

    async def post_and_look(text: str) -> dict[str, Any]:
        reply = await relay.post(text)
        assert reply.status_code == 201
        # Straight from the store, not through the actor: acknowledged means stored.
        stored = await repo.read_messages(relay.service.store, uid, reply.json()["seq"] - 1, 1)
        assert stored == [reply.json()]
        return reply.json()

    replies = await asyncio.gather(*(post_and_look(f"m{i}") for i in range(20)))
    assert sorted(r["seq"] for r in replies) == list(range(1, 21))
    stored = await repo.read_messages(relay.service.store, uid, 0, 100)
    assert [e["seq"] for e in stored] == list(range(1, 21))
    assert sorted(e["message"]["content"] for e in stored) == sorted(f"m{i}" for i in range(20))
    woke = await asyncio.wait_for(waiter, 10)
    assert woke.status_code == 200 and woke.json()["messages"][0]["seq"] == 1


async def test_a_failed_write_fails_only_its_own_batch_with_the_internal_error(make_relay) -> None:
    relay = await make_relay(messages_per_minute=1000)
    uid = (await relay.create())["uid"]
    async with relay.service.store.engine.begin() as conn:  # the store refuses one message
        await conn.exec_driver_sql(
            "CREATE TRIGGER poison BEFORE INSERT ON relay_messages WHEN NEW.envelope LIKE '%\"poison\"%' "
            "BEGIN SELECT RAISE(ABORT, 'injected'); END")
    assert (await relay.post("first")).json()["seq"] == 1

    def message(text: str) -> dict[str, Any]:
        return {"role": "assistant", "name": "otter", "content": text}

    # Posted in one step, the three go to the actor in one call and are stored in one transaction.
    batch = await asyncio.gather(*(relay.service.post(uid, message(t), {}) for t in ("a", "poison", "b")),
                                 return_exceptions=True)
    assert [(type(e), getattr(e, "code", None)) for e in batch] == [(RelayError, "internal")] * 3
    failed = await relay.post("poison")
    assert failed.status_code == 500 and failed.json() == {
        "error": {"code": "internal", "message": "the relay failed; this is not your fault"}}
    # The failed batches took no seq; the next ones go on from where the store is.
    after = await asyncio.gather(*(relay.post(t) for t in ("c", "d")))
    assert sorted(r.json()["seq"] for r in after) == [2, 3]
    stored = await repo.read_messages(relay.service.store, uid, 0, 100)
    assert [e["seq"] for e in stored] == [1, 2, 3]
    assert sorted(e["message"]["content"] for e in stored) == ["c", "d", "first"]
    assert (await relay.read()).json()["last_seq"] == 3


async def test_rate_limit_at_and_over_with_retry_after(make_relay) -> None:
    relay = await make_relay(messages_per_minute=5)
    await relay.create()
    for _ in range(4):
        assert (await relay.post()).status_code == 201
    upload = await relay.client.put(f"{relay.url}/files/a.txt", content=b"x", headers=relay.auth)
    assert upload.status_code == 201
    over = await relay.post()
    assert over.status_code == 429 and error_code(over) == "rate_limited"
    assert 1 <= int(over.headers["Retry-After"]) <= 60
    relay.clock.offset += 61
    assert (await relay.post()).status_code == 201


async def test_message_cap_warning_and_refusal(make_relay) -> None:
    relay = await make_relay(max_messages=5)
    await relay.create()
    for _ in range(4):
        await relay.post()
    fifth = await relay.post()
    assert fifth.status_code == 201
    log = (await relay.read()).json()
    warning = log["messages"][-1]
    assert warning["metadata"] == {"event": "limit_warning", "limit": "messages", "used": 5, "max": 5}
    full = await relay.post()
    assert full.status_code == 409 and error_code(full) == "limit_exceeded"
    terminated = await relay.client.post(f"{relay.url}/terminate", headers=relay.auth)
    assert terminated.status_code == 200  # system messages are never refused
    assert (await relay.read()).json()["last_seq"] == 7


async def test_files_put_list_get_overwrite(make_relay) -> None:
    relay = await make_relay(max_file_bytes=1000)
    await relay.create()
    put = await relay.client.put(f"{relay.url}/files/report.csv", content=b"a,b\n1,2\n",
                                 headers={**relay.auth, "Content-Type": "text/csv"})
    assert put.status_code == 201 and put.json()["metadata"]["file"] == {
        "name": "report.csv", "size": 8, "content_type": "text/csv"}
    got = await relay.client.get(f"{relay.url}/files/report.csv", headers=relay.auth)
    assert got.content == b"a,b\n1,2\n" and got.headers["content-type"] == "text/csv"
    again = await relay.client.put(f"{relay.url}/files/report.csv", content=b"z" * 1000, headers=relay.auth)
    assert again.status_code == 201 and again.json()["seq"] == put.json()["seq"] + 1
    listing = (await relay.client.get(f"{relay.url}/files", headers=relay.auth)).json()["files"]
    assert [(f["name"], f["size"], f["seq"]) for f in listing] == [("report.csv", 1000, again.json()["seq"])]
    over = await relay.client.put(f"{relay.url}/files/big.bin", content=b"z" * 1001, headers=relay.auth)
    assert over.status_code == 413 and error_code(over) == "payload_too_large"
    missing = await relay.client.get(f"{relay.url}/files/nope", headers=relay.auth)
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    left = os.listdir(Path(relay.service.config.data_dir) / "tmp")
    assert left == []  # refused uploads leave nothing behind


async def test_lifecycle_expiring_read_only_purged_with_a_moved_clock(make_relay) -> None:
    relay = await make_relay()
    uid = (await relay.create())["uid"]
    await relay.post("before")
    await relay.client.put(f"{relay.url}/files/keep.txt", content=b"k", headers=relay.auth)
    path = stored_file_path(relay.service.config.data_dir, uid, "keep.txt")
    assert path.exists()

    relay.clock.offset += 86400 - 601
    assert await relay.service.sweep() == {"expiring": 0, "purged": 0}
    for _ in range(3):  # reads never count as activity, and nothing is due twice
        await relay.read()
    relay.clock.offset += 2
    assert await relay.service.sweep() == {"expiring": 1, "purged": 0}
    assert await relay.service.sweep() == {"expiring": 0, "purged": 0}
    events = [m["metadata"].get("event") for m in (await relay.read()).json()["messages"]]
    assert events == [None, "file_uploaded", "session_expiring"]

    relay.clock.offset += 600
    late = await relay.post("after")
    assert late.status_code == 409 and error_code(late) == "session_read_only"
    assert (await relay.read()).status_code == 200
    file_read = await relay.client.get(f"{relay.url}/files/keep.txt", headers=relay.auth)
    assert file_read.status_code == 200

    relay.clock.offset += 86400
    assert await relay.service.sweep() == {"expiring": 0, "purged": 1}
    assert not path.exists()
    # The server keeps nothing for a purged session (its posting queue, handle and key).
    assert uid not in relay.service._posting and uid not in relay.service._handles
    for reply in [await relay.read(), await relay.client.get(f"{relay.url}/files", headers=relay.auth),
                  await relay.post("x"), await relay.client.post(f"{relay.url}/terminate", headers=relay.auth),
                  await relay.client.get(f"{relay.url}/wait", headers=relay.auth)]:
        assert reply.status_code == 410 and error_code(reply) == "gone"
    assert uid not in relay.service._posting


async def test_terminate_then_purge_after_grace(make_relay) -> None:
    relay = await make_relay()
    await relay.create()
    await relay.post()
    first = (await relay.client.post(f"{relay.url}/terminate", headers=relay.auth)).json()
    relay.clock.offset += 30
    second = (await relay.client.post(f"{relay.url}/terminate", headers=relay.auth)).json()
    assert first == second and first["status"] == "read-only"
    events = [m["metadata"].get("event") for m in (await relay.read()).json()["messages"]]
    assert events.count("session_terminated") == 1
    relay.clock.offset += 86400 - 30
    assert (await relay.read()).status_code == 410


async def test_seq_survives_a_new_app_and_a_new_actor(make_relay) -> None:
    relay = await make_relay()
    uid = (await relay.create())["uid"]
    for text in ("a", "b", "c"):
        await relay.post(text)
    ray.kill(ray.get_actor(f"relay:{uid}", namespace=NAMESPACE), no_restart=True)
    fresh = await make_relay()
    fresh.url, fresh.key = relay.url, relay.key
    reply = await fresh.post("d")
    assert reply.status_code == 201 and reply.json()["seq"] == 4
    assert [m["message"]["content"] for m in (await fresh.read()).json()["messages"]] == ["a", "b", "c", "d"]


async def test_a_batch_sent_again_after_its_actor_died_committing_is_not_stored_twice(make_relay) -> None:
    """The app sends a batch again when its actor dies before answering (through_restart); if
    the batch was committed just before the death, the restarted actor answers it from the log."""
    from actors.common.restart import through_restart
    from actors.relay.messages import Post

    relay = await make_relay()
    uid = (await relay.create())["uid"]
    actor = relay_actor(uid, relay.service.config)
    now = relay.service.now()
    posts = [Post(message={"role": "user", "name": "w", "content": text}, metadata={}, now=now)
             for text in ("one", "two")]
    first = await actor.post.remote(posts)
    # Killed as if at the instant after the commit, before its answer got out: Ray restarts
    # it in place, and the same posts (same tokens) arrive again.
    await kill_and_wait_for_restart(actor)
    again = await through_restart(lambda: actor.post.remote(posts))
    assert [e.seq for e in again] == [e.seq for e in first] == [1, 2]
    assert again == first
    later = await actor.post.remote([Post(message={"role": "user", "name": "w", "content": "three"},
                                          metadata={}, now=now)])
    assert [e.seq for e in later] == [3]
    stored = await repo.read_messages(relay.service.store, uid, 0, 100)
    assert [m["message"]["content"] for m in stored] == ["one", "two", "three"]
    assert [m["seq"] for m in stored] == [1, 2, 3]


async def test_an_upload_sent_again_after_its_actor_died_committing_is_stored_and_announced_once(
        make_relay) -> None:
    """As for posts: the app sends an upload again (same token) when its actor dies before
    answering; the restarted actor answers it from the log, and the file is there once."""
    from actors.common.restart import through_restart

    relay = await make_relay()
    uid = (await relay.create())["uid"]
    actor = relay_actor(uid, relay.service.config)
    spool = Path(relay.service.config.data_dir) / "tmp"
    spool.mkdir(parents=True, exist_ok=True)
    tmp = spool / "upload-1"
    tmp.write_bytes(b"a,b\n1,2\n")
    now = relay.service.now()
    first = await actor.put_file.remote("report.csv", 8, "text/csv", str(tmp), now, "upload-token-1")
    await kill_and_wait_for_restart(actor)
    again = await through_restart(lambda: actor.put_file.remote("report.csv", 8, "text/csv", str(tmp), now,
                                                                "upload-token-1"))
    assert again == first and first.seq == 1
    log = (await relay.read()).json()["messages"]
    assert [m["seq"] for m in log] == [1]
    got = await relay.client.get(f"{relay.url}/files/report.csv", headers=relay.auth)
    assert got.status_code == 200 and got.content == b"a,b\n1,2\n"
    # A new upload of the same name is a new upload: stored and announced again.
    assert (await relay.client.put(f"{relay.url}/files/report.csv", content=b"x", headers=relay.auth)).status_code == 201
    assert [m["seq"] for m in (await relay.read()).json()["messages"]] == [1, 2]


async def test_an_upload_whose_actor_died_between_moving_and_committing_it_is_stored_once(make_relay) -> None:
    """The dying actor had moved the spooled file into place but not committed: the upload sent
    again finds it there and commits it, announced once."""
    from actors.common.restart import through_restart

    relay = await make_relay()
    uid = (await relay.create())["uid"]
    actor = relay_actor(uid, relay.service.config)
    assert (await relay.post("before")).status_code == 201
    spool = Path(relay.service.config.data_dir) / "tmp"
    spool.mkdir(parents=True, exist_ok=True)
    final = stored_file_path(relay.service.config.data_dir, uid, "notes.txt")
    final.parent.mkdir(parents=True, exist_ok=True)
    # What the dying attempt left: the spooled file moved into place, nothing in the log.
    final.write_bytes(b"moved, not committed")
    await kill_and_wait_for_restart(actor)
    again = await through_restart(lambda: actor.put_file.remote(
        "notes.txt", 20, "text/plain", str(spool / "upload-2"), relay.service.now(), "upload-token-2"))
    assert again.seq == 2 and again.metadata["file"]["name"] == "notes.txt"
    assert [m["seq"] for m in (await relay.read()).json()["messages"]] == [1, 2]
    got = await relay.client.get(f"{relay.url}/files/notes.txt", headers=relay.auth)
    assert got.status_code == 200 and got.content == b"moved, not committed"


async def test_the_write_rate_holds_across_a_new_actor(make_relay) -> None:
    relay = await make_relay(messages_per_minute=5)
    uid = (await relay.create())["uid"]
    for _ in range(3):
        assert (await relay.post()).status_code == 201
    ray.kill(ray.get_actor(f"relay:{uid}", namespace=NAMESPACE), no_restart=True)
    fresh = await make_relay(messages_per_minute=5)
    fresh.url, fresh.key = relay.url, relay.key
    upload = await fresh.client.put(f"{fresh.url}/files/a.txt", content=b"x", headers=fresh.auth)
    assert upload.status_code == 201
    assert (await fresh.post()).status_code == 201
    over = await fresh.post()
    assert over.status_code == 429 and error_code(over) == "rate_limited"
    assert 1 <= int(over.headers["Retry-After"]) <= 60
    fresh.clock.offset += 62
    assert (await fresh.post()).status_code == 201


async def test_sessions_an_hour_hold_across_a_new_service(make_relay) -> None:
    first = await make_relay(sessions_per_ip_per_hour=2)
    for _ in range(2):
        await first.create()
    again = await make_relay(sessions_per_ip_per_hour=2)
    refused = await again.client.post("/sessions")
    assert refused.status_code == 429 and error_code(refused) == "rate_limited"
    assert 3590 <= int(refused.headers["Retry-After"]) <= 3600
    # The earlier sessions are untouched by the refusal.
    assert (await first.post("still here")).status_code == 201
    again.clock.offset += 3601
    assert (await again.client.post("/sessions")).status_code == 201


async def test_peer_listener_never_creates_sessions(make_relay) -> None:
    host = await make_relay()
    await host.create()
    peer = await make_relay(peer=True)
    refused = await peer.client.post("/sessions")
    assert refused.status_code == 404 and error_code(refused) == "not_found"
    peer.url, peer.key = host.url, host.key
    assert (await peer.post("via the peer listener")).status_code == 201


async def test_error_shapes_for_bad_queries_and_unknown_things(make_relay) -> None:
    relay = await make_relay()
    await relay.create()
    cases = [
        (await relay.client.get(relay.url, params={"since": "x"}, headers=relay.auth), 400, "invalid_request"),
        (await relay.client.get(relay.url, params={"limit": 0}, headers=relay.auth), 400, "invalid_request"),
        (await relay.client.get("/s/ffffffffffffffff", headers=relay.auth), 404, "not_found"),
        (await relay.client.get(relay.url), 401, "unauthorized"),
        (await relay.client.delete(relay.url, headers=relay.auth), 404, "not_found"),
        (await relay.post(metadata={"reply_to": "seven"}), 400, "invalid_request"),
    ]
    for reply, status, code in cases:
        assert (reply.status_code, error_code(reply)) == (status, code)
    for _ in range(3):
        await relay.post()
    capped = await relay.client.get(relay.url, params={"limit": 5000}, headers=relay.auth)
    assert capped.status_code == 200 and len(capped.json()["messages"]) == 3
