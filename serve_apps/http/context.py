"""What a route may use of the Gateway replica serving it: a small typed context the Gateway
makes in its constructor (store, key hashes, config, the agent and perception handles, and the
live conversation actors), so routes never reach into the deployment's private state.

No `from __future__ import annotations`: FastAPI inspects the dependency types built on this.
"""

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel, Field
from ray.exceptions import RayActorError
from ray.serve.handle import DeploymentHandle
from starlette.requests import HTTPConnection

from actors.camera.actor import CameraConfig
from actors.devices.tokens import DEVICE_TOKEN_PREFIX
from actors.session.actor import SessionConfig, live_sessions_async
from actors.session.pool import registry
from actors.session.release import until_gone
from actors.store.store import Store
from actors.memory.embed_actor import remote_encoder
from serve_apps.http.auth import KEY_LAST_USED_KV, REFRESH_SECONDS, KeyRing, load_key_records, presented_key
from serve_apps.http.conversations import Conversations
from serve_apps.http.errors import ApiError

log = logging.getLogger(__name__)


class GatewayConfig(BaseModel):
    owner_key_hashes: list[str]
    database_url: str
    web_dir: str
    session: SessionConfig
    camera: CameraConfig
    max_upload_bytes: int = 50 * 1024 * 1024
    # Host header values accepted at /mcp (DNS-rebinding guard).
    hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1:8000", "localhost:8000"])


class GatewayContext:
    """One per Gateway replica, on `app.state.gateway`; reached through `deps.GatewayDep`."""

    def __init__(self, *, store: Store, hashes: frozenset[str], config: GatewayConfig, agent: DeploymentHandle,
                 perception: DeploymentHandle | None) -> None:
        self.store = store
        # The fixed keys (IRIIS_OWNER_KEYS, this run's internal key) and the stored ones, which
        # are reloaded every few seconds so a new or revoked key needs no restart.
        self.keys = KeyRing(hashes)
        self._key_refresh: asyncio.Task[None] | None = None
        self._keys_failing = False  # logged once per run of failures, not every second
        self.config = config
        self.agent = agent
        self.perception = perception
        self.web_dir = Path(config.web_dir)
        self.conversations = Conversations(store, config.session, lambda: registry(config.session, agent))
        self._encoder: Any = None
        self._schedule_key_refresh()  # when built on the event loop; else the first request

    async def encoder(self) -> Any:
        """The cluster's shared sentence encoder, looked up once per replica (the actor
        restarts behind the same handle); raises what the lookup raises."""
        if self._encoder is None:
            self._encoder = await remote_encoder()
        return self._encoder

    @property
    def hashes(self) -> frozenset[str]:
        """Every key digest accepted right now (a stale copy starts a reload)."""
        self._schedule_key_refresh()
        return self.keys.hashes

    def owner_key(self, key: str | None) -> bool:
        """Whether `key` is one of the owner keys."""
        self._schedule_key_refresh()
        return self.keys.check(key, time.time())

    async def owner_key_now(self, key: str | None) -> bool:
        """`owner_key` after reloading stale stored keys first, so a key made a moment ago
        (in the app, or with `iriis key new`) works on its first request."""
        await self.refresh_keys()
        return self.keys.check(key, time.time())

    def _schedule_key_refresh(self) -> None:
        """Keep the stored keys current in the background from now on, so no request waits
        for a reload (at a person's pace every request found them stale)."""
        if self._key_refresh is not None and not self._key_refresh.done():
            return
        try:
            self._key_refresh = asyncio.get_running_loop().create_task(self._keep_keys())
        except RuntimeError:  # no loop (a synchronous caller): the next async one starts it
            pass

    async def _keep_keys(self) -> None:
        # Twice per REFRESH_SECONDS, so the copy is reloaded before it counts as stale; a
        # request that still finds it stale (this task starved) reloads it first itself.
        while True:
            await self.refresh_keys(force=True)
            await asyncio.sleep(REFRESH_SECONDS / 2)

    async def refresh_keys(self, force: bool = False) -> None:
        """Reload the stored keys when stale (or `force`), and write back their last uses."""
        if not (force or self.keys.stale(time.monotonic())):
            return
        try:
            records = await load_key_records(self.store)
            self.keys.load([r["hash"] for r in records], time.monotonic())
            due = self.keys.due_writes(time.time())
            if due:
                used = dict(await self.store.get_kv(KEY_LAST_USED_KV, {}) or {})
                used.update(due)
                await self.store.set_kv(KEY_LAST_USED_KV, used)
        except Exception:  # noqa: BLE001 - keep the last copy; the fixed keys always work
            if not self._keys_failing:
                log.exception("could not reload the owner keys (trying again every second)")
            self._keys_failing = True
        else:
            if self._keys_failing:
                log.info("the owner keys reload again")
            self._keys_failing = False

    def owner(self, connection: HTTPConnection) -> None:
        """Raises ApiError: 403 `forbidden` for a device token, 401 `unauthorized` otherwise,
        unless the owner key (header, ?token= or cookie) was presented."""
        key = presented_key(connection)
        if key and key.startswith(DEVICE_TOKEN_PREFIX) and not self.owner_key(key):
            # A device token talks to the agent only through /v1/ask*; nothing signed-in.
            raise ApiError(403, "forbidden", "A device token cannot use this route.")
        if not self.owner_key(key):
            raise ApiError(401, "unauthorized", "Send the owner key as 'Authorization: Bearer <key>'.")

    async def flush_live_sessions(self) -> None:
        """Write every live session's buffer at once, so an export sees what was said a moment ago."""
        actors = list((await live_sessions_async()).values())
        results = await asyncio.gather(*(actor.flush.remote() for actor in actors), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, RayActorError):
                raise result

    async def retire_session(self, session_id: str) -> bool:
        """Write a live conversation's buffer and end its actor (it is rebuilt from the store
        on demand), so a rename or delete in the store is not overwritten. False, leaving it
        alone, while a turn is running."""
        actor = (await live_sessions_async()).get(session_id)
        if actor is None:
            return True
        try:
            if (await actor.state.remote()).get("running"):
                return False
            await actor.flush.remote()
            ray.kill(actor, no_restart=True)
            # ray.kill only asks: a message right after a delete would otherwise still reach
            # the dying actor and be answered from the conversation it holds.
            await until_gone(actor)
        except RayActorError:
            pass
        return True

    async def live_session_holding(self, message_id: str) -> str | None:
        """A message not flushed yet lives only in its session actor: ask the live ones."""
        for session_id, actor in (await live_sessions_async()).items():
            try:
                if await actor.has_message.remote(message_id):
                    return session_id
            except RayActorError:
                continue
        return None

