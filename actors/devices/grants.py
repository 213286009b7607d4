"""Grants: which of a device's tools are offered, and who may switch a skill on or off.

A device's tools join the tool catalogue as one server per skill, named `device{id}_{skill}`,
so two devices offering the same tool never collide with each other or with a configured
server, and the turn pipeline can tell device output by its source.
"""

from __future__ import annotations

import re
from typing import Any

from actors.devices.protocol import DeviceTool, Hello
from actors.common.toolspec import ToolSpec

DEVICE_SERVER = re.compile(r"^device([0-9]+)_([a-z][a-z0-9_]*)$")
ROLES: tuple[str, ...] = ("owner", "admin", "member", "staff")
MANAGERS: frozenset[str] = frozenset({"owner", "admin"})


def server_name(device_id: int, skill: str) -> str:
    return f"device{device_id}_{skill}"


def device_of_server(name: str) -> int | None:
    match = DEVICE_SERVER.match(name)
    return int(match.group(1)) if match else None


def tool_spec(device_id: int, tool: DeviceTool) -> ToolSpec:
    """What the model sees; the tier is the device's word from its hello, never the model's."""
    properties = tool.parameters.get("properties")
    required = tool.parameters.get("required")
    needs_purpose = (isinstance(properties, dict) and "purpose" in properties
                     and isinstance(required, list) and "purpose" in required)
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters,
                    tier=tool.tier, source=server_name(device_id, tool.skill_name),
                    untrusted_output=True, purpose_required=needs_purpose)


def offered_servers(device_id: int, hello: Hello, granted: list[str]) -> dict[str, list[ToolSpec]]:
    """Only the tools whose skill is switched on."""
    out: dict[str, list[ToolSpec]] = {}
    for tool in hello.tools:
        if tool.skill_name in granted:
            out.setdefault(server_name(device_id, tool.skill_name), []).append(tool_spec(device_id, tool))
    return out


def skill_split(hello: Hello, granted: list[str]) -> tuple[list[str], list[str]]:
    """(skills the device offers that are switched on, those that are off), sorted."""
    offered = set(hello.skills())
    return sorted(offered & set(granted)), sorted(offered - set(granted))


def catalogue_info(device_id: int, person_id: int, kind: str, label: str, hello: Hello,
                   granted: list[str]) -> dict[str, Any]:
    """What the tool catalogue keeps about a connected device (its skills on and off, never the
    off skills' tools)."""
    on, off = skill_split(hello, granted)
    return {"id": device_id, "person": person_id, "label": hello.label or label, "kind": kind,
            "on": on, "off": off}


def switch_allowed(actor_person: int, actor_role: str, device_person: int, on: bool) -> str | None:
    """None when allowed, else why not. Switching on also needs the device person's PIN,
    which the caller checks; off needs none."""
    if actor_person == device_person:
        return None
    if on:
        return "only the device's own person can switch a skill on"
    if actor_role in MANAGERS:
        return None
    return "that device is not yours"


def skills_note(devices: list[dict[str, Any]]) -> str:
    """What the agent is told about its person's devices: each one's skills on and off, and
    where a skill that is off is switched on (never the off skills' tools)."""
    if not devices:
        return "No devices are connected."
    lines = []
    for d in devices:
        on = ", ".join(d["on"]) or "none"
        off = ", ".join(d["off"]) or "none"
        state = "connected" if d.get("online") else "not connected"
        lines.append(f"- {d['label'] or d['kind']} (device {d['id']}, {d['kind']}, {state}): "
                     f"skills on: {on}; skills off: {off}")
    return ("The person's devices:\n" + "\n".join(lines) + "\nA skill that is off offers no tools. If "
            "the person asks for something an off skill would do, say that the skill is off on that "
            "device and that they can switch it on in the Devices page (or POST "
            "/v1/me/devices/{id}/skills with their PIN); do not look for it elsewhere.")
