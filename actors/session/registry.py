"""The SessionRegistry: a few SessionActors started before anyone needs them, and the map
from conversation ids to the live one.

Each conversation is still its own Ray actor (one process, exiting when idle), but starting a
worker process and importing the session package costs about two seconds here, so a new
conversation would wait for it. Instead the `SessionRegistry` ("sessions", detached, restarts
forever) keeps `spares` actors warm (process started, modules imported, a store connection made,
then the rest of actors/session/warm.py) and gives one to the first request for a conversation
id (`adopt`); a fresh spare is started behind it (while another is still on offer, once that
conversation's first turn has ended, so that the two do not share the cores). The registry only
remembers which actor holds which conversation: the actors are named `session-slot:<n>`, so a
restarted registry rebuilds that map by asking each of them, and one that exited (idle, or
killed) is dropped the next time somebody reports it dead or the sweep runs.

Live conversations, spares and starts together stay under a cap (`max_live`, by default from the
machine's memory): at the cap, a new conversation that needs a process first lets the least
recently used idle conversation go (`release`), or is refused or waits while everything is busy
(actors/session/admission.py).

Callers reach it through actors/session/pool.py, which looks it up once per process.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, TYPE_CHECKING

import ray
from ray.exceptions import RayActorError

from actors.common.names import NAMESPACE, actor_name, live_actors_async
from actors.common.placement import preferred_nodes, strategy
from actors.session.actor import SessionActor, SessionConfig
from actors.session.admission import Admission, claim_stream, configured_cap, make_room
from actors.session.release import let_go, survey
from actors.session.slots import forget_adoption
from actors.session.start_queue import StartClock

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.serve.handle import DeploymentHandle

log = logging.getLogger(__name__)

SLOT = "session-slot"
SWEEP_SECONDS = 30.0
ADOPT_TIMEOUT = 120.0
# Camera streams and connected devices hold places under the cap too (`claim`); a claimed place
# whose actor has not appeared this long after the claim (its replica died) is freed by the sweep.
STREAM_KINDS = ("camera", "device")
STREAM_GRACE_SECONDS = 120.0
# After an adoption that leaves a spare on offer, the next spare starts once the adopted
# conversation's first turn has ended (at most `SessionConfig.refill_wait` after), and
# REFILL_SETTLE_SECONDS more: starting a worker process takes a core for about two seconds, and
# that first turn (and on a voice socket, the speech of its first sentence, made as the turn
# ends) runs on the same two cores. A pool that runs dry starts its next spare at once.
REFILL_SETTLE_SECONDS = 0.5


def _actor_id(handle: ActorHandle) -> str:
    return handle._actor_id.hex()


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class SessionRegistry:
    def __init__(self, config: SessionConfig, agent: DeploymentHandle) -> None:
        self.config = config
        self.agent = agent
        self.live: dict[str, Any] = {}
        self.spare: list[Any] = []
        self._adopting: dict[str, asyncio.Task[Any]] = {}
        self._starting = 0
        self._queued = 0             # new conversations waiting for a cold start
        self._start_slots: asyncio.Semaphore | None = None
        self._clock = StartClock()    # how long one process start takes, lately
        self._refill: asyncio.Task[None] | None = None
        self._after: Any = None      # an adopted actor whose first turn the next spare waits for
        self._waiting: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._ready: asyncio.Task[None] | None = None
        # The cap on processes (live, spare, starting) and when each conversation was last used.
        self.book = Admission(configured_cap(config.max_live))
        self._claimed: dict[str, float] = {}   # stream key -> when its place was claimed

    # -- start-up and rebuild ---------------------------------------------------------------

    async def _ensure_ready(self) -> None:
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_task(self._rebuild())
        await asyncio.shield(self._ready)

    async def _rebuild(self) -> None:
        """After a (re)start: every slot actor still alive says what it holds."""
        try:
            slots = await live_actors_async(SLOT)
        except Exception:  # noqa: BLE001 - start empty rather than never
            log.exception("could not list the session actors; the registry starts empty")
            slots = {}
        for handle in slots.values():
            try:
                held = await asyncio.wait_for(handle.adopt.remote(""), ADOPT_TIMEOUT)
            except (RayActorError, asyncio.TimeoutError):
                continue
            if held:
                self._hold(held, handle)
            else:
                self.spare.append(handle)
        # Camera streams and devices still open hold their places again (a restarted registry).
        for key in await self._open_streams():
            self.book.streams[key] = ""
            self._claimed[key] = time.monotonic()
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        self._top_up()

    # -- the pool ---------------------------------------------------------------------------

    def _new_slot(self) -> Any:
        # Restarted in place (max_restarts), a slot takes back its conversation from Ray's
        # key-value store (`remember_adoption`); one gone for good is replaced on next use.
        options: dict[str, Any] = {"name": actor_name(SLOT, uuid.uuid4().hex[:12]), "namespace": NAMESPACE,
                                   "lifetime": "detached"}
        # Soft: a restart after that node died lands on any node that is alive.
        options |= strategy(preferred_nodes(self.config.prefer_resource))
        return SessionActor.options(**options).remote("", self.config, self.agent)

    async def _warm_slot(self) -> Any:
        """A started spare: process up, package imported, a store round trip made."""
        handle = await asyncio.to_thread(self._new_slot)
        try:
            await asyncio.wait_for(handle.open.remote(False), ADOPT_TIMEOUT)
        except RayActorError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed warm-up read only costs speed
            log.warning("spare session warm-up failed: %s", exc)
        return handle

    async def _warm_process(self, handle: ActorHandle) -> None:
        """The rest of the warm-up (actors/session/warm.py), once the spare is on offer: the
        first of them waits for the sentence encoder to load, and a conversation that comes
        meanwhile should not wait for that. Process-wide only, so adopting during it is safe."""
        try:
            spent = await asyncio.wait_for(handle.warm.remote(), ADOPT_TIMEOUT)
            log.debug("spare session warmed (ms): %s", spent)
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs speed
            log.warning("spare session warm-up failed: %s", exc)

    def _top_up(self, after: Any = None) -> None:
        """Start spares up to `spares`; the next one waits for `after`'s (an adopted actor's)
        first turn while a spare is still on offer, and waits no more once none is."""
        if after is not None:
            self._after = after
        elif not self.spare and self._waiting is not None:
            self._waiting.cancel()   # the pool ran dry: start the next spare now
        if self._refill is None or self._refill.done():
            self._refill = asyncio.get_running_loop().create_task(self._fill())

    async def _first_turn(self, after: Any) -> None:
        try:
            wait = self.config.refill_wait
            if await asyncio.wait_for(after.first_turn.remote(wait), wait + 5):
                await asyncio.sleep(REFILL_SETTLE_SECONDS)
        except Exception:  # noqa: BLE001 - it died or is slow: start the spare anyway
            pass

    def _others(self) -> int:
        """Processes the admission book does not list: the spares, and those starting."""
        return len(self.spare) + self._starting

    async def _fill(self) -> None:
        # Never past the cap, nor into a place a new conversation is waiting for.
        while (len(self.spare) + self._starting < self.config.spares
               and self.book.fits(1 + self.book.waiting, self._others())):
            after, self._after = self._after, None
            if after is not None and self.spare:
                self._waiting = asyncio.get_running_loop().create_task(self._first_turn(after))
                try:
                    await asyncio.wait([self._waiting])   # a cancelled wait ends it early
                finally:
                    self._waiting.cancel()
                    self._waiting = None
                continue
            self._starting += 1
            try:
                async with self._starts():
                    began = time.monotonic()
                    handle = await self._warm_slot()
                    self._clock.record(time.monotonic() - began)
                self.spare.append(handle)
            except Exception as exc:  # noqa: BLE001 - try again on the next adoption
                log.warning("could not start a spare session actor: %s", exc)
                return
            finally:
                self._starting -= 1
            # One spare warming at a time: the next one starts after it.
            await self._warm_process(handle)

    async def _from_spares(self, session_id: str) -> Any | None:
        while self.spare:
            handle = self.spare.pop(0)
            # The next spare waits for this one's first turn from now, not from the adoption's
            # answer: a spare whose warm-up ended meanwhile would start the next one at once.
            self._after = handle
            try:
                if await handle.adopt.remote(session_id) == session_id:
                    return handle
            except RayActorError:
                pass  # a spare that died while waiting
            if self._after is handle:
                self._after = None
        return None

    async def _cold_start(self, session_id: str, bound: float | None) -> Any:
        """No spare on offer (a burst): a process started for this conversation, at most
        `cold_starts` at once with the spares' own starts, in the order the conversations came.
        All at once, N starts share the cores and every one of them waits for the slowest; in
        turn, the first ones are answered while the rest still wait. A spare that came up
        meanwhile is taken instead. Raises SessionsBusy, before queueing, when the wait would
        be over `bound` seconds (actors/session/start_queue.py). At the cap on processes, makes
        room first, or raises SessionsFull / waits while everything is busy (admission.py)."""
        refused = self._clock.refusal(self._queued, self.config.cold_starts, bound)
        if refused is not None:
            raise refused
        await make_room(self.book, self._others, self._survey, self._release, bound)
        self._queued += 1
        try:
            async with self._starts():
                handle = await self._from_spares(session_id)
                if handle is None:
                    began = time.monotonic()
                    handle = await asyncio.to_thread(self._new_slot)
                    if await handle.adopt.remote(session_id) != session_id:
                        raise RuntimeError("a new session actor refused its conversation")
                    self._clock.record(time.monotonic() - began)
                self._hold(session_id, handle)   # its place passes from `entering` to live
                return handle
        finally:
            self._queued -= 1
            self.book.settle(freed=session_id not in self.live)

    def _starts(self) -> asyncio.Semaphore:
        if self._start_slots is None:
            self._start_slots = asyncio.Semaphore(max(1, self.config.cold_starts))
        return self._start_slots

    async def _adopt(self, session_id: str, bound: float | None) -> Any:
        handle = await self._from_spares(session_id) or await self._cold_start(session_id, bound)
        self._hold(session_id, handle)
        self._top_up(handle if self.spare else None)
        return handle

    # -- the cap: live conversations and letting idle ones go ---------------------------------

    def _hold(self, session_id: str, handle: ActorHandle) -> None:
        self.live[session_id] = handle
        self.book.touch(session_id)

    def _gone(self, session_id: str, handle: ActorHandle, for_good: bool = True) -> None:
        """`handle` no longer holds `session_id` (exited, released, dead): its place is free. One
        gone `for_good` loses its adoption record off the loop, unawaited: the place stays theirs."""
        if self.live.get(session_id) is handle:
            del self.live[session_id]
            self.book.drop(session_id)
        if for_good:
            asyncio.get_running_loop().run_in_executor(None, forget_adoption, _actor_id(handle))

    async def _survey(self) -> dict[str, float | None]:
        """Each live conversation's idle seconds (None: busy); one gone for good is dropped."""
        held = dict(self.live)
        found, gone = await survey(held)
        for session_id in gone:
            if session_id not in self._adopting:
                self._gone(session_id, held[session_id])
        return found

    async def _release(self, session_id: str) -> bool:
        """Let an idle conversation go (release.py); True once its process is gone."""
        handle = self.live.get(session_id)
        if handle is None or not await let_go(handle):
            return False
        self._gone(session_id, handle)
        log.info("session %s let go to make room (cap %d)", session_id, self.book.cap)
        return True

    # -- what callers use -------------------------------------------------------------------

    async def acquire(self, session_id: str, bound: float | None = None) -> Any:
        """The actor holding `session_id`, adopting a spare for it on first use. With no spare,
        a caller with a person waiting gives a `bound` on the seconds it may queue for a process
        start, and gets SessionsBusy past it; without one it waits its turn however long."""
        await self._ensure_ready()
        releasing = self.book.releasing.get(session_id)
        if releasing is not None:
            await asyncio.shield(releasing)   # being let go: kept, or adopted afresh below
        handle = self.live.get(session_id)
        if handle is not None:
            self.book.touch(session_id)
            return handle
        task = self._adopting.get(session_id)
        if task is None:
            task = self._adopting[session_id] = asyncio.get_running_loop().create_task(self._adopt(session_id, bound))
            task.add_done_callback(lambda _t: self._adopting.pop(session_id, None))
        return await asyncio.shield(task)

    async def claim(self, key: str, holder: str, bound: float | None = None) -> None:
        """A place under the cap for a camera stream or device connection ("camera:<id>",
        "device:<id>") while its socket is open; raises SessionsFull past `bound` s."""
        await self._ensure_ready()
        await claim_stream(self.book, key, holder, self._others, self._survey, self._release, bound)
        self._claimed[key] = time.monotonic()

    async def unclaim(self, key: str, holder: str) -> None:
        await self._ensure_ready()
        self.book.end_stream(key, holder)
        if key not in self.book.streams:
            self._claimed.pop(key, None)

    async def _open_streams(self) -> set[str]:
        """The camera and device actors alive now, as stream keys."""
        found: set[str] = set()
        for kind in STREAM_KINDS:
            try:
                found |= {f"{kind}:{thing}" for thing in await live_actors_async(kind)}
            except Exception:  # noqa: BLE001 - counted again on the next sweep
                log.exception("could not list the %s actors", kind)
        return found

    async def get(self, session_id: str) -> Any | None:
        """The live actor for `session_id`, or None (never starts one)."""
        await self._ensure_ready()
        return self.live.get(session_id)

    async def forget(self, session_id: str, actor_id: str) -> None:
        """A caller saw that actor fail: if it is gone for good, the next acquire adopts a fresh one."""
        await self._ensure_ready()
        handle = self.live.get(session_id)
        if handle is None or _actor_id(handle) != actor_id:
            return
        try:
            # One restarting in place (max_restarts) answers once it is back: keep it, or the
            # conversation would get a second actor.
            if await asyncio.wait_for(handle.adopt.remote(""), ADOPT_TIMEOUT) == session_id:
                return
        except (RayActorError, asyncio.TimeoutError):
            pass
        self._gone(session_id, handle, for_good=False)

    async def sessions(self) -> dict[str, Any]:
        await self._ensure_ready()
        return dict(self.live)

    async def counts(self) -> dict[str, int]:
        await self._ensure_ready()
        return {"live": len(self.live), "spare": len(self.spare), "starting": self._starting,
                "queued": self._queued}

    async def state(self) -> dict[str, Any]:
        """`counts`, what the start queue expects now, and the cap on processes (GET /v1/pool)."""
        at_once = self.config.cold_starts
        return {**await self.counts(), "cold_starts": at_once, "start_seconds": round(self._clock.seconds, 2),
                "start_wait_seconds": self.config.start_wait,
                "wait_seconds_now": round(self._clock.wait(self._queued, at_once), 2),
                "max_live": self.book.cap, "released": self.book.released, "waiting_for_room": self.book.waiting,
                "releasing": len(self.book.releasing), "streams": len(self.book.streams)}

    async def close(self) -> int:
        """End the spares (the CLI, at shutdown); live conversations exit on their own."""
        spares, self.spare = self.spare, []
        for handle in spares:
            ray.kill(handle, no_restart=True)
        return len(spares)

    async def _sweep(self) -> None:
        """Drop conversations whose actor exited (idle exit tells nobody)."""
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                alive = {_actor_id(h) for h in (await live_actors_async(SLOT)).values()}
                for sid, handle in list(self.live.items()):
                    if _actor_id(handle) not in alive and sid not in self._adopting:
                        self._gone(sid, handle)
                self.spare = [h for h in self.spare if _actor_id(h) in alive]
                # A place whose socket's replica died without giving it back: its actor is gone.
                if self.book.streams:
                    open_now, now = await self._open_streams(), time.monotonic()
                    for key in list(self.book.streams):
                        if key not in open_now and now - self._claimed.get(key, 0.0) > STREAM_GRACE_SECONDS:
                            self._claimed.pop(key, None)
                            self.book.end_stream(key)
                self._top_up()
            except Exception:  # noqa: BLE001 - the sweep runs again
                log.exception("session registry sweep failed")
