"""Calling an actor that may be restarting.

A stateful actor here declares `max_restarts`: killed (or its node lost), Ray starts it again
in place, same name and handle, and it rebuilds from the store. Meanwhile a call fails at once
with `ActorUnavailableError` ("the actor is restarting"), and a call that was in flight at the
death fails the same way. `through_restart` makes the call again, with short growing pauses,
until the actor is back or `wait` seconds have passed; an actor that is gone for good
(`ActorDiedError`: an idle exit, a `ray.kill`) is not waited for.

Only for calls that may safely run twice (reads, registrations, idempotent writes): an
action that may already have run must not be made again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ray.exceptions import ActorUnavailableError

T = TypeVar("T")
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
