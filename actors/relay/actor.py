"""RelayActor "relay:{uid}": one per relay session while it is in use.

It owns the session's sequencing (one write at a time, under a lock), its long-poll waiters,
its write-rate window and its warnings. Posts come in batches (the app sends those that arrive
while one is on its way in one call, `RelayService.post`): a batch is stored in one transaction,
and each of its posts is answered only once that transaction has committed. Everything durable
is in the store, so a restarted or re-created actor picks up at the same seq. The HTTP app
passes `now` on every call: the app's clock is the only clock, which is what lets tests move
time.

Replies are typed (`actors.relay.messages`); a refusal or a fault comes back as a `RelayFault`,
never as an exception across Ray. Idle for `idle_seconds` with nothing parked or running, the
actor exits (the rule is `IdleWatch`); file moves run in a worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import ray
from pydantic import BaseModel
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.common.idle import IdleWatch
from actors.common.names import NAMESPACE
from actors.recent_errors import report
from actors.relay import repository as repo
from actors.relay.core import Plan, SessionCore
from actors.relay.envelope import is_urgent
from actors.relay.errors import RelayError
from actors.relay.messages import Batch, Envelope, FileFound, FileList, Post, RelayFault, Swept, Terminated
from actors.relay.waiters import Gone, WaiterHub
from actors.store.store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
# How long a restarted actor checks posts against the log (the app retries for up to 60 s).
RECHECK_SECONDS = 90.0


class RelayConfig(BaseModel):
    database_url: str
    data_dir: str
    idle_seconds: float = 300.0
    # A Ray custom resource the session actors prefer (soft), for a relay whose `data_dir` is on
    # storage every such node shares; empty: each actor is pinned to the app's own node.
    prefer_resource: str = ""


def files_dir(data_dir: str | Path, uid: str) -> Path:
    return Path(data_dir) / "files" / uid


def stored_file_path(data_dir: str | Path, uid: str, name: str) -> Path:
    # Names come from peers: hash them, so no name can reach outside the session's folder.
    return files_dir(data_dir, uid) / hashlib.sha256(name.encode()).hexdigest()


def _move_into_place(tmp_path: str, final: Path, sent_again: bool = False) -> None:
    """Blocking file-system work of an upload (run in a worker thread). `sent_again`: the
    upload may be one an actor that died had moved into place but not yet committed; its
    spooled file is then already `final`."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if sent_again and not os.path.exists(tmp_path) and final.exists():
        return
    os.replace(tmp_path, final)


def _discard(tmp_path: str) -> None:
    if os.path.exists(tmp_path):
        os.unlink(tmp_path)


