"""Keeping one mcp.yaml server running: connect, list its tools, wait for the loss, restart.

Each configured server gets a supervisor task (`Supervisor.supervise`) that connects, lists the
tools and then waits for the connection to end; when it does, the server is "down" and the
supervisor starts it again after a back-off that doubles up to a ceiling, back to the shortest
after a long healthy run. A server's tools become ToolSpecs here, with the tier mcp.yaml sets,
or 0 for a tool the server marks read-only, else 1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_types import Tool

from actors.common.toolspec import ToolSpec
from actors.tools.config import RestartPolicy, ServerConfig
from actors.tools.mcp.client import McpConnection
from actors.tools.mcp.outcomes import McpError

logger = logging.getLogger(__name__)

ServerState = Literal["on", "off", "down", "starting"]
OWNER_OFF = "switched off by the owner"
ConnectionFactory = Callable[[str, ServerConfig, Mapping[str, str]], McpConnection]
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class CloudServer:
    """One mcp.yaml server as its supervisor and the catalogue see it."""

    name: str
    config: ServerConfig
    state: ServerState = "starting"
    reason: str = ""
    restarts: int = 0
    # Last tool list seen, kept while down so that exposed names stay put.
    tools: list[ToolSpec] = field(default_factory=list)
    conn: McpConnection | None = None
    task: asyncio.Task[None] | None = None
    first_attempt: asyncio.Event = field(default_factory=asyncio.Event)
    # Off for want of an environment variable (never started), and the owner's switch.
    unconfigured: bool = False
    switched_off: bool = False

    def usable(self) -> bool:
        return self.state == "on" and self.conn is not None and self.conn.alive


def cloud_server(name: str, config: ServerConfig, environ: Mapping[str, str]) -> CloudServer:
    """The entry for one mcp.yaml server: "off" with the missing variables named when one it
    requires is unset or blank."""
    entry = CloudServer(name=name, config=config)
    missing = [var for var in config.requires_env if not environ.get(var, "").strip()]
    if missing:
        entry.state, entry.unconfigured = "off", True
        entry.reason = "missing environment variable" + ("s" if len(missing) > 1 else "") + ": " + ", ".join(missing)
    return entry


def _needs_purpose(schema: dict[str, Any]) -> bool:
    properties = schema.get("properties")
    required = schema.get("required")
    return (isinstance(properties, dict) and "purpose" in properties
            and isinstance(required, list) and "purpose" in required)


def cloud_spec(entry: CloudServer, tool: Tool) -> ToolSpec | None:
    """The model-facing spec of one of `entry`'s tools, or None when mcp.yaml excludes it."""
    config = entry.config
    if tool.name in config.exclude:
        return None
    if tool.name in config.tools:
        tier = config.tools[tool.name]
    elif config.tier is not None:
        tier = config.tier
    elif tool.annotations is not None and tool.annotations.read_only_hint:
        tier = 0
    else:
        tier = 1
    schema = tool.input_schema or {"type": "object", "properties": {}}
    description = (tool.description or getattr(tool, "title", None) or tool.name).strip()
    return ToolSpec(name=tool.name, description=description, parameters=schema, tier=tier,
                    source=entry.name, untrusted_output=not config.trusted,
                    purpose_required=_needs_purpose(schema))


class Supervisor:
    """The restart policy and connection settings every server's supervisor task shares.

    `on_change` runs after every state change (the catalogue wakes its waiters); `closed`
    stops every loop at its next turn.
    """

    def __init__(self, environ: Mapping[str, str], restart: RestartPolicy, connect_timeout: float,
                 factory: ConnectionFactory | None, sleep: Sleep | None,
                 on_change: Callable[[], None]) -> None:
        self._environ = environ
        self._restart = restart
        self._connect_timeout = connect_timeout
        self._factory: ConnectionFactory = factory or self._connect
        self._sleep: Sleep = sleep or asyncio.sleep
        self._on_change = on_change
        self.closed = False

    def set_state(self, entry: CloudServer, state: ServerState, reason: str) -> None:
        entry.state = state
        entry.reason = reason
        self._on_change()

    async def switch(self, entry: CloudServer, enabled: bool, started: bool) -> None:
        """The owner's switch: off stops the server (unusable at once, then its process ended);
        on starts it again, or, before the catalogue has `started`, leaves that to its start.
        One that is `unconfigured` stays off either way."""
        was_off, entry.switched_off = entry.switched_off, not enabled
        if entry.unconfigured:
            self._on_change()
        elif not enabled:
            await self.stop(entry, OWNER_OFF)
        elif was_off and started:
            self.launch(entry)
        elif was_off:
            self.set_state(entry, "starting", "")

    def launch(self, entry: CloudServer) -> None:
        """Start `entry`'s supervisor task (its first attempt with a fresh `first_attempt`),
        unless one is running already."""
        if entry.task is not None and not entry.task.done():
            return
        entry.first_attempt = asyncio.Event()
        self.set_state(entry, "starting", "")
        entry.task = asyncio.create_task(self.supervise(entry), name=f"mcp-supervisor:{entry.name}")

    async def stop(self, entry: CloudServer, reason: str) -> None:
        """Switch `entry` off: unusable at once (state "off" with `reason`), then its supervisor
        task ended and its process or connection closed."""
        self.set_state(entry, "off", reason)
        task, conn = entry.task, entry.conn
        entry.task = None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task])
        if entry.conn is conn:
            entry.conn = None
        if conn is not None:
            await conn.close()
        if entry.state != "off":  # the task got a last word in while it was being cancelled
            self.set_state(entry, "off", reason)

    async def supervise(self, entry: CloudServer) -> None:
        try:
            await self._keep_running(entry)
        except asyncio.CancelledError:
            raise
        except Exception:  # boundary: a supervisor bug must not leave start() waiting forever
            logger.exception("mcp %s: supervisor failed", entry.name)
            self.set_state(entry, "down", "internal error in the catalogue")
        finally:
            entry.first_attempt.set()

    async def _keep_running(self, entry: CloudServer) -> None:
        loop = asyncio.get_running_loop()
        delay = self._restart.initial_s
        first = True
        while not self.closed:
            if not first:
                await self._sleep(delay)
                delay = min(delay * 2, self._restart.max_s)
                entry.restarts += 1
            first = False
            self.set_state(entry, "starting", entry.reason)
            conn = self._factory(entry.name, entry.config, self._environ)
            entry.conn = conn
            try:
                await conn.start()
                async with asyncio.timeout(self._connect_timeout):
                    listed = await conn.list_tools()
            except (McpError, TimeoutError) as exc:
                reason = str(exc) or f"no tool list within {self._connect_timeout:g} s"
                await conn.close()
                entry.conn = None
                logger.warning("mcp %s: could not start: %s", entry.name, reason)
                self.set_state(entry, "down", reason)
                entry.first_attempt.set()
                continue
            entry.tools = [spec for tool in listed if (spec := cloud_spec(entry, tool)) is not None]
            self.set_state(entry, "on", "")
            entry.first_attempt.set()
            logger.info("mcp %s: on, %d tools", entry.name, len(entry.tools))
            up_since = loop.time()
            reason = await conn.wait_lost()
            await conn.close()
            entry.conn = None
            self.set_state(entry, "down", reason or "the connection closed")
            # A crash after a long healthy run is news, not a crash loop: restart soon.
            if loop.time() - up_since >= self._restart.max_s:
                delay = self._restart.initial_s

    def _connect(self, name: str, config: ServerConfig, environ: Mapping[str, str]) -> McpConnection:
        return McpConnection(name, config, environ, connect_timeout=self._connect_timeout)
