"""A connected device as a tool provider in the catalogue, and the per-person view of it.

The catalogue is shared by every turn, so device servers are filtered per turn: a person's
turn sees only their own devices' servers, plus a `my_devices` tool that says which skills
each device has switched off (never those skills' tools).
"""

from __future__ import annotations

import contextvars
from typing import Any, TYPE_CHECKING

from ray.exceptions import RayActorError

from actors.common.restart import through_restart
from actors.devices.calls import CallReply
from actors.devices.grants import device_of_server, skills_note
from actors.common.toolspec import ToolError, ToolOutput, ToolSpec

if TYPE_CHECKING:
    from ray.actor import ActorHandle

# Who the current call is for: {"person": id, "device": id | None} (the device that asked).
CALL_SCOPE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("device_call_scope", default=None)
DEVICES_TOOL = "my_devices"
DEVICES_SERVER = "devices"
# How long a read waits for a restarted DeviceActor (its socket registers again within seconds).
RESTART_WAIT = 20.0
INTERRUPTED = ("the connection to the device restarted during this call, so it may or may not "
               "have run there; check its effect before asking for it again")


class DeviceProvider:
    """What the catalogue's ToolProvider protocol needs, over a DeviceActor handle."""

    def __init__(self, info: dict[str, Any], servers: dict[str, list[ToolSpec]], handle: ActorHandle) -> None:
        self.info = info
        self._servers = servers
        self.handle = handle

    @property
    def name(self) -> str:
        return f"device:{self.info['id']}"

    @property
    def online(self) -> bool:
        return True

    def servers(self) -> dict[str, list[ToolSpec]]:
        return self._servers

    def tier(self, server: str, tool: str) -> int | None:
        return next((s.tier for s in self._servers.get(server, []) if s.name == tool), None)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        scope = CALL_SCOPE.get() or {}
        if scope.get("person") != self.info["person"]:
            # Defence in depth: the listing never offers another person's device tools.
            raise ToolError(f"there is no tool named {tool!r}")
        here = scope.get("device") == self.info["id"]
        async def once() -> CallReply:
            return await self.handle.call.remote(tool, arguments, here)
        try:
            # A read (tier 0) may safely be asked twice: it waits through the actor's restart.
            # An action that may already have reached the device is never sent again.
            reply = await (through_restart(once, RESTART_WAIT) if self.tier(server, tool) == 0 else once())
        except RayActorError:
            raise ToolError(INTERRUPTED) from None
        if not reply.ok:
            raise ToolError(reply.text())
        return ToolOutput(text=reply.text())


def devices_spec(note: str) -> ToolSpec:
    return ToolSpec(name=DEVICES_TOOL, description=(
        "List the person's own devices and which of their skills are on or off. " + note)[:4000],
        parameters={"type": "object", "properties": {}}, tier=0, source=DEVICES_SERVER, untrusted_output=False)


def person_view(specs: dict[str, ToolSpec], keywords: dict[str, list[str]],
                providers: dict[int, DeviceProvider], person: int | None) -> tuple[dict[str, ToolSpec], dict[str, list[str]]]:
    """The catalogue as one person's turn sees it."""
    mine = {d for d, p in providers.items() if p.info["person"] == person}
    out: dict[str, ToolSpec] = {}
    for name, spec in specs.items():
        owner = device_of_server(spec.source)
        if owner is None or owner in mine:
            out[name] = spec
    words = {k: v for k, v in keywords.items() if device_of_server(k) is None}
    for device_id in mine:
        info = providers[device_id].info
        extra = ["device", "computer", "phone", info["kind"], *info["label"].lower().split()]
        for server in providers[device_id].servers():
            skill = server.split("_", 1)[1]
            words[server] = [skill, *skill.split("_"), *extra]
    if mine:
        out[DEVICES_TOOL] = devices_spec(person_note(providers, person))
        words[DEVICES_SERVER] = ["device", "devices", "skill", "skills", "phone", "computer", "laptop"]
    return out, words


def person_note(providers: dict[int, DeviceProvider], person: int | None) -> str:
    return skills_note([{**p.info, "online": True} for p in providers.values() if p.info["person"] == person])
