"""The one helper for background work: held until it ends, and in a fresh context when asked."""

from __future__ import annotations

import asyncio
import contextvars

from actors.common.background import spawn

caller = contextvars.ContextVar("caller", default="nobody")


async def test_a_task_is_held_until_it_ends_and_then_let_go() -> None:
    keep: set[asyncio.Task[object]] = set()
    release = asyncio.Event()

    async def work() -> str:
        await release.wait()
        return "done"

    task = spawn(work(), keep)
    assert keep == {task}
    release.set()
    assert await task == "done"
    await asyncio.sleep(0)   # the done callback runs on the next loop pass
    assert keep == set()


async def test_a_fresh_context_does_not_carry_the_callers() -> None:
    keep: set[asyncio.Task[object]] = set()

    async def seen() -> str:
        return caller.get()

    caller.set("the call that started it")
    assert await spawn(seen(), keep) == "the call that started it"
    assert await spawn(seen(), keep, fresh_context=True) == "nobody"


async def test_a_failed_task_is_let_go_too() -> None:
    keep: set[asyncio.Task[object]] = set()

    async def fails() -> None:
        raise ValueError("boom")

    task = spawn(fails(), keep)
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert keep == set() and isinstance(task.exception(), ValueError)
