"""The session pool, as each process reaches it: the cluster's one SessionRegistry
(actors/session/registry.py: warm spare SessionActors, and which actor holds which
conversation) looked up once per process without blocking the event loop.

Callers use `session_handle`, `find_session`, and `registry` for
`actors.common.restart.open_conversation` (the one path that opens a conversation's actor and
replaces one gone for good); the CLI starts and closes the pool (`start_pool`, `close_pool`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TYPE_CHECKING

import ray

from actors.common.names import NAMESPACE, SESSIONS, find_actor
from actors.session.actor import SessionConfig
from actors.session.registry import SLOT, SessionRegistry

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.serve.handle import DeploymentHandle

__all__ = ["SLOT", "SessionRegistry", "close_pool", "find_session", "registry", "session_handle", "start_pool"]

log = logging.getLogger(__name__)

# -- per-process access ---------------------------------------------------------------------

_registry: ActorHandle | None = None


def _registry_blocking(config: SessionConfig, agent: DeploymentHandle) -> Any:
    return SessionRegistry.options(name=SESSIONS, namespace=NAMESPACE, get_if_exists=True,
                                   lifetime="detached").remote(config, agent)


async def registry(config: SessionConfig, agent: DeploymentHandle) -> Any:
    """The cluster's session registry (started by whoever asks first), looked up once."""
    global _registry
    if _registry is None:
        _registry = await asyncio.to_thread(_registry_blocking, config, agent)
    return _registry


async def session_handle(session_id: str, config: SessionConfig, agent: DeploymentHandle) -> Any:
    """The SessionActor for a conversation, warm: call its `open` next (it loads or creates)."""
    return await (await registry(config, agent)).acquire.remote(session_id)


async def find_session(session_id: str) -> Any | None:
    """The live actor for a conversation, or None when nobody holds it (never starts one)."""
    found = _registry if _registry is not None else await asyncio.to_thread(find_actor, SESSIONS)
    if found is None:
        return None
    return await found.get.remote(session_id)


def start_pool(config: SessionConfig, agent: DeploymentHandle, timeout: float = 120.0) -> dict[str, int]:
    """Start the registry and its spares now (blocking: the CLI, once Serve is up), so even the
    first conversation finds a warm actor."""
    global _registry
    _registry = _registry_blocking(config, agent)
    return ray.get(_registry.counts.remote(), timeout=timeout)


def close_pool() -> int:
    """End the spare actors and the registry (blocking: for the CLI at shutdown)."""
    found = find_actor(SESSIONS)
    if found is None:
        return 0
    try:
        closed = ray.get(found.close.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - shutdown boundary
        log.exception("the session pool did not close cleanly")
        closed = 0
    ray.kill(found, no_restart=True)
    return closed