def _batch(envelopes: list[dict[str, Any]], last_seq: int) -> Batch:
    return Batch(messages=[Envelope.model_validate(e) for e in envelopes], last_seq=last_seq)


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=10000)
class RelayActor:
    def __init__(self, uid: str, config: RelayConfig) -> None:
        self.uid = uid
        self.config = config
        self.store = Store.open(config.database_url)
        self.writer = repo.PlanWriter(self.store)
        self.core: SessionCore | None = None
        self.waiters = WaiterHub()
        self._lock = asyncio.Lock()
        self._loading = asyncio.Lock()
        self.idle = IdleWatch(config.idle_seconds)
        self._idle: asyncio.Task[None] | None = None
        # Restarted after a death: a post in flight then may have been committed before the
        # actor died, and the app sends it again (through_restart); until its retries are over,
        # posts are looked up by their token first so none is stored twice.
        self._recheck_until = (time.monotonic() + RECHECK_SECONDS
                               if ray.get_runtime_context().was_current_actor_reconstructed else 0.0)

    async def _load(self, now: float) -> SessionCore:
        self.idle.touch()
        if self.core is None:
            # Calls arrive concurrently: the first loads, the others wait for its result.
            async with self._loading:
                if self.core is None:
                    state = await repo.load_session(self.store, self.uid)
                    if state is None:
                        raise RelayError("not_found", "no such session")
                    core = SessionCore(state)
                    core.rate.seed(await repo.recent_writes(self.store, self.uid, now - 60.0, core.rate.per_minute))
                    self.core = core
                    self._idle = asyncio.get_running_loop().create_task(self._idle_timer())
        if self.core.phase(now) == "purged":
            await self._purge()
        return self.core

    async def _idle_timer(self) -> None:
        while True:
            await asyncio.sleep(self.idle.period())
            if self.idle.due(busy=len(self.waiters) > 0 or self._lock.locked()):
                # On purpose, so no restart: the next request rebuilds it from the store.
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return

    async def _apply(self, plan: Plan, file_path: str | None = None) -> None:
        """Persist first, then wake waiters: a woken reader never sees a message the store lacks."""
        await self.writer.write(plan, file_path)
        assert self.core is not None
        self.core.commit(plan)
        if plan.envelopes:
            self.waiters.notify(plan.envelopes)

    async def _purge(self) -> None:
        assert self.core is not None
        if not self.core.state.purged:
            await repo.purge(self.store, self.uid)
            await asyncio.to_thread(shutil.rmtree, files_dir(self.config.data_dir, self.uid), True)
            self.core.state.purged = True
        self.waiters.fail_all()

    async def _guard(self, coro: Awaitable[T]) -> T | RelayFault:
        """Every public method's boundary: refusals become a RelayFault, faults `internal`."""
        try:
            return await coro
        except RelayError as exc:
            return exc.fault()
        except Exception as exc:  # noqa: BLE001 - actor boundary: never raise across Ray
            log.exception("relay session %s failed", self.uid)
            report("relay.actor", exc, request={"uid": self.uid})
            return RelayError("internal", "the relay failed; this is not your fault").fault()

    # -- calls from the HTTP app ---------------------------------------------------------

    async def post(self, posts: list[Post]) -> list[Envelope | RelayFault] | RelayFault:
        """A batch of posts, in order, stored in one transaction: each answered with its envelope,
        or with its own refusal (which takes no seq). A failed write fails the whole batch."""
        async def run() -> list[Envelope | RelayFault]:
            async with self._lock:
                core = await self._load(posts[0].now)
                stored = await self._stored_already([p.token for p in posts])
                fresh = [p for p in posts if p.token not in stored]
                plan, results = core.plan_posts([(p.message, p.metadata, p.now) for p in fresh])
                plan.posted = {r["seq"]: p.token for p, r in zip(fresh, results) if not isinstance(r, RelayError)}
                if plan.envelopes:
                    await self._apply(plan)
            by_token = dict(zip((p.token for p in fresh), results)) | stored
            return [self._reply(by_token[p.token]) for p in posts]
        return await self._guard(run())

    async def read(self, since: int, limit: int, now: float) -> Batch | RelayFault:
        async def run() -> Batch:
            core = await self._load(now)
            core.require_readable(now)
            head = core.state.last_seq
            messages = await repo.read_messages(self.store, self.uid, since, limit)
            return _batch(messages, head)
        return await self._guard(run())

    def _rechecking(self) -> bool:
        """Restarted a moment ago: what arrives may be a retry of something the dead actor did."""
        return time.monotonic() < self._recheck_until

    async def _stored_already(self, tokens: list[str]) -> dict[str, dict[str, Any]]:
        """Envelopes already in the log for these post or upload tokens (only just after a restart)."""
        if not self._rechecking():
            return {}
        return await repo.posted_envelopes(self.store, self.uid, tokens)

    @staticmethod
    def _reply(result: dict[str, Any] | RelayError) -> Envelope | RelayFault:
        return result.fault() if isinstance(result, RelayError) else Envelope.model_validate(result)

    def _head(self) -> int:
        return self.core.state.last_seq if self.core else 0

    async def wait(self, since: int, timeout: float, urgent_only: bool, now: float) -> Batch | RelayFault | None:
        """Matches already in the log at once; else park until an append matches or time is up
        (None, which the app answers with 204)."""
        async def run() -> Batch | None:
            core = await self._load(now)
            core.require_readable(now)
            if since < core.state.last_seq:
                found = await repo.read_messages(self.store, self.uid, since, 1000, urgent_only)
                if found:
                    return _batch(found, self._head())
            if timeout <= 0:
                return None
            match = is_urgent if urgent_only else (lambda _e: True)
            try:
                woke = await self.waiters.wait(since, match, timeout)
            except Gone:
                raise RelayError("gone", "this session was purged while you waited") from None
            finally:
                self.idle.touch()
            if woke is None:
                return None
            return _batch(woke, self._head())
        return await self._guard(run())

    async def put_file(self, name: str, size: int, content_type: str, tmp_path: str,
                       now: float, token: str | None = None) -> Envelope | RelayFault:
        """Store an upload spooled at `tmp_path` and announce it. `token` is the app's for this
        upload: sent again after this actor died as it committed, the upload is answered with
        the announcement already in the log, not stored and announced twice."""
        async def run() -> Envelope:
            try:
                async with self._lock:
                    core = await self._load(now)
                    stored = await self._stored_already([token]) if token else {}
                    if token in stored:
                        return Envelope.model_validate(stored[token])
                    found = await repo.get_file(self.store, self.uid, name)
                    plan = core.plan_file(name, size, content_type, found[0].size if found else None, now)
                    if token:
                        plan.posted = {plan.envelopes[0]["seq"]: token}
                    final = stored_file_path(self.config.data_dir, self.uid, name)
                    await asyncio.to_thread(_move_into_place, tmp_path, final, bool(token) and self._rechecking())
                    await self._apply(plan, str(final))
                    return Envelope.model_validate(plan.envelopes[0])
            finally:
                await asyncio.to_thread(_discard, tmp_path)
        return await self._guard(run())

    async def files(self, now: float) -> FileList | RelayFault:
        async def run() -> FileList:
            core = await self._load(now)
            core.require_readable(now)
            return FileList(files=await repo.list_files(self.store, self.uid))
        return await self._guard(run())

    async def file(self, name: str, now: float) -> FileFound | RelayFault:
        async def run() -> FileFound:
            core = await self._load(now)
            core.require_readable(now)
            found = await repo.get_file(self.store, self.uid, name)
            if found is None:
                raise RelayError("not_found", f"no file named {name!r} in this session")
            record, path = found
            return FileFound(file=record, path=path)
        return await self._guard(run())

    async def terminate(self, now: float) -> Terminated | RelayFault:
        async def run() -> Terminated:
            async with self._lock:
                core = await self._load(now)
                plan = core.plan_terminate(now)
                await self._apply(plan)
                return core.terminate_reply()
        return await self._guard(run())

    async def sweep(self, now: float) -> Swept | RelayFault:
        """The sweeper's call: announce expiry ten minutes ahead, purge when the grace is over."""
        async def run() -> Swept:
            async with self._lock:
                core = await self._load(now)
                if core.state.purged:
                    return Swept(phase="purged")
                plan = core.plan_expiring(now)
                if plan is not None:
                    await self._apply(plan)
                return Swept(phase=core.phase(now))
        return await self._guard(run())

    def head(self) -> int:
        return self.core.state.last_seq if self.core else -1

    def waiting(self) -> int:
        """How many long-polls are parked (tests wait on this instead of sleeping)."""
        return len(self.waiters)


def relay_actor(uid: str, config: RelayConfig, placement: dict[str, Any] | None = None) -> Any:
    """The session's actor, created on first use. `placement` (actors.common.placement, from
    `config.prefer_resource`) says which node it prefers; without one it is pinned to this
    node, where the app keeps its files."""
    if not placement:
        node = ray.get_runtime_context().get_node_id()
        placement = {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}
    return RelayActor.options(
        name=f"relay:{uid}", namespace=NAMESPACE, get_if_exists=True, lifetime="detached", **placement,
    ).remote(uid, config)
