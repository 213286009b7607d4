"""DeviceActor "device:{id}": one per connected device, alive while it is connected.

The WebSocket ends at a gateway replica, which relays frames: the device's frames come in as
method calls (`result`, `event`, `hello`), and what the device must receive (calls, events from
the person's other devices, a close) waits in this connection's queue for the replica's
`take` long-poll. A second connection replaces the first, whose queue gets a 4000 close and
whose calls fail. The tools whose skill is on join the tool catalogue (the ToolHub) while the
device is connected.

Killed (or its node lost), the actor restarts in place (`max_restarts`): the replica whose
socket it served registers that connection again with the hello it holds, which rebuilds the
state (catalogue, event bus) from the store and the hello. Calls in flight at the death fail;
a call that arrives before the socket is registered again waits for it (REJOIN_WAIT). A
restarted actor that nobody registers with within RESTART_GRACE exits.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from typing import Any

import ray
from ray.exceptions import RayActorError

from actors.common.errors import ErrorInfo
from actors.common.names import NAMESPACE, TOOL_HUB, actor_name, find_actor_async, live_actors, live_actors_async
from actors.devices import repository as repo
from actors.devices.bus import event_bus
from actors.devices.calls import CallReply, CallTable, refuse_call
from actors.devices.frames import CallFrame, Close, EventFrame, Hello, PushedEvent, ResultFrame, Welcome
from actors.devices.grants import catalogue_info, offered_servers, skill_split
from actors.devices.protocol import CLOSE_REPLACED, EventRate, ProtocolError, sanitize_event, welcome
from actors.devices.settings import DeviceLimits
from actors.logmask import install_log_masking
from actors.recent_errors import report
from actors.store.store import Store

log = logging.getLogger(__name__)
ASSISTANT = "Iriis"
QUEUE_FRAMES = 64
# A device that reconnects at once keeps its actor; one that does not lets it go.
EXIT_GRACE = 5.0
# A restarted actor whose socket is gone too (its replica died with it) does not linger.
RESTART_GRACE = 30.0
# A call that reaches a restarted actor before its socket is registered again waits this long
# for it (the catalogue still offers the device's tools meanwhile).
REJOIN_WAIT = 10.0


Outbound = CallFrame | PushedEvent | Close
NO_SUCH_CALL = "no call is waiting with that id (it may have timed out)"


class _Conn:
    def __init__(self, conn_id: str) -> None:
        self.id = conn_id
        self.queue: asyncio.Queue[Outbound] = asyncio.Queue(QUEUE_FRAMES)
        self.closed = asyncio.Event()


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class DeviceActor:
    def __init__(self, device_id: int, database_url: str, limits: dict[str, Any]) -> None:
        install_log_masking()
        self.device_id = device_id
        self.store = Store.open(database_url)
        self.limits = DeviceLimits(**limits)
        self.conn: _Conn | None = None
        self.conns: dict[str, _Conn] = {}
        self.calls = CallTable(self.limits.calls_in_flight)
        self.rate = EventRate(self.limits.event_seconds)
        self.hello: Hello | None = None
        self.device: repo.Device | None = None
        self._exit: asyncio.Task[None] | None = None
        # Set by the first connection after a restart (see `call`).
        self._rejoined: asyncio.Event | None = None
        if ray.get_runtime_context().was_current_actor_reconstructed:
            self._rejoined = asyncio.Event()
            # No event loop runs yet in __init__: a timer thread checks that somebody came back.
            timer = threading.Timer(RESTART_GRACE, self._exit_if_orphaned)
            timer.daemon = True
            timer.start()

    def _exit_if_orphaned(self) -> None:
        if self.conn is None and not self.conns:
            log.info("device %s: restarted, but no connection came back; exiting", self.device_id)
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def pid(self) -> int:
        """This actor's process id (fault tests kill it)."""
        return os.getpid()

    # -- the connection -----------------------------------------------------------------------

    async def connect(self, conn_id: str, hello: Hello, device: dict[str, Any]) -> Welcome:
        """Take over as the device's connection; returns the welcome frame. The hello was
        validated where the socket ends (against the limits and the paired kind)."""
        if self._exit:
            self._exit.cancel()
            self._exit = None
        if self.conn is not None:
            self._end(self.conn, CLOSE_REPLACED, "replaced by a newer connection of this device")
        self.conn = _Conn(conn_id)
        self.conns[conn_id] = self.conn
        self.device = repo.Device(**device)
        welcome_frame = await self._apply_hello(hello)
        if self._rejoined is not None:
            self._rejoined.set()
        return welcome_frame

    async def rehello(self, conn_id: str, hello: Hello) -> Welcome | None:
        if self.conn is None or self.conn.id != conn_id:
            return None
        return await self._apply_hello(hello)

    async def _apply_hello(self, hello: Hello) -> Welcome:
        assert self.device is not None
        self.hello = hello
        await repo.seen(self.store, self.device_id, hello.skills())
        fresh = await repo.get_device(self.store, self.device_id)
        if fresh is not None:
            self.device = fresh
        await self._publish()
        me = ray.get_runtime_context().current_actor
        await event_bus().online.remote(self.device.person_id, self.device_id, me)
        on, _off = skill_split(hello, self.device.skills)
        return welcome(self.device_id, hello.label or self.device.label, on, ASSISTANT, self.limits)

    async def take(self, conn_id: str, timeout: float) -> list[Outbound]:
        """Frames for the device, waiting up to `timeout` for the first. A `Close` item tells
        the replica to close the socket with that code."""
        conn = self.conns.get(conn_id)
        if conn is None:
            return [Close(code=CLOSE_REPLACED, reason="this connection was replaced")]
        frames: list[Outbound] = []
        try:
            frames.append(await asyncio.wait_for(conn.queue.get(), timeout))
        except asyncio.TimeoutError:
            return []
        while not conn.queue.empty():
            frames.append(conn.queue.get_nowait())
        if any(isinstance(f, Close) for f in frames):
            self.conns.pop(conn_id, None)
            conn.closed.set()
        return frames

    async def disconnect(self, conn_id: str) -> None:
        """The replica's socket ended (any reason)."""
        conn = self.conns.pop(conn_id, None)
        if conn is not None:
            conn.closed.set()
        if self.conn is not None and self.conn.id == conn_id:
            self.conn = None
            self.calls.fail_all("the device disconnected")
            await self._offline()
            self._exit = asyncio.get_running_loop().create_task(self._exit_later(), context=contextvars.Context())

    async def close(self, code: int, reason: str) -> None:
        """Close the live connection (revoked: 4403, server stopping: 1001) and wait briefly for
        the replica to pick the close up."""
        conn = self.conn
        if conn is None:
            return
        self._end(conn, code, reason)
        self.conn = None
        await self._offline()
        try:
            await asyncio.wait_for(conn.closed.wait(), 5)
        except asyncio.TimeoutError:
            log.warning("device %s: the close (%s) was not picked up", self.device_id, code)
        self._exit = asyncio.get_running_loop().create_task(self._exit_later(), context=contextvars.Context())

    def _end(self, conn: _Conn, code: int, reason: str) -> None:
        self.calls.fail_all(reason)
        self._put(conn, Close(code=code, reason=reason))

    def _put(self, conn: _Conn, frame: Outbound) -> bool:
        try:
            conn.queue.put_nowait(frame)
            return True
        except asyncio.QueueFull:
            return False

    async def _exit_later(self) -> None:
        await asyncio.sleep(EXIT_GRACE)
        if self.conn is None:
            await self.store.close()
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    # -- frames from the device ---------------------------------------------------------------

    def result(self, conn_id: str, frame: ResultFrame) -> ErrorInfo | None:
        """A call's answer; an ErrorInfo (sent to the device as an error frame) when no call waits."""
        if not self.calls.resolve(frame.id, frame):
            return ErrorInfo(code="no_such_call", message=NO_SUCH_CALL)
        return None

    async def event(self, conn_id: str, frame: EventFrame) -> ErrorInfo | None:
        """An event from the device, kept and handed out; an ErrorInfo when it is refused."""
        try:
            event = sanitize_event(frame, self.limits)
        except ProtocolError as exc:
            return ErrorInfo(code="bad_event", message=str(exc))
        refused = self.rate.refusal(asyncio.get_running_loop().time())
        if refused is not None:
            return refused
        assert self.device is not None
        stored = await repo.add_event(self.store, self.device.person_id, self.device_id, event.model_dump(),
                                      self.limits)
        await event_bus().publish.remote(self.device.person_id, stored)
        return None

    def push(self, frame: PushedEvent) -> bool:
        """An event from another of the person's devices."""
        return self.conn is not None and self._put(self.conn, frame)

    # -- calls from the agent -------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], here: bool) -> CallReply:
        if self.conn is None and self._rejoined is not None and not self._rejoined.is_set():
            # Restarted after a death: the replica is registering the same socket again.
            try:
                await asyncio.wait_for(self._rejoined.wait(), REJOIN_WAIT)
            except asyncio.TimeoutError:
                pass
        conn = self.conn
        refused = refuse_call(self.hello, conn is not None, tool)
        if refused is not None:
            return refused
        assert conn is not None
        opened = self.calls.open()
        if opened is None:
            return self.calls.busy()
        call_id, future = opened
        if not self._put(conn, CallFrame(id=call_id, tool=tool, args=arguments, here=here)):
            self.calls.drop(call_id)
            return self.calls.busy()
        return await self.calls.wait(call_id, future, self.limits.call_seconds)

    def state(self) -> dict[str, Any]:
        return {"online": self.conn is not None, "in_flight": len(self.calls),
                "tools": [t.name for t in self.hello.tools] if self.hello else [],
                "skills": self.hello.skills() if self.hello else []}

    async def regrant(self) -> None:
        """The grant changed: offer the tools of the skills on now."""
        fresh = await repo.get_device(self.store, self.device_id)
        if fresh is not None:
            self.device = fresh
        if self.conn is not None:
            await self._publish()

    # -- the catalogue --------------------------------------------------------------------------

    async def _publish(self) -> None:
        hub = await _hub()
        if hub is None or self.hello is None or self.device is None:
            return
        servers = offered_servers(self.device_id, self.hello, self.device.skills)
        info = catalogue_info(self.device_id, self.device.person_id, self.device.kind, self.device.label,
                              self.hello, self.device.skills)
        me = ray.get_runtime_context().current_actor
        try:
            await hub.device_online.remote(info, {k: [s.model_dump() for s in v] for k, v in servers.items()}, me)
        except RayActorError as exc:
            report("device.publish", exc, request={"device": self.device_id})

    async def _offline(self) -> None:
        if self.device is not None:
            try:
                await event_bus().offline.remote(self.device.person_id, self.device_id)
            except RayActorError:
                pass
        hub = await _hub()
        if hub is not None:
            try:
                await hub.device_offline.remote(self.device_id)
            except RayActorError:
                pass


async def _hub() -> Any:
    return await find_actor_async(TOOL_HUB)


def device_actor(device_id: int, database_url: str, limits: DeviceLimits,
                 placement: dict[str, Any] | None = None) -> Any:
    """The device's actor, made on first use; `placement` (actors.common.placement) says which
    node it prefers when it is made."""
    return DeviceActor.options(name=f"device:{device_id}", namespace=NAMESPACE, get_if_exists=True,
                               lifetime="detached", **(placement or {})).remote(
        device_id, database_url, limits.model_dump())


async def live_device(device_id: int) -> Any | None:
    """The actor of a connected device, or None."""
    return await find_actor_async(actor_name("device", device_id))


def live_devices() -> dict[int, Any]:
    """Connected devices' actors by id (blocking: for the CLI, outside any event loop)."""
    return {int(k): v for k, v in live_actors("device").items()}


async def live_devices_async() -> dict[int, Any]:
    """Connected devices' actors by id, without blocking the event loop."""
    return {int(k): v for k, v in (await live_actors_async("device")).items()}
