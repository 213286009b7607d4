"""A task runner in a process of its own, for the claim tests (`python -m tests.task_worker`).

    drain URL RUNNER GO   wait for the file GO, then claim and finish due rows until none is
                          left, printing each id it finished
    hold URL RUNNER       claim one due row, beat once, print its id, then hang (to be killed)
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from actors.scheduler import tasks
from actors.store.store import Store

WORK_SECONDS = 0.01


async def drain(url: str, runner: str, go: Path) -> None:
    store = Store.open(url)
    while not go.exists():
        await asyncio.sleep(0.01)
    try:
        while True:
            task = await tasks.claim_due(store, runner, time.time())
            if task is None:
                return
            await asyncio.sleep(WORK_SECONDS)
            if await tasks.finish(store, task.id, runner, time.time(), status="done", result=runner):
                print(task.id, flush=True)
    finally:
        await store.close()


async def hold(url: str, runner: str) -> None:
    store = Store.open(url)
    task = await tasks.claim_due(store, runner, time.time())
    await tasks.beat(store, runner, time.time())
    print(task.id if task else "none", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    mode, url, runner = sys.argv[1:4]
    asyncio.run(drain(url, runner, Path(sys.argv[4])) if mode == "drain" else hold(url, runner))
