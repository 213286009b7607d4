"""Where the actors that follow a person's activity (conversations, devices, camera streams)
prefer to run: on the nodes that offer a custom Ray resource (`IRIIS_SESSION_PREFER_RESOURCE`,
say the CPU workers of cluster.yaml), any node when none of them is alive.

The preference is soft (`NodeAffinitySchedulingStrategy(soft=True)`), so an actor restarted
after its node died comes back on a node that is alive. These actors ask for no CPU, and Ray
places an actor that asks for no resource at all on a random node whatever its soft affinity
says (as if it had none: benchmarks/MEASURED.md); so a preferred actor also asks for one byte
of the `memory` resource, which every node has, and then lands where it is told. Which nodes offer the resource is a
GCS read, kept for a few seconds."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

NODES_TTL = 10.0
# Bytes of Ray's `memory` resource a placed actor asks for: anything above zero makes the
# request non-empty, which is what makes Ray honour the soft node affinity.
PLACED_MEMORY = 1
_known: dict[str, tuple[float, list[str]]] = {}


def preferred_nodes(resource: str) -> list[str]:
    """Ids of the live nodes offering `resource` (blocking GCS read; none without a resource)."""
    if not resource:
        return []
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(resource, 0) > 0]


def strategy(nodes: list[str]) -> dict[str, Any]:
    """Actor options placing it softly on one of `nodes` (nothing when there are none)."""
    if not nodes:
        return {}
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(random.choice(nodes), soft=True),
            "memory": PLACED_MEMORY}


async def preferred(resource: str) -> dict[str, Any]:
    """`strategy` for the nodes offering `resource`, read off the event loop and kept NODES_TTL."""
    if not resource:
        return {}
    seen = _known.get(resource)
    if seen is None or time.monotonic() - seen[0] > NODES_TTL:
        seen = _known[resource] = (time.monotonic(), await asyncio.to_thread(preferred_nodes, resource))
    return strategy(seen[1])
