"""ProviderRouter: the named actor ("router:chat") that owns provider health for one kind.

Every AgentLoop replica asks it for the order to try and reports outcomes, so EMA latency,
rests and retirements are shared. Thin shell over RouterState.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import ray
from ray.exceptions import RayActorError

from actors.common.names import NAMESPACE
from actors.common.restart import through_restart
from actors.logmask import install_log_masking
from actors.providers.failover import apply_outcome
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.router_state import RouteEntry, RouterState
from actors.providers.types import ProviderError
from actors.settings import ProviderConfig

log = logging.getLogger(__name__)


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
        if ray.get_runtime_context().was_current_actor_reconstructed:
            # Health is rebuilt by use; the model listing is fetched again, queued behind this.
            ray.get_runtime_context().current_actor.discover.remote()

    async def discover(self) -> dict[str, list[str]]:
        return await discover(self.state, self.providers)

    def add_entries(self, entries: list[RouteEntry]) -> None:
        """Entries that come from no configured provider (the local model); known keys stay."""
        self.state.add_entries(entries)

    def candidates(self, images: int = 0) -> list[RouteEntry]:
        return self.state.candidates(images)

    def record(self, key: str, outcome: str, value: float | None = None) -> float:
        return apply_outcome(self.state, key, outcome, value)

    def seconds_until_ready(self, images: int = 0) -> float | None:
        return self.state.seconds_until_ready(images)

    def snapshot(self) -> list[dict[str, Any]]:
        return self.state.snapshot()


def router_actor(kind: str, providers: list[ProviderConfig]) -> Any:
    return ProviderRouter.options(
        name=f"router:{kind}", namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
    ).remote([p.model_dump() for p in providers])


class RemoteRouter:
    """RouterClient over the actor: each call is one awaited actor round trip (~1 ms). The
    router restarts in place when it dies; a call that met the death is made once more."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args)
        except RayActorError:
            return await through_restart(lambda: getattr(self.handle, method).remote(*args))

    async def candidates(self, images: int = 0) -> list[RouteEntry]:
        return await self._call("candidates", images)

    async def record(self, key: str, outcome: str, value: float | None = None) -> float:
        return await self._call("record", key, outcome, value)

    def note_success(self, key: str, elapsed: float) -> None:
        # Fire and forget; calls from one caller reach the actor in order.
        self.handle.record.remote(key, "success", elapsed)

    async def seconds_until_ready(self, images: int = 0) -> float | None:
        return await self._call("seconds_until_ready", images)
