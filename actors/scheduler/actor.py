"""Scheduler "scheduler": the one detached actor that runs what is due (spec sections 8-10).

A thin shell: its state is rebuilt from the store in `__init__` (it restarts forever), and each
job it runs is a Ray-free loop with its own tests: the task runner (`actors.scheduler.runner`),
the outbox drainer, the call watcher and Telegram (`actors.notify`, via notify_loop, calls_loop
and telegram_loop). Further loops (autonomy, nightly consolidation) join through
`loops()`, one coroutine factory each; `status()` (GET /v1/scheduler) shows every loop's view.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TYPE_CHECKING

import ray
from pydantic import BaseModel

from actors.common.names import NAMESPACE, SCHEDULER, TOOL_HUB, find_actor_async
from actors.logmask import install_log_masking
from actors.notify.config import notify_config
from actors.notify.notifier import Notifier
from actors.notify.telegram import TelegramChannel
from actors.recent_errors import report
from actors.scheduler.autonomy import autonomy_loop, serve_forever
from actors.scheduler.autonomy.accounts import AccountsGlance, glance_from_tools
from actors.scheduler.calls_loop import CallsLoop
from actors.scheduler.notify_loop import NotifyLoop, desktop_announcer
from actors.scheduler.runner import TaskRunner
from actors.scheduler.tasks import new_runner_id, owner_timezone
from actors.scheduler.telegram_loop import TelegramLoop, TelegramTurns
from actors.scheduler.turns import SessionTurns
from actors.session.actor import SessionConfig
from actors.settings import load_settings
from actors.store.store import Store

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger(__name__)


async def hub_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call through the tool hub ({"text"} or {"error"}), for the autonomy loop's glance
    at the owner's accounts; a hub that is not there is an error like any other."""
    hub = await find_actor_async(TOOL_HUB)
    if hub is None:
        return {"error": "the tool hub is not running"}
    return await hub.call.remote(name, arguments, 30.0)


async def glance_at_accounts() -> AccountsGlance:
    return await glance_from_tools(hub_call)


class SchedulerConfig(BaseModel):
    database_url: str
    # The same session settings the gateway's conversations use.
    session: SessionConfig


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class Scheduler:
    def __init__(self, config: SchedulerConfig, agent: DeploymentHandle) -> None:
        install_log_masking()
        self.config = config
        self.agent = agent
        self.store = Store.open(config.database_url)
        # A restart is a new incarnation of the same home: rows the old one held are recovered
        # on the first poll.
        home = f"scheduler:{ray.get_runtime_context().get_actor_id()}"
        self.runner = TaskRunner(self.store, SessionTurns(config.session, agent), new_runner_id(home),
                                 tz=owner_timezone(), on_error=lambda where, exc: report(where, exc))
        self._jobs: dict[str, asyncio.Task[None]] = {}
        # Queued behind this constructor, so a restarted scheduler starts its loops by itself.
        ray.get_runtime_context().current_actor.start.remote()
        # The autonomy loop (spec section 9) and the nightly consolidation at the start of rest
        # hours; its model calls go through the agent's learning router.
        settings = load_settings()
        self.autonomy = autonomy_loop(self.store, lambda messages, purpose: agent.complete.remote(messages, purpose),
                                      zone=settings.iriis_timezone, rest_hours=settings.iriis_rest_hours,
                                      tokens_per_day=settings.iriis_autonomy_tokens_per_day,
                                      accounts=glance_at_accounts)
        # Notifications and calls (spec section 11): the outbox drainer, the call watcher and
        # Telegram as a channel, all over one notifier (actors/notify).
        notify = notify_config(settings)
        self.notifier = Notifier(self.store, notify, announce=desktop_announcer(self.store))
        self.notify = NotifyLoop(self.store, self.notifier, notify.notify_interval, time.time)
        self.calls = CallsLoop(self.store, self.notifier, notify.calls_interval, time.time)
        telegram = TelegramTurns(config.session, agent)
        self.telegram = TelegramLoop(TelegramChannel(self.store, notify, telegram.reply)
                                     if notify.telegram_on else None)

    def loops(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """Every loop this actor keeps running, by name."""
        return {"tasks": self.runner.serve_forever, "autonomy": lambda: serve_forever(self.autonomy),
                "notify": self.notify.serve_forever, "calls": self.calls.serve_forever,
                "telegram": self.telegram.serve_forever}

    async def start(self) -> dict[str, Any]:
        """Start the loops that are not running (idempotent; every call makes sure)."""
        loop = asyncio.get_running_loop()
        for name, run in self.loops().items():
            job = self._jobs.get(name)
            if job is None or job.done():
                if job is not None and not job.cancelled() and job.exception() is not None:
                    report(f"scheduler.{name}", job.exception())
                self._jobs[name] = loop.create_task(run(), name=f"scheduler.{name}")
        return {name: not job.done() for name, job in self._jobs.items()}

    async def wake(self) -> None:
        """Poll for due tasks now (a task was just created)."""
        await self.start()
        self.runner.wake()

    async def wake_calls(self) -> None:
        """Look at the calls now (one was just made, due now perhaps)."""
        await self.start()
        self.calls.wake()

    async def wake_notify(self) -> None:
        await self.start()
        self.notify.wake()

    async def telegram_update(self, update: dict[str, Any]) -> bool:
        """An update from the webhook route; False when Telegram is not configured here."""
        await self.start()
        return self.telegram.take(update)

    async def status(self) -> dict[str, Any]:
        loops = await self.start()
        return {"loops": loops, "pid": os.getpid(), "tasks": await self.runner.status(),
                "notify": {"last_pass": self.notify.last}, "calls": {"last": self.calls.last},
                "telegram": self.telegram.state}

    async def stop(self) -> None:
        for job in self._jobs.values():
            job.cancel()
        await self.runner.stop()


def scheduler(config: SchedulerConfig | None = None, agent: DeploymentHandle | None = None) -> Any:
    """The scheduler by name; created with this configuration if it does not exist yet."""
    return Scheduler.options(name=SCHEDULER, namespace=NAMESPACE, get_if_exists=True,
                             lifetime="detached").remote(config, agent)
