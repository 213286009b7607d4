"""Work started beside the caller and kept until it ends: the one way the house spawns a
background task.

asyncio keeps only a weak reference to a running task, so a task nobody holds may be collected
before it finishes; each owner keeps its tasks in a set (which also lets it wait for them, or
count them as work in progress), and a task leaves the set when it ends. `fresh_context` starts
the task in an empty context: Ray carries a caller's cancellation in the context, and work the
caller started (learning after a reply, a camera's answer) must outlive that call.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def spawn(work: Coroutine[Any, Any, T], keep: set[asyncio.Task[Any]],
          fresh_context: bool = False) -> asyncio.Task[T]:
    """Run `work` on the running loop, held in `keep` until it ends."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(work, context=contextvars.Context()) if fresh_context else loop.create_task(work)
    keep.add(task)
    task.add_done_callback(keep.discard)
    return task
