"""Every tool the agent can reach beyond the built-ins: the MCP servers of mcp.yaml plus whatever
providers (devices) plug in, merged into one set of model-facing ToolSpecs.

Each configured server gets a supervisor task (actors/tools/mcp/supervisor.py) that connects,
lists the tools and then waits for the connection to end; when it does, the server is "down",
its tools leave `specs()`, and the supervisor starts it again after a back-off that doubles up to
a ceiling. Calls to a tool whose server is down fail with a plain message for the model instead
of an exception for the loop.

Providers are the seam for devices: a provider that is online and offers a server with the name of
a configured one takes its place, and the configured copy covers whenever the provider is away.
The model sees the same ToolSpec either way; only the catalogue knows which side runs a call.

Exposed names: a tool keeps its own name unless an earlier server (in mcp.yaml order, then
providers' own servers in the order they were added) or a reserved name (the built-ins) already
has it, in which case it becomes `<server>__<tool>`. Names are worked out over every server whose
tool list is known, running or not, so a server going down never renames anyone else's tools.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from actors.common.changes import ChangeStamp
from actors.common.toolspec import Handler, ToolError, ToolOutput, ToolSpec
from actors.tools.config import McpConfig, RestartPolicy
from actors.tools.mcp.outcomes import McpCallError, McpTimeout, McpUnavailable, file_ids, named_sources
from actors.tools.mcp.supervisor import CloudServer, ConnectionFactory, ServerState, Sleep, Supervisor, cloud_server
from actors.tools.spec import ToolBox

logger = logging.getLogger(__name__)

Side = Literal["cloud", "device"]
_T = TypeVar("_T")

# The built-in tools' entry in mcp.yaml configures actors/tools/builtin.py, not a server.
BUILTIN = "builtin"
PREFIX_SEPARATOR = "__"
# Error text goes to the model uncapped by ToolBox.execute, so keep it to a paragraph.
_MAX_ERROR_CHARS = 2000
# A server's last error as its status shows it: a sentence or two.
MAX_LAST_ERROR_CHARS = 300


class ServerStatus(BaseModel):
    name: str
    state: ServerState
    reason: str = ""
    tools: int = 0
    side: Side = "cloud"
    # Restart attempts since the catalogue started (not counting the first start).
    restarts: int = 0
    enabled: bool = True  # False once the owner switched it off
    # Since the catalogue started: when a tool call on it last succeeded (epoch seconds), and
    # the last call's error (None when it succeeded).
    last_ok: float | None = None
    last_error: str | None = None


class ToolProvider(Protocol):
    """Something other than mcp.yaml that runs tool servers, such as a connected device.

    `servers()` maps server name to that server's tools, each ToolSpec named with the tool's own
    name and carrying the tier the provider declared (devices state tiers in their hello; the
    model never sets them). `call` runs one tool by its own name and raises ToolError (or
    ConnectionError / OSError / TimeoutError) when it cannot.
    """

    # Read-only properties here, so a plain attribute or a computed property both qualify.
    @property
    def name(self) -> str: ...

    @property
    def online(self) -> bool: ...

    def servers(self) -> dict[str, list[ToolSpec]]: ...

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput: ...


@dataclass(frozen=True)
class _Route:
    server: str
    tool: str  # the tool's own name on its server
    spec: ToolSpec  # as the model sees it
    visible: bool
    provider: ToolProvider | None  # None: the mcp.yaml connection runs it


def _short(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _unavailable(tool: str) -> ToolError:
    return ToolError(f"{tool} is unavailable right now (its server is not running; it is being "
                     "restarted). Try again later, or carry on without it.")


class Catalogue:
    """All MCP tools, merged: see the module docstring for the rules.

    Construct, `await start()` (returns once every enabled server has connected or failed once,
    at most about `connect_timeout` seconds), use `specs()` / `call()` / `toolbox()`, and
    `await close()` on shutdown to stop every server process and background task. `switch()`
    turns a server off and on at run time (before `start()` too: it then stays off).
    """

    def __init__(self, config: McpConfig, environ: Mapping[str, str] | None = None, *,
                 restart: RestartPolicy | None = None, connect_timeout: float = 30.0,
                 reserved: Iterable[str] = (), connection_factory: ConnectionFactory | None = None,
                 sleep: Sleep | None = None, clock: Callable[[], float] = time.time) -> None:
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self._reserved = frozenset(reserved)
        self._clock = clock
        self._last_ok: dict[str, float] = {}
        self._last_error: dict[str, str] = {}
        self._switching = asyncio.Lock()
        self._supervisor = Supervisor(self._environ, restart or config.restart, connect_timeout,
                                      connection_factory, sleep, on_change=self._notify)
        self._providers: list[ToolProvider] = []
        self._changed = asyncio.Event()
        # Bumped whenever what is on offer may have changed (ToolHub.listing_changed parks on it).
        self.stamp = ChangeStamp()
        self._started = False
        self._cloud: dict[str, CloudServer] = {name: cloud_server(name, server, self._environ)
                                               for name, server in config.servers.items() if name != BUILTIN}

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        for entry in self._cloud.values():
            if entry.state != "off":
                self._supervisor.launch(entry)
        # Only each server's first attempt is awaited; one that fails is retried in the background.
        await asyncio.gather(*(e.first_attempt.wait() for e in self._cloud.values() if e.task))

    async def close(self) -> None:
        self._supervisor.closed = True
        tasks = [e.task for e in self._cloud.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        conns = [e.conn for e in self._cloud.values() if e.conn is not None]
        await asyncio.gather(*(c.close() for c in conns))
        for entry in self._cloud.values():
            entry.conn = None
            if entry.state != "off":
                self._supervisor.set_state(entry, "down", "the catalogue is closed")

    def servers(self) -> list[str]:
        """The mcp.yaml servers (the names `switch` takes), in their order."""
        return list(self._cloud)

    async def switch(self, name: str, enabled: bool) -> ServerStatus:
        """The owner's switch on an mcp.yaml server (KeyError for another name): off, its tools
        leave `specs()` at once and its process ends; on, it starts again ("starting" until
        connected). Before `start()`, a server switched off is simply not started."""
        async with self._switching:
            await self._supervisor.switch(self._cloud[name], enabled, self._started)
        return next(s for s in self.status() if s.name == name)

    def add_provider(self, provider: ToolProvider) -> None:
        self._providers.append(provider)
        self._notify()

    def remove_provider(self, provider: ToolProvider) -> None:
        self._providers = [p for p in self._providers if p is not provider]
        self._notify()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Wait until `predicate()` holds, re-checked whenever a server changes state (or a
        provider is added or removed); raises TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while not predicate():
                await self._changed.wait()

    # -- what the model sees -----------------------------------------------------------------

    def specs(self) -> dict[str, ToolSpec]:
        return {name: route.spec for name, route in self._view().items() if route.visible}

    def keywords(self) -> dict[str, list[str]]:
        """Routing keywords of every server with tools available now."""
        live = {route.server for route in self._view().values() if route.visible}
        return {name: list(self._cloud[name].config.keywords) if name in self._cloud else []
                for name in live}

    def server_of(self, tool_name: str) -> str:
        """The server an exposed tool name belongs to (KeyError for an unknown name)."""
        return self._view()[tool_name].server

    def status(self) -> list[ServerStatus]:
        counts: dict[str, int] = {}
        for route in self._view().values():
            if route.visible:
                counts[route.server] = counts.get(route.server, 0) + 1
        out: list[ServerStatus] = []
        for entry in self._cloud.values():
            if self._online_provider(entry.name) is not None:
                out.append(ServerStatus(name=entry.name, state="on", tools=counts.get(entry.name, 0),
                                        side="device", restarts=entry.restarts))
            elif entry.state == "on" and not entry.usable():
                # Lost a moment ago; the supervisor has not caught up yet, but specs() already has.
                reason = (entry.conn.error if entry.conn else None) or "the connection closed"
                out.append(ServerStatus(name=entry.name, state="down", reason=reason, side="cloud",
                                        restarts=entry.restarts))
            else:
                out.append(ServerStatus(name=entry.name, state=entry.state, reason=entry.reason,
                                        tools=counts.get(entry.name, 0), side="cloud",
                                        restarts=entry.restarts))
        for name in self._provider_only_servers():
            provider = self._online_provider(name)
            if provider is not None:
                out.append(ServerStatus(name=name, state="on", tools=counts.get(name, 0), side="device"))
            else:
                away = ", ".join(p.name for p in self._providers if name in p.servers())
                out.append(ServerStatus(name=name, state="down", reason=f"offline: {away}", side="device"))
        for status in out:
            entry = self._cloud.get(status.name)
            status.enabled = not (entry and entry.switched_off)
            status.last_ok, status.last_error = self._last_ok.get(status.name), self._last_error.get(status.name)
        return out

    async def call(self, tool_name: str, arguments: dict[str, Any], timeout: float = 60.0) -> ToolOutput:
        """Run a tool by its exposed name. Every failure is a ToolError with a message the model
        can act on: unknown tool, server unavailable, the tool's own error, or a timeout. Its
        server's status keeps when a call last succeeded and what the last one's error was."""
        route = self._view().get(tool_name)
        if route is None:
            raise ToolError(f"there is no tool named {tool_name!r}")
        try:
            out = await self._run(route, tool_name, arguments, timeout)
        except ToolError as exc:
            self._last_error[route.server] = _short(str(exc), MAX_LAST_ERROR_CHARS)
            raise
        self._last_ok[route.server] = self._clock()
        self._last_error.pop(route.server, None)
        return out

    async def _run(self, route: _Route, tool_name: str, arguments: dict[str, Any], timeout: float) -> ToolOutput:
        if not route.visible:
            if route.provider is None and self._cloud[route.server].switched_off:
                raise ToolError(f"{tool_name} is off: the owner switched its server ({route.server}) off. "
                                "Carry on without it, or tell the owner it is needed.")
            raise _unavailable(tool_name)
        if route.provider is not None:
            return await self._call_provider(route, tool_name, arguments, timeout)
        entry = self._cloud[route.server]
        conn = entry.conn
        if conn is None or not entry.usable():
            raise _unavailable(tool_name)
        try:
            outcome = await conn.call(route.tool, arguments, timeout)
        except McpTimeout:
            raise ToolError(f"{tool_name} did not answer within {timeout:g} s") from None
        except McpUnavailable:
            # The supervisor sees the same loss through wait_lost() and restarts the server.
            raise _unavailable(tool_name) from None
        except McpCallError as exc:
            raise ToolError(_short(str(exc))) from None
        if outcome.is_error:
            raise ToolError(_short(outcome.text or f"{tool_name} reported an error"))
        # Artefacts in our files table: only a trusted server's word about file ids is taken, or
        # that of one of ours that saves what it reads (`reports_files`: mail attachments).
        files = file_ids(outcome.structured) if entry.config.trusted or entry.config.reports_files else []
        return ToolOutput(text=outcome.text, files=files, sources=named_sources(outcome.structured))

    def toolbox(self, names: set[str] | None = None, *, extra: ToolBox | None = None,
                timeout: float = 60.0) -> CatalogueToolBox:
        """A live ToolBox view: the catalogue's tools (plus `extra`, e.g. the built-ins),
        restricted to `names` when given."""
        return CatalogueToolBox(self, names, extra, timeout)

    # -- internals ---------------------------------------------------------------------------

    def _notify(self) -> None:
        # A fresh Event per change: every waiter wakes once and re-checks its predicate.
        self.stamp.bump()
        self._changed.set()
        self._changed = asyncio.Event()

    def _online_provider(self, server: str) -> ToolProvider | None:
        for provider in self._providers:
            if provider.online and server in provider.servers():
                return provider
        return None

    def _provider_only_servers(self) -> list[str]:
        names: list[str] = []
        for provider in self._providers:
            for server in provider.servers():
                if server not in self._cloud and server not in names:
                    names.append(server)
        return names

    def _effective(self) -> list[tuple[str, list[ToolSpec], bool, ToolProvider | None]]:
        """Per server, in naming order: the tool list in force, whether it runs now, and who
        runs it (a provider, or None for the mcp.yaml connection)."""
        out: list[tuple[str, list[ToolSpec], bool, ToolProvider | None]] = []
        for name in [*self._cloud, *self._provider_only_servers()]:
            provider = self._online_provider(name)
            entry = self._cloud.get(name)
            if provider is not None:
                excluded = set(entry.config.exclude) if entry else set()
                tools = [s for s in provider.servers()[name] if s.name not in excluded]
                out.append((name, tools, True, provider))
            elif entry is not None:
                out.append((name, entry.tools, entry.usable(), None))
            else:
                # Only offline providers offer it: reserve its names, show none of its tools.
                offline = next(p for p in self._providers if name in p.servers())
                out.append((name, offline.servers()[name], False, offline))
        return out

    def _view(self) -> dict[str, _Route]:
        taken: set[str] = set(self._reserved)
        routes: dict[str, _Route] = {}
        for server, tools, visible, provider in self._effective():
            for spec in tools:
                exposed = spec.name if spec.name not in taken else f"{server}{PREFIX_SEPARATOR}{spec.name}"
                if exposed in taken:
                    logger.debug("mcp %s: tool %s shadowed twice, left out", server, spec.name)
                    continue
                taken.add(exposed)
                # The same fields whichever side runs it: the model must not learn where.
                shown = spec.model_copy(update={"name": exposed, "source": server})
                routes[exposed] = _Route(server, spec.name, shown, visible, provider)
        return routes

    async def _call_provider(self, route: _Route, tool_name: str, arguments: dict[str, Any],
                             timeout: float) -> ToolOutput:
        assert route.provider is not None
        try:
            async with asyncio.timeout(timeout):
                return await route.provider.call(route.server, route.tool, arguments)
        except TimeoutError:
            raise ToolError(f"{tool_name} did not answer within {timeout:g} s") from None
        except (ConnectionError, OSError):
            logger.warning("mcp %s: provider %s failed a call", route.server, route.provider.name)
            raise _unavailable(tool_name) from None


class CatalogueToolBox(ToolBox):
    """The catalogue as the loop's ToolBox: specs and handlers are recomputed on every read, so a
    server that goes down or comes back is reflected mid-session; `execute` is ToolBox's own, so
    results are capped and redacted exactly as for the built-ins."""

    def __init__(self, catalogue: Catalogue, names: set[str] | None, extra: ToolBox | None,
                 timeout: float) -> None:
        # No ToolBox.__init__: it would assign the two registries this view computes.
        self._catalogue = catalogue
        self._names = names
        self._extra = extra
        self._timeout = timeout

    @property
    def specs(self) -> dict[str, ToolSpec]:  # type: ignore[override]
        merged = dict(self._extra.specs) if self._extra else {}
        for name, spec in self._catalogue.specs().items():
            merged.setdefault(name, spec)
        return self._only_named(merged)

    @property
    def handlers(self) -> dict[str, Handler]:  # type: ignore[override]
        merged: dict[str, Handler] = dict(self._extra.handlers) if self._extra else {}
        # Hidden tools keep a handler, so a call to one that just went down says "unavailable"
        # rather than "no such tool".
        for name in self._catalogue._view():
            merged.setdefault(name, self._handler(name))
        return self._only_named(merged)

    def add(self, spec: ToolSpec, handler: Handler) -> None:
        raise TypeError("this view is computed from the catalogue; add tools to the `extra` ToolBox")

    def _handler(self, name: str) -> Handler:
        async def run(arguments: dict[str, Any]) -> ToolOutput:
            return await self._catalogue.call(name, arguments, self._timeout)
        return run

    def _only_named(self, items: dict[str, _T]) -> dict[str, _T]:
        return items if self._names is None else {k: v for k, v in items.items() if k in self._names}
