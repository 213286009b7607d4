"""The Ray calls behind admission (actors/session/admission.py has the rule): asking the live
conversations how long each has been idle, and letting an idle one go.

A released actor exits on its own (the idle exit's path, SessionActor.release); the registry
also ends it at once and waits, briefly, until it answers no more, so that the next process
starts only once this one's place is really free.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, TYPE_CHECKING

import ray
from ray.exceptions import ActorDiedError, RayActorError

if TYPE_CHECKING:
    from ray.actor import ActorHandle

# Seconds a live conversation gets to say whether it is idle (no answer: counted busy), and to
# go when asked (it distils a finished work session and flushes first, as an idle exit does).
SURVEY_TIMEOUT = 5.0
RELEASE_TIMEOUT = 30.0
# The longest the registry waits for a released actor to be gone, and how often it looks.
EXIT_WAIT = 5.0
EXIT_LOOK = 0.05


async def survey(held: dict[str, Any]) -> tuple[dict[str, float | None], list[str]]:
    """Each conversation's idle seconds (None: busy, restarting or slow to answer), and the
    conversations whose actor is gone for good."""
    items = list(held.items())
    answers = await asyncio.gather(*(asyncio.wait_for(h.activity.remote(), SURVEY_TIMEOUT) for _, h in items),
                                   return_exceptions=True)
    found: dict[str, float | None] = {}
    gone: list[str] = []
    for (session_id, _), answer in zip(items, answers, strict=True):
        if isinstance(answer, ActorDiedError):
            gone.append(session_id)
        else:
            found[session_id] = None if isinstance(answer, BaseException) else answer
    return found, gone


async def let_go(handle: ActorHandle) -> bool:
    """Ask an idle conversation's actor to exit (it refuses while busy); True once it is gone."""
    try:
        gone = bool(await asyncio.wait_for(handle.release.remote(), RELEASE_TIMEOUT))
    except ActorDiedError:
        return True             # it had exited already
    except (RayActorError, asyncio.TimeoutError):
        return False
    if gone:
        ray.kill(handle, no_restart=True)   # now, rather than after the actor's own delay
        await until_gone(handle)
    return gone


async def until_gone(handle: ActorHandle) -> None:
    """ray.kill returns before the process has gone; a call fails once it has (or EXIT_WAIT)."""
    deadline = time.monotonic() + EXIT_WAIT
    while time.monotonic() < deadline:
        try:
            await asyncio.wait_for(handle.pid.remote(), EXIT_WAIT)
        except (RayActorError, asyncio.TimeoutError):
            return
        await asyncio.sleep(EXIT_LOOK)
