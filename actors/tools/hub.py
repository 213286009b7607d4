"""ToolHub "tools": the named actor that owns the MCP catalogue (server processes, HTTP
connections, restarts) so every AgentLoop replica shares one set of servers.

A thin shell over Catalogue; restarted by Ray if it dies, and it starts its servers again and
asks every connected device to offer its tools again (their DeviceActors hold the hellos).
Callers (the AgentLoop) retry a call that met the death once.

The owner's switch (`switch`, PUT /v1/tools/{name}) is kept in the store's kv table
(`SWITCHED_OFF_KV`, the names switched off) and applied before the servers start, so a server
switched off stays off across restarts of the hub and of the whole system.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, TYPE_CHECKING

import ray
from ray.exceptions import RayActorError
from sqlalchemy.exc import SQLAlchemyError

from actors.devices import provider as device_provider
from actors.common.names import NAMESPACE, TOOL_HUB
from actors.logmask import install_log_masking
from actors.store.store import Store
from actors.tools.catalogue import Catalogue
from actors.tools.config import McpConfig
from actors.common.toolspec import ToolError, ToolSpec

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger(__name__)
HUB_NAME = TOOL_HUB
SWITCHED_OFF_KV = "tools.switched_off"


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class ToolHub:
    def __init__(self, mcp: dict[str, Any], environ: dict[str, str], reserved: list[str]) -> None:
        install_log_masking()
        self.catalogue = Catalogue(McpConfig.model_validate(mcp), environ, reserved=set(reserved))
        self._start: asyncio.Task[None] | None = None
        # Where the owner's switches are kept (none without a database: a test's bare hub).
        url = (environ.get("IRIIS_DATABASE_URL") or "").strip()
        self._store = Store.open(url, pool_size=1, max_overflow=1) if url else None
        self._switching = asyncio.Lock()
        self.devices: dict[int, device_provider.DeviceProvider] = {}
        # After a restart: recovery is queued behind this constructor, and the first status
        # read starts it too, should that queued call be lost in the restart.
        self._recovery: asyncio.Task[int] | None = None
        self._reconstructed = ray.get_runtime_context().was_current_actor_reconstructed
        if self._reconstructed:
            ray.get_runtime_context().current_actor.recover.remote()

    async def recover(self) -> int:
        """After a restart: start the servers, and have each connected device publish again
        (once, however often it is asked)."""
        if self._recovery is None:
            self._recovery = asyncio.get_running_loop().create_task(self._recover())
        return await asyncio.shield(self._recovery)

    async def _recover(self) -> int:
        from actors.devices.actor import live_devices_async  # lazy: pulls the store (sqlalchemy) into the ToolHub's process

        await self.ready()
        back = 0
        for handle in (await live_devices_async()).values():
            try:
                await handle.regrant.remote()
                back += 1
            except RayActorError:
                pass
        log.info("tool hub restarted: servers started, %d devices offered their tools again", back)
        return back

    def pid(self) -> int:
        """This actor's process id (fault tests kill it)."""
        return os.getpid()

    async def ready(self) -> list[dict[str, Any]]:
        """Start every server once (each one's first attempt) but those the owner switched off;
        returns their status."""
        if self._start is None:
            self._start = asyncio.get_running_loop().create_task(self._begin())
        await asyncio.shield(self._start)
        return self._status()

    async def _begin(self) -> None:
        known = set(self.catalogue.servers())
        for name in await self._switched_off():
            if name in known:  # one since taken out of mcp.yaml stays in the list, in case it returns
                await self.catalogue.switch(name, False)
        await self.catalogue.start()

    async def switch(self, name: str, enabled: bool) -> dict[str, Any] | None:
        """The owner's switch on an mcp.yaml server: kept in the store first, then applied (off:
        its tools leave every listing at once and its process stops; on: it starts again).
        Returns the server's status, or None for a name mcp.yaml does not have."""
        await self.ready()
        if name not in self.catalogue.servers():
            return None
        async with self._switching:
            if self._store is not None:
                off = set(await self._switched_off(strict=True))
                await self._store.set_kv(SWITCHED_OFF_KV, sorted(off | {name} if not enabled else off - {name}))
            status = await self.catalogue.switch(name, enabled)
        log.info("tool server %s switched %s by the owner", name, "on" if enabled else "off")
        return status.model_dump()

    async def _switched_off(self, strict: bool = False) -> list[str]:
        """The names the owner switched off, as stored. At start-up a store that cannot be read
        starts every server (said in the log); `strict` raises instead."""
        if self._store is None:
            return []
        try:
            names = await self._store.get_kv(SWITCHED_OFF_KV, [])
        except (SQLAlchemyError, OSError) as exc:
            if strict:
                raise
            log.warning("the tool servers the owner switched off could not be read (%s): starting them all", exc)
            return []
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    async def status(self) -> list[dict[str, Any]]:
        if self._reconstructed and self._recovery is None:
            self._recovery = asyncio.get_running_loop().create_task(self._recover())
        return self._status()

    def _status(self) -> list[dict[str, Any]]:
        return [s.model_dump() for s in self.catalogue.status()]

    async def listing(self, person: int | None = None) -> tuple[dict[str, ToolSpec], dict[str, list[str]]]:
        """The tools on offer now and each server's routing keywords, in one round trip. Device
        tools are personal: only `person`'s own devices are listed (none without a person)."""
        if self._start is None:
            await self.ready()
        return device_provider.person_view(self.catalogue.specs(), self.catalogue.keywords(), self.devices, person)

    async def listing_changed(self, seen: str, wait: float = 25.0) -> str:
        """The catalogue's change stamp once it differs from `seen`, or after `wait` seconds: a
        server's state or tools, or a device, changed what `listing` answers (a restarted hub
        starts a new epoch, so it never repeats an old stamp)."""
        return await self.catalogue.stamp.newer_than(seen, wait)

    async def call(self, name: str, arguments: dict[str, Any], timeout: float = 120.0,
                   scope: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a tool; failures come back as data ({"error"}), which crosses Ray predictably.
        `scope` ({"person", "device"}) says whose turn it is, for device tools."""
        if name == device_provider.DEVICES_TOOL:
            return {"text": device_provider.person_note(self.devices, (scope or {}).get("person"))}
        # A module attribute, not an imported name: Ray pickles this class, and a ContextVar
        # cannot be pickled.
        token = device_provider.CALL_SCOPE.set(scope)
        try:
            out = await self.catalogue.call(name, arguments, timeout=timeout)
        except ToolError as exc:
            return {"error": str(exc)}
        finally:
            device_provider.CALL_SCOPE.reset(token)
        return {"text": out.text, "files": out.files, "sources": out.sources}

    # -- personal devices (actors/devices) ------------------------------------------------------

    def device_online(self, info: dict[str, Any], servers: dict[str, list[dict[str, Any]]], handle: ActorHandle) -> None:
        """A connected device's tools (the skills switched on) join the catalogue, replacing
        what it offered before."""
        old = self.devices.pop(info["id"], None)
        if old is not None:
            self.catalogue.remove_provider(old)
        provider = device_provider.DeviceProvider(info, {k: [ToolSpec.model_validate(s) for s in v] for k, v in servers.items()},
                                  handle)
        self.devices[info["id"]] = provider
        self.catalogue.add_provider(provider)

    def device_offline(self, device_id: int) -> None:
        provider = self.devices.pop(device_id, None)
        if provider is not None:
            self.catalogue.remove_provider(provider)

    async def close(self) -> None:
        await self.catalogue.close()
        if self._store is not None:
            await self._store.close()


def tool_hub(mcp: McpConfig | None = None, environ: dict[str, str] | None = None,
             reserved: list[str] | None = None) -> Any:
    """The hub by name; created with this configuration if it does not exist yet."""
    return ToolHub.options(name=HUB_NAME, namespace=NAMESPACE, get_if_exists=True,
                           lifetime="detached").remote(
        (mcp or McpConfig()).model_dump(), environ or {}, reserved or [])
