"""ProviderRouter: the named actor ("router:chat") that owns provider health for one kind.

Every AgentLoop replica reports outcomes to it, so EMA latency, rests and retirements are
shared. Each caller (`RemoteRouter`) keeps a mirror of that state, refreshed by a parked `watch`
call that returns as soon as anything changed, so asking for the order to try is local (it was
an actor round trip before every model call). Thin shell over RouterState.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any, TYPE_CHECKING

import httpx
import ray
from ray.exceptions import RayActorError

from actors.common.changes import ChangeStamp
from actors.common.names import NAMESPACE
from actors.common.restart import through_restart
from actors.logmask import install_log_masking
from actors.providers.failover import apply_outcome
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.router_state import RouteEntry, RouterState
from actors.providers.types import ProviderError
from actors.settings import ProviderConfig

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger(__name__)

# A parked `watch` returns after this long even when nothing changed; a caller whose watch
# failed asks the actor directly, and tries watching again after WATCH_RETRY seconds.
WATCH_SECONDS = 30.0
WATCH_RETRY = 1.0


def entries_for(providers: list[ProviderConfig]) -> list[RouteEntry]:
    return [RouteEntry(provider=p.name, model=m, base_url=p.base_url, api_key_env=p.api_key_env,
                       max_images=p.max_images)
            for p in providers for m in p.models]


async def discover(state: RouterState, providers: list[ProviderConfig]) -> dict[str, list[str]]:
    """List each provider's models; warn about configured names it no longer offers and add
    models matching the provider's backup patterns at the end of the order."""
    found: dict[str, list[str]] = {}
    async with httpx.AsyncClient() as client:
        for p in providers:
            try:
                models = await OpenAICompatProvider(p.name, p.base_url, p.api_key, client).list_models()
            except ProviderError as exc:
                log.warning("model discovery for %s failed: %s", p.name, exc.plain())
                continue
            found[p.name] = models
            missing = [m for m in p.models if m not in models]
            if missing and models:
                log.warning("provider %s does not list %s", p.name, ", ".join(missing))
            patterns = [s.lower() for s in p.backup_patterns]
            backups = [m for m in models if any(s in m.lower() for s in patterns) and m not in p.models]
            state.add_entries(RouteEntry(provider=p.name, model=m, base_url=p.base_url,
                                         api_key_env=p.api_key_env, max_images=p.max_images)
                              for m in backups)
    return found


@ray.remote(num_cpus=0, max_restarts=-1)
class ProviderRouter:
    def __init__(self, providers: list[dict[str, Any]]) -> None:
        install_log_masking()
        self.providers = [ProviderConfig(**p) for p in providers]
        self.state = RouterState(entries_for(self.providers))
        # Which state a mirror holds: a fresh epoch after a restart, so no mirror mistakes the
        # rebuilt state for the one it already had.
        self.stamp = ChangeStamp()
        if ray.get_runtime_context().was_current_actor_reconstructed:
            # Health is rebuilt by use; the model listing is fetched again, queued behind this.
            ray.get_runtime_context().current_actor.discover.remote()

    async def discover(self) -> dict[str, list[str]]:
        found = await discover(self.state, self.providers)
        self.stamp.bump()
        return found

    async def add_entries(self, entries: list[RouteEntry]) -> None:
        """Entries that come from no configured provider (the local model); known keys stay."""
        self.state.add_entries(entries)
        self.stamp.bump()

    async def candidates(self, images: int = 0) -> list[RouteEntry]:
        return self.state.candidates(images)

    async def record(self, key: str, outcome: str, value: float | None = None) -> float:
        wait = apply_outcome(self.state, key, outcome, value)
        self.stamp.bump()
        return wait

    async def seconds_until_ready(self, images: int = 0) -> float | None:
        return self.state.seconds_until_ready(images)

    async def snapshot(self) -> list[dict[str, Any]]:
        return self.state.snapshot()

    async def watch(self, seen: str, wait: float = WATCH_SECONDS) -> tuple[str, list[RouteEntry]]:
        """The state once it is newer than version `seen` (at once when it already is), or
        after `wait` seconds: what a caller's mirror is rebuilt from."""
        return await self.stamp.newer_than(seen, wait), self.state.portable()


def router_actor(kind: str, providers: list[ProviderConfig]) -> Any:
    return ProviderRouter.options(
        name=f"router:{kind}", namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
    ).remote([p.model_dump() for p in providers])


class RemoteRouter:
    """RouterClient over the actor. The order to try comes from a local mirror of the actor's
    state (kept current by a parked `watch`; another replica's report reaches it a moment
    later); outcomes go to the actor, and into the mirror at once. Until the mirror has its
    first copy, or while watching fails, each call is an actor round trip. The router restarts
    in place when it dies; a call that met the death is made once more."""

    def __init__(self, handle: ActorHandle) -> None:
        self.handle = handle
        self._mirror: RouterState | None = None
        self._seen = ""
        self._watcher: asyncio.Task[None] | None = None
        self._watcher_loop: asyncio.AbstractEventLoop | None = None

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args)
        except RayActorError:
            return await through_restart(lambda: getattr(self.handle, method).remote(*args))

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        if self._watcher is None or self._watcher.done() or self._watcher_loop is not loop:
            self._mirror, self._seen, self._watcher_loop = None, "", loop
            self._watcher = loop.create_task(self._follow(), context=contextvars.Context())

    async def _follow(self) -> None:
        while True:
            try:
                self._seen, entries = await self.handle.watch.remote(self._seen)
                self._mirror = RouterState.from_portable(entries)
            except Exception as exc:  # noqa: BLE001 - without a mirror, calls go to the actor
                self._mirror, self._seen = None, ""
                log.debug("router mirror lost: %s", exc)
                await asyncio.sleep(WATCH_RETRY)

    async def candidates(self, images: int = 0) -> list[RouteEntry]:
        self._watch()
        if self._mirror is not None:
            return self._mirror.candidates(images)
        return await self._call("candidates", images)

    def _mirror_outcome(self, key: str, outcome: str, value: float | None) -> None:
        """The mirror learns an outcome at once, before the actor's next copy arrives."""
        if self._mirror is not None:
            try:
                apply_outcome(self._mirror, key, outcome, value)
            except KeyError:
                pass  # an entry the mirror has not seen yet: the actor's copy brings it

    async def record(self, key: str, outcome: str, value: float | None = None) -> float:
        self._mirror_outcome(key, outcome, value)
        return await self._call("record", key, outcome, value)

    def note_success(self, key: str, elapsed: float) -> None:
        self._mirror_outcome(key, "success", elapsed)
        # Fire and forget; calls from one caller reach the actor in order.
        self.handle.record.remote(key, "success", elapsed)

    async def seconds_until_ready(self, images: int = 0) -> float | None:
        return await self._call("seconds_until_ready", images)
