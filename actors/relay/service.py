"""What both relay listeners share: the clock, the session directory, actor calls, creation
and the sweeper. The HTTP routes (serve_apps/relay_app.py) stay thin over this."""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray.exceptions import RayActorError

from actors.common.hashing import sha256_hex as hash_key
from actors.common.placement import preferred
from actors.common.restart import through_restart
from actors.recent_errors import report
from actors.relay import lifecycle
from actors.relay import repository as repo
from actors.relay.actor import RelayConfig, relay_actor
from actors.relay.envelope import iso_utc
from actors.relay.errors import RelayError
from actors.relay.group_commit import GroupCommit
from actors.relay.lifecycle import SessionState
from actors.relay.limits import RelayLimits, hourly_retry
from actors.relay.messages import Envelope, Post, RelayFault, SessionCreated, Swept
from actors.relay.pairing import Blob, PairingToken, new_key, new_uid
from actors.store.store import Store

log = logging.getLogger(__name__)


class Clock:
    """Wall time plus an offset that only the test hook moves."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class RelayService:
    def __init__(self, store: Store, config: RelayConfig, limits: RelayLimits,
                 clock: Callable[[], float] | None = None, blob: Blob | None = None,
                 sweep_seconds: float = 60.0) -> None:
        self.store = store
        self.config = config
        self.limits = limits
        self.clock = clock or Clock()
        self.blob = blob
        self.sweep_seconds = sweep_seconds
        # Counting and inserting under one lock, so two creations at once cannot both take the
        # last slot of the hour.
        self._creating = asyncio.Lock()
        self._handles: dict[str, Any] = {}
        self._keys: dict[str, str] = {}
        self._posting: dict[str, GroupCommit[Post, Envelope]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        Path(config.data_dir, "tmp").mkdir(parents=True, exist_ok=True)

    def now(self) -> float:
        return self.clock()

    # -- sessions -------------------------------------------------------------------------

    async def create(self, client: str, base_url: str) -> SessionCreated:
        uid, key = new_uid(), new_key()
        async with self._creating:
            now = self.now()
            earlier = await repo.creations_since(self.store, client, now - 3600)
            retry = hourly_retry(earlier, now, self.limits.sessions_per_ip_per_hour)
            if retry is not None:
                raise RelayError("rate_limited", f"at most {self.limits.sessions_per_ip_per_hour} sessions an hour",
                                 retry_after=retry)
            state = SessionState(uid=uid, key_hash=hash_key(key), created=now, last_write=now,
                                 limits=self.limits)
            await repo.create_session(self.store, state, created_by=client)
        self._keys[uid] = state.key_hash
        token = PairingToken(blob=self.blob, uid=uid, key=key).encode() if self.blob is not None else None
        return SessionCreated(uid=uid, url=f"{base_url.rstrip('/')}/s/{uid}", key=key, created_at=iso_utc(now),
                              limits=self.limits.model_dump(), token=token)

    async def authorize(self, uid: str, key: str | None) -> None:
        """404 for no such session, 401 for a wrong or missing key."""
        key_hash = self._keys.get(uid)
        if key_hash is None:
            state = await repo.load_session(self.store, uid)
            if state is None:
                raise RelayError("not_found", "no such session")
            key_hash = self._keys[uid] = state.key_hash
        if not key or not hmac.compare_digest(hash_key(key), key_hash):
            raise RelayError("unauthorized", "wrong or missing key; send Authorization: Bearer <key>")

    async def call(self, uid: str, method: str, *args: Any) -> Any:
        """Call the session's actor (creating it if it is not running); a RelayFault becomes a
        RelayError. An actor that exited while idle is made again, up to three times; one that
        is restarting in place (killed: max_restarts) is waited for, and the call made again
        (a long-poll parks again; the store is the log, so nothing is missed)."""
        for attempt in range(3):
            handle = self._handles.get(uid)
            if handle is None:
                placement = await preferred(self.config.prefer_resource)
                handle = self._handles[uid] = relay_actor(uid, self.config, placement)
            try:
                result = await through_restart(lambda: getattr(handle, method).remote(*args))
                break
            except RayActorError:
                self._handles.pop(uid, None)
                if attempt == 2:
                    raise
                await asyncio.sleep(0.2 * (attempt + 1))
        if isinstance(result, RelayFault):
            raise RelayError.from_fault(result)
        return result

    async def park(self, uid: str, since: int, timeout: float, urgent: bool) -> list[Envelope] | None:
        """A long poll: what comes after `since`, or None (a 204) at `timeout`, or at once when the
        relay is stopping (`release_polls`), so that a parked reader never holds up a shutdown:
        its client polls again, as it does after any 204."""
        if self._stopping.is_set():
            return None
        call = asyncio.ensure_future(self.call(uid, "wait", since, timeout, urgent, self.now()))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({call, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if call.done():
            return call.result()
        call.cancel()
        return None

    def release_polls(self) -> None:
        """The relay is stopping: every parked long poll is answered now, and any new one at once."""
        self._stopping.set()

    async def post(self, uid: str, message: dict[str, Any], metadata: dict[str, Any]) -> Envelope:
        """Append a client's message; answered once it is stored. Group commit: posts to one
        session that arrive while a batch is on its way go to the actor together, as the next
        batch (one call, one transaction), so at most one batch per session is in flight."""
        posting = self._posting.get(uid)
        if posting is None:
            async def send(posts: list[Post]) -> list[Envelope | Exception]:
                replies = await self.call(uid, "post", posts)
                return [RelayError.from_fault(r) if isinstance(r, RelayFault) else r for r in replies]
            posting = self._posting[uid] = GroupCommit(send)
        try:
            return await posting.submit(Post(message=message, metadata=metadata, now=self.now()))
        except RelayError as exc:
            if exc.code == "gone":
                self._forget(uid)
            raise

    # -- the sweeper ----------------------------------------------------------------------

    async def sweep(self) -> dict[str, int]:
        """Warn sessions about to go read-only and purge those past their grace."""
        now = self.now()
        done = {"expiring": 0, "purged": 0}
        for state in await repo.live_sessions(self.store):
            if lifecycle.expiring_due(state, now) or lifecycle.purge_due(state, now):
                try:
                    result = await self.call(state.uid, "sweep", now)
                except RelayError as exc:
                    if exc.code != "gone":
                        log.warning("sweep of %s: %s", state.uid, exc.message)
                    result = Swept(phase="purged")
                if result.phase == "purged":
                    done["purged"] += 1
                    self._forget(state.uid)
                else:
                    done["expiring"] += 1
        return done

    def _forget(self, uid: str) -> None:
        """A purged session's handle, key and posting queue go too (an idle queue only: a
        post still on its way gets its answer, `gone`, from the actor)."""
        self._handles.pop(uid, None)
        self._keys.pop(uid, None)
        posting = self._posting.get(uid)
        if posting is not None and posting.idle:
            del self._posting[uid]

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_seconds)
            try:
                await self.sweep()
            except Exception as exc:  # noqa: BLE001 - timer boundary: report and sweep again later
                log.exception("relay sweep failed")
                report("relay.sweep", exc)

    def start_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep_forever(), context=contextvars.Context())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
