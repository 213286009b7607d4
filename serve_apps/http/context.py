"""What a route may use of the Gateway replica serving it: a small typed context the Gateway
makes in its constructor (store, key hashes, config, the agent and perception handles, and the
live conversation actors), so routes never reach into the deployment's private state.

No `from __future__ import annotations`: FastAPI inspects the dependency types built on this.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from ray.exceptions import RayActorError
from starlette.requests import HTTPConnection

from actors.camera.actor import CameraConfig
from actors.devices.tokens import DEVICE_TOKEN_PREFIX
from actors.session.actor import SessionConfig, live_sessions_async
from actors.store.store import Store
from actors.memory.embed_actor import remote_encoder
from serve_apps.http.auth import key_matches, presented_key
from serve_apps.http.errors import ApiError

log = logging.getLogger(__name__)

# (session_id, create, health_check) -> the live SessionActor handle
OpenSession = Callable[[str, bool, bool], Awaitable[Any]]
# (handle, session_id, events, reader_is_person) -> the turn as server-sent events
StreamTurn = Callable[[Any, str, Any, bool], StreamingResponse]


class GatewayConfig(BaseModel):
    owner_key_hashes: list[str]
    database_url: str
    web_dir: str
    session: SessionConfig
    camera: CameraConfig
    max_upload_bytes: int = 50 * 1024 * 1024
    # Host header values accepted at /mcp (DNS-rebinding guard).
    hosts: list[str] = Field(default_factory=lambda: ["127.0.0.1:8000", "localhost:8000"])


class GatewayContext:
    """One per Gateway replica, on `app.state.gateway`; reached through `deps.GatewayDep`."""

    def __init__(self, *, store: Store, hashes: frozenset[str], config: GatewayConfig, agent: Any,
                 perception: Any, open_session: OpenSession, stream_turn: StreamTurn) -> None:
        self.store = store
        self.hashes = hashes
        self.config = config
        self.agent = agent
        self.perception = perception
        self.web_dir = Path(config.web_dir)
        self._open_session = open_session
        self._stream_turn = stream_turn
        self._encoder: Any = None

    async def encoder(self) -> Any:
        """The cluster's shared sentence encoder, looked up once per replica (the actor
        restarts behind the same handle); raises what the lookup raises."""
        if self._encoder is None:
            self._encoder = await remote_encoder()
        return self._encoder

    def owner_key(self, key: str | None) -> bool:
        """Whether `key` is one of the owner keys."""
        return key_matches(key, self.hashes)

    def owner(self, connection: HTTPConnection) -> None:
        """Raises ApiError: 403 `forbidden` for a device token, 401 `unauthorized` otherwise,
        unless the owner key (header, ?token= or cookie) was presented."""
        key = presented_key(connection)
        if key and key.startswith(DEVICE_TOKEN_PREFIX) and not self.owner_key(key):
            # A device token talks to the agent only through /v1/ask*; nothing signed-in.
            raise ApiError(403, "forbidden", "A device token cannot use this route.")
        if not self.owner_key(key):
            raise ApiError(401, "unauthorized", "Send the owner key as 'Authorization: Bearer <key>'.")

    async def session(self, session_id: str, create: bool = False, health_check: bool = False) -> Any:
        """The live actor for a conversation, started (and rebuilt from the store) on demand.
        Raises ApiError 404 `session_not_found` (unknown) or 422 (not a health check)."""
        return await self._open_session(session_id, create, health_check)

    def stream(self, handle: Any, session_id: str, events: Any, reader_is_person: bool = True) -> StreamingResponse:
        """A running turn's events as SSE, shaped for who is reading."""
        return self._stream_turn(handle, session_id, events, reader_is_person)

    async def flush_live_sessions(self) -> None:
        """Write every live session's buffer at once, so an export sees what was said a moment ago."""
        actors = list((await live_sessions_async()).values())
        results = await asyncio.gather(*(actor.flush.remote() for actor in actors), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, RayActorError):
                raise result

    async def live_session_holding(self, message_id: str) -> str | None:
        """A message not flushed yet lives only in its session actor: ask the live ones."""
        for session_id, actor in (await live_sessions_async()).items():
            try:
                if await actor.has_message.remote(message_id):
                    return session_id
            except RayActorError:
                continue
        return None

