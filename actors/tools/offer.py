"""The tools one turn is offered: the built-ins, the routed servers of the catalogue, and
`more_tools` to add a server mid-turn. Calls to catalogue tools go to the ToolHub actor."""

from __future__ import annotations

from typing import Any

from actors.tools.routing import MAX_TOOLS, MORE_TOOLS_NAME, ServerEntry, more_tools, more_tools_spec, route
from actors.common.text import last_user_messages
from actors.common.toolspec import ToolError, ToolOutput, ToolSpec
from actors.tools.spec import ToolBox


def servers_from(specs: dict[str, ToolSpec], keywords: dict[str, list[str]]) -> list[ServerEntry]:
    grouped: dict[str, list[ToolSpec]] = {}
    for spec in specs.values():
        grouped.setdefault(spec.source, []).append(spec)
    return [ServerEntry(name=name, keywords=keywords.get(name, []), tools=tools)
            for name, tools in sorted(grouped.items())]


class TurnTools:
    """Builds the per-turn ToolBox; `call` runs one catalogue tool (the hub in production)."""

    def __init__(self, builtin: ToolBox, call: Any) -> None:
        self.builtin = builtin
        self.call = call

    def _hub_handler(self, name: str, scope: dict[str, Any] | None = None):
        async def run(arguments: dict[str, Any]) -> ToolOutput:
            # The scope (whose turn, asked from which device) matters only to device tools.
            result = await (self.call(name, arguments, scope) if scope else self.call(name, arguments))
            if "error" in result:
                raise ToolError(result["error"])
            return ToolOutput(text=result["text"], files=result.get("files") or [],
                              sources=result.get("sources") or [])
        return run

    def build(self, messages: list[dict[str, Any]], specs: dict[str, ToolSpec],
              keywords: dict[str, list[str]], scope: dict[str, Any] | None = None) -> ToolBox:
        box = ToolBox()
        for name, spec in self.builtin.specs.items():
            box.add(spec, self.builtin.handlers[name])
        if not specs:
            return box
        servers = servers_from(specs, keywords)
        message, previous = last_user_messages(messages)
        result = route(servers, message, previous, max_tools=max(1, MAX_TOOLS - len(box.specs)))
        offered_servers = set(result.servers)
        for name in result.tools:
            if name == MORE_TOOLS_NAME:
                box.add(more_tools_spec([s.name for s in servers]),
                        self._more_tools(box, servers, offered_servers, scope))
            elif name in specs:
                box.add(specs[name], self._hub_handler(name, scope))
        return box

    def _more_tools(self, box: ToolBox, servers: list[ServerEntry], offered: set[str],
                    scope: dict[str, Any] | None = None):
        async def run(arguments: dict[str, Any]) -> str:
            need = str(arguments.get("need") or "").strip()
            if not need:
                raise ToolError("say what you need, or name a server")
            name = more_tools(servers, need, offered)
            if name is None:
                return "No other tool server matches that need."
            server = next(s for s in servers if s.name == name)
            for spec in server.tools:
                box.add(spec, self._hub_handler(spec.name, scope))
            offered.add(name)
            return f"Added the {name} tools: {', '.join(t.name for t in server.tools)}. Call them directly now."
        return run
