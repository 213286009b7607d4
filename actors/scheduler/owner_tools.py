"""Owner only, by construction: the tools the autonomy loop and its work sessions can reach.

An allow-list, not a deny-list: a work session sees only the research (web), reading (files,
read_file), document (studio) and draft (save_note) tools named here, so a server added to
mcp.yaml later (or a device's tools, or the relay) is unreachable until someone adds it here
on purpose. Calls are checked again when they run, so a model naming a tool it was not offered
gets a refusal, not the tool.

The loop's own actions reach the owner only: the outbox (a notification to the owner), a
background row, and the call hook (calls ring the owner's devices).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from actors.common.toolspec import ToolError, ToolOutput, ToolSpec
from actors.tools.spec import ToolBox

# Server -> the tools of it a work session may use. "builtin" is actors/tools/builtin.py.
WORK_TOOLS: Mapping[str, frozenset[str]] = {
    "web": frozenset({"fetch_url", "link_preview", "web_search"}),
    "files": frozenset({"inspect_file", "list_files"}),
    "studio": frozenset({"make_chart", "make_pdf", "make_word", "make_slides", "make_spreadsheet"}),
    "builtin": frozenset({"read_file", "save_note"}),
}
PREFIX_SEPARATOR = "__"

# What the loop does without tools, each addressed to the owner and no one else.
LOOP_ACTIONS: Mapping[str, str] = {
    "owner_notification": "a notification in the owner's outbox (message, emergency)",
    "owner_call": "the call hook: rings the owner's own devices",
    "background_row": "a task row the runner executes with the work tools below",
}

# Words in a tool's name that mean it can reach someone: the test's tripwire, not the filter.
CONTACT_WORDS = frozenset({
    "send", "email", "mail", "post", "put", "publish", "message", "sms", "text", "call", "dial",
    "ring", "notify", "relay", "invite", "join", "host", "share", "tweet", "shell", "reply",
    "forward", "webhook", "submit", "upload", "chat", "contact", "announce", "broadcast",
})


def own_name(spec: ToolSpec) -> str:
    """The tool's name on its server (the catalogue may expose it as `<server>__<tool>`)."""
    prefix = f"{spec.source}{PREFIX_SEPARATOR}"
    return spec.name[len(prefix):] if spec.name.startswith(prefix) else spec.name


def is_work_tool(spec: ToolSpec) -> bool:
    return own_name(spec) in WORK_TOOLS.get(spec.source, frozenset())


def could_contact_others(spec: ToolSpec) -> bool:
    """True when the tool's server or name says it can address someone (relay post, email,
    device send, shell...)."""
    words = set(re.split(r"[^a-z]+", f"{spec.source} {own_name(spec)}".lower()))
    return bool(words & CONTACT_WORDS)


def owner_only(specs: Mapping[str, ToolSpec]) -> dict[str, ToolSpec]:
    """The listed tools a work session may see."""
    return {name: spec for name, spec in specs.items() if is_work_tool(spec)}


HubCall = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class OwnerOnlyTools:
    """The tool provider the autonomy loop hands to its work sessions: the built-ins and the
    catalogue's listing (without a person, so no device tools), filtered to WORK_TOOLS."""

    def __init__(self, builtin: ToolBox, call: HubCall) -> None:
        self.builtin = builtin
        self.call = call

    def toolbox(self, specs: Mapping[str, ToolSpec]) -> ToolBox:
        """A ToolBox of only the work tools among the built-ins and `specs` (the hub's listing)."""
        box = ToolBox()
        for name, spec in self.builtin.specs.items():
            spec = spec if spec.source else spec.model_copy(update={"source": "builtin"})
            if is_work_tool(spec):
                box.add(spec, self._guard(spec, self.builtin.handlers[name]))
        for name, spec in owner_only(specs).items():
            if name not in box.specs:
                box.add(spec, self._guard(spec, self._hub(name)))
        return box

    def _hub(self, name: str) -> Callable[[dict[str, Any]], Awaitable[ToolOutput]]:
        async def run(arguments: dict[str, Any]) -> ToolOutput:
            result = await self.call(name, arguments)
            if "error" in result:
                raise ToolError(result["error"])
            return ToolOutput(text=result.get("text", ""), files=result.get("files") or [])
        return run

    @staticmethod
    def _guard(spec: ToolSpec, handler: Callable[[dict[str, Any]], Awaitable[Any]]):
        async def run(arguments: dict[str, Any]) -> Any:
            # Checked again at call time: the box is built once, the allow-list is the rule.
            if not is_work_tool(spec):
                raise ToolError(f"{spec.name} is not available to background work")
            return await handler(arguments)
        return run
