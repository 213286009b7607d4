"""Calling an actor that may be restarting.

A stateful actor here declares `max_restarts`: killed (or its node lost), Ray starts it again
in place, same name and handle, and it rebuilds from the store. Meanwhile a call fails at once
with `ActorUnavailableError` ("the actor is restarting"), and a call that was in flight at the
death fails the same way. `through_restart` makes the call again, with short growing pauses,
until the actor is back or `wait` seconds have passed; an actor that is gone for good
(`ActorDiedError`: an idle exit, a `ray.kill`) is not waited for.

Only for calls that may safely run twice (reads, registrations, idempotent writes): an
action that may already have run must not be made again.

`reopen_session` finds a conversation's actor again for a caller that holds its handle beyond
one request (a camera stream's hand-offs): the same one once restarted, or, when it exited
while idle, the one the session registry gives that conversation now.

`begin_stream` is for a streaming call whose first item comes before it does anything (a
session's turn names itself first): if the actor turns out gone before that item, the call
never ran there and goes once more to a fresh handle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from ray.exceptions import ActorUnavailableError, RayActorError

from actors.common.names import SESSIONS, find_actor_async

T = TypeVar("T")
H = TypeVar("H")
RESTART_WAIT = 60.0


async def through_restart(call: Callable[[], Awaitable[T]], wait: float = RESTART_WAIT) -> T:
    deadline = time.monotonic() + wait
    pause = 0.05
    while True:
        try:
            return await call()
        except ActorUnavailableError:
            if time.monotonic() + pause > deadline:
                raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


async def begin_stream(handle: H, start: Callable[[H], Any],
                       refind: Callable[[], Awaitable[H]]) -> tuple[H, Any, Any]:
    """`start(handle)` (a streaming call) and its first item, awaited. If the actor had gone
    (`RayActorError`: it exited while idle, or died and is restarting) the call is made once
    more on `await refind()`; a second failure is raised. Returns (handle, stream, first)."""
    for attempt in range(2):
        stream = start(handle)
        try:
            return handle, stream, await (await stream.__anext__())
        except RayActorError:
            if attempt:
                raise
            handle = await refind()
    raise AssertionError("unreachable")


async def then(first: Any, stream: Any) -> AsyncIterator[Any]:
    """`first` (read already by `begin_stream`; None for none), then the rest of `stream`."""
    if first is not None:
        yield first
    async for ref in stream:
        yield await ref


async def reopen_session(session_id: str, handle: Any) -> Any:
    """The conversation's actor, opened (rebuilt from the store), after a call to `handle`
    failed: `handle` itself once it has restarted in place, or, when it is gone for good, the
    actor the session registry ("sessions") holds or adopts for `session_id` now. Raises
    RayActorError when neither can be had."""
    try:
        await through_restart(lambda: handle.open.remote())
        return handle
    except RayActorError as exc:
        registry = await find_actor_async(SESSIONS)
        if registry is None:
            raise
        gone = exc
    # The registry drops its entry for the dead actor only when told, then adopts a fresh one.
    await registry.forget.remote(session_id, handle._actor_id.hex())
    fresh = await registry.acquire.remote(session_id)
    try:
        await through_restart(lambda: fresh.open.remote())
    except RayActorError:
        raise gone from None
    return fresh
