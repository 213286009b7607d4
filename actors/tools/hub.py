"""ToolHub "tools": the named actor that owns the MCP catalogue (server processes, HTTP
connections, restarts) so every AgentLoop replica shares one set of servers.

A thin shell over Catalogue; restarted by Ray if it dies, and it starts its servers again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray

from actors.errors import NAMESPACE
from actors.logmask import install_log_masking
from actors.tools.catalogue import Catalogue
from actors.tools.config import McpConfig
from actors.tools.spec import ToolError, ToolSpec

log = logging.getLogger(__name__)
HUB_NAME = "tools"


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class ToolHub:
    def __init__(self, mcp: dict[str, Any], environ: dict[str, str], reserved: list[str]) -> None:
        install_log_masking()
        self.catalogue = Catalogue(McpConfig.model_validate(mcp), environ, reserved=set(reserved))
        self._start: asyncio.Task[None] | None = None

    async def ready(self) -> list[dict[str, Any]]:
        """Start every server once (each one's first attempt); returns their status."""
        if self._start is None:
            self._start = asyncio.get_running_loop().create_task(self.catalogue.start())
        await asyncio.shield(self._start)
        return self.status()

    def status(self) -> list[dict[str, Any]]:
        return [s.model_dump() for s in self.catalogue.status()]

    async def listing(self) -> tuple[dict[str, ToolSpec], dict[str, list[str]]]:
        """The tools on offer now and each server's routing keywords, in one round trip."""
        if self._start is None:
            await self.ready()
        return self.catalogue.specs(), self.catalogue.keywords()

    async def call(self, name: str, arguments: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        """Run a tool; failures come back as data ({"error"}), which crosses Ray predictably."""
        try:
            out = await self.catalogue.call(name, arguments, timeout=timeout)
        except ToolError as exc:
            return {"error": str(exc)}
        return {"text": out.text, "files": out.files}

    async def close(self) -> None:
        await self.catalogue.close()


def tool_hub(mcp: McpConfig | None = None, environ: dict[str, str] | None = None,
             reserved: list[str] | None = None) -> Any:
    """The hub by name; created with this configuration if it does not exist yet."""
    return ToolHub.options(name=HUB_NAME, namespace=NAMESPACE, get_if_exists=True,
                           lifetime="detached").remote(
        (mcp or McpConfig()).model_dump(), environ or {}, reserved or [])
