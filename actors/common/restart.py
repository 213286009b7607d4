"""Calling an actor that may be restarting.

A stateful actor here declares `max_restarts`: killed (or its node lost), Ray starts it again
in place, same name and handle, and it rebuilds from the store. Meanwhile a call fails at once
with `ActorUnavailableError` ("the actor is restarting"), and a call that was in flight at the
death fails the same way. `through_restart` makes the call again, with short growing pauses,
until the actor is back or `wait` seconds have passed; an actor that is gone for good
(`ActorDiedError`: an idle exit, a `ray.kill`) is not waited for.

Only for calls that may safely run twice (reads, registrations, idempotent writes): an
action that may already have run must not be made again.

`open_conversation` is the one way every caller (the gateway, the scheduler, a camera stream's
hand-offs through `reopen_session`) opens a conversation's actor: the handle it holds, the same
one once restarted in place, or, when that one is gone for good (it exited while idle), the one
the session registry gives that conversation now. The caller says how to reach the registry,
so this module needs no import of the session package.

`begin_stream` is for a streaming call whose first item comes before it does anything (a
session's turn names itself first): if the actor turns out gone before that item, the call
never ran there and goes once more to a fresh handle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TYPE_CHECKING, TypeVar

from ray.exceptions import ActorUnavailableError, RayActorError

from actors.common.names import SESSIONS, find_actor_async

if TYPE_CHECKING:
    from ray.actor import ActorHandle

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


async def first_then_rest(first: Any, stream: Any) -> AsyncIterator[Any]:
    """`first` (read already by `begin_stream`; None for none), then the rest of `stream`."""
    if first is not None:
        yield first
    async for ref in stream:
        yield await ref


async def open_conversation(session_id: str, handle: ActorHandle | None, open_call: Callable[[Any], Awaitable[T]],
                            registry: Callable[[], Awaitable[Any | None]],
                            start_wait: float | None = None) -> tuple[Any, T]:
    """The actor holding `session_id` and what `open_call(actor)` answered (`open` loads the
    conversation from the store). `handle` is the one the caller holds, if any, else the
    registry's. One restarting in place is waited for; one gone for good is reported to the
    registry (which keeps an entry until told, or until its sweep) and the actor it gives now
    is opened instead, once. Raises RayActorError when neither answers. `start_wait` bounds
    the seconds a conversation with no live actor may queue for a process in a burst (the
    registry raises SessionsBusy past it); None waits however long."""
    if handle is None:
        found = await registry()
        if found is None:
            raise RuntimeError(f"no session registry to give conversation {session_id!r} an actor")
        handle = await found.acquire.remote(session_id, start_wait)
    try:
        return handle, await through_restart(lambda: open_call(handle))
    except RayActorError as exc:
        gone = exc
    found = await registry()
    if found is None:
        raise gone
    await found.forget.remote(session_id, handle._actor_id.hex())
    fresh = await found.acquire.remote(session_id, start_wait)
    try:
        return fresh, await through_restart(lambda: open_call(fresh))
    except RayActorError:
        raise gone from None


async def reopen_session(session_id: str, handle: ActorHandle) -> Any:
    """The conversation's actor, opened, after a call to `handle` failed (a camera stream's
    hand-offs): the registry is found by name, never started from here."""
    fresh, _ = await open_conversation(session_id, handle, lambda actor: actor.open.remote(),
                                       lambda: find_actor_async(SESSIONS))
    return fresh
