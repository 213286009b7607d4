"""Which conversation a pooled SessionActor ("session-slot:<n>") holds, kept where a restart
finds it, and the live conversations' handles for callers outside the pool.

A spare that adopts a conversation records it in Ray's own key-value store under its actor id,
so a restart in place (same id, `max_restarts`) comes back as that conversation; the pool's
sweep, or a release, forgets the record of an actor gone for good.

Private Ray API, kept on purpose: `ray.experimental.internal_kv` (`_internal_kv_put/get/del`).
Ray offers no public key-value store, and this one is the only record a restarted actor can read
in its constructor without a call to another actor (the registry may be restarting too).
"""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import RayActorError
from ray.experimental import internal_kv

from actors.common.names import NAMESPACE, SESSIONS, find_actor, find_actor_async


def _adoption_key(actor_id: str) -> bytes:
    return f"session-slot:{actor_id}".encode()


def remember_adoption(session_id: str) -> None:
    """Record in Ray's own key-value store which conversation this actor adopted, so a restart
    in place (same actor id) comes back as that conversation."""
    actor_id = ray.get_runtime_context().get_actor_id()
    if actor_id:
        internal_kv._internal_kv_put(_adoption_key(actor_id), session_id.encode(), overwrite=True,
                                     namespace=NAMESPACE)


def adopted_session() -> str:
    """The conversation this actor had adopted before a restart ("" for a new actor)."""
    context = ray.get_runtime_context()
    actor_id = context.get_actor_id()
    if not actor_id or not context.was_current_actor_reconstructed:
        return ""
    value = internal_kv._internal_kv_get(_adoption_key(actor_id), namespace=NAMESPACE)
    return value.decode() if value else ""


def forget_adoption(actor_id: str) -> None:
    """Drop the record of an actor that is gone for good (the pool's sweep)."""
    internal_kv._internal_kv_del(_adoption_key(actor_id), namespace=NAMESPACE)


def live_sessions() -> dict[str, Any]:
    """Handles of the session actors alive now, by session id (blocking: for the CLI)."""
    registry = find_actor(SESSIONS)
    if registry is None:
        return {}
    try:
        return ray.get(registry.sessions.remote(), timeout=30)
    except RayActorError:
        return {}


async def live_sessions_async() -> dict[str, Any]:
    """The same, from async code (the registry is looked up off the event loop)."""
    registry = await find_actor_async(SESSIONS)
    if registry is None:
        return {}
    try:
        return await registry.sessions.remote()
    except RayActorError:
        return {}
