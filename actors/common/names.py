"""Where the house's named actors live, and how to find them without blocking an event loop.

Every named actor is in one Ray namespace. Per-thing actors are named `<kind>:<id>`
(`session:abc`, `device:3`, `camera:xyz`, `relay:uid`); singletons have a plain name.
Ray's name lookups are blocking GCS calls, so the async helpers run them in a worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray

NAMESPACE = "iriis"
ERROR_LOG = "errors"
TOOL_HUB = "tools"
EMBEDDER = "embedder"
SCHEDULER = "scheduler"
LOCAL_MODEL = "local-model"
# The session registry (actors/session/registry.py): conversation id -> its SessionActor.
SESSIONS = "sessions"
SPEECH = "speech"


def actor_name(kind: str, thing_id: object) -> str:
    return f"{kind}:{thing_id}"


def find_actor(name: str) -> Any | None:
    """The named actor's handle, or None when it is not running (blocking)."""
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


def live_actors(kind: str) -> dict[str, Any]:
    """Handles of the running `<kind>:<id>` actors, by id, in the order Ray lists them
    (blocking). One that exits between the listing and the lookup is left out."""
    prefix = f"{kind}:"
    found: dict[str, Any] = {}
    for info in ray.util.list_named_actors(all_namespaces=True):
        name = info.get("name", "")
        if info.get("namespace") == NAMESPACE and name.startswith(prefix):
            handle = find_actor(name)
            if handle is not None:
                found[name[len(prefix):]] = handle
    return found


async def find_actor_async(name: str) -> Any | None:
    return await asyncio.to_thread(find_actor, name)


async def live_actors_async(kind: str) -> dict[str, Any]:
    return await asyncio.to_thread(live_actors, kind)
