"""How many conversation processes may be alive at once, and which idle one makes room.

Every conversation is its own SessionActor process (its size: benchmarks/MEASURED.md) that
lives on for `idle_seconds` after its last use, so a burst of new conversations once held half
the machine's memory. The registry (actors/session/registry.py) now keeps the live ones,
its warm spares and the processes still starting under a cap: by default a fixed share of the
machine's memory divided by a per-conversation budget (`default_cap`), or `max_live`.

At the cap, a new conversation that needs a process of its own makes room first: the least
recently used idle conversations are asked to `release` (they exit as an idle one does, their
writes flushed; each is rebuilt from the store on its next use). A busy one (a turn running,
a confirmation pending, learning or a summary under way) is never let go. When everything
alive is busy, a newcomer with a person waiting is told at once when to come back
(`SessionsFull`, a `SessionsBusy`: 503 with Retry-After at the gateway); one without waits
until a conversation exits or becomes idle.

Camera streams and connected devices are processes too (a CameraActor, a DeviceActor): each
holds a place under the same cap while its socket is open (`claim_stream`), and is never let
go for room; a socket that finds no room is closed with 1013 and told when to come back.

Pure logic, no Ray import: `Admission` is the book, `make_room` the step the registry takes
before each process start, with the Ray calls handed in.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterable

from actors.session.start_queue import SessionsBusy

# The memory one conversation is budgeted: above a SessionActor's measured size (MEASURED.md).
PER_CONVERSATION_BYTES = 200 * 1024 * 1024
# The share of the machine's memory conversation processes may take by default; the rest is
# Ray, Serve, the agent loop, a local model, the database and the operating system.
MEMORY_SHARE = 0.25
CAP_FLOOR = 4        # even a small machine holds a few conversations at once
CAP_CEILING = 256    # past this, processes (not memory) are what runs out
# Everything alive is busy: a person's newcomer hears to come back in this many seconds
# (about a turn); a background one looks again this often when nothing told it of an exit.
FULL_RETRY_SECONDS = 5
RECHECK_SECONDS = 2.0


def total_memory() -> int:
    """This machine's memory in bytes, or a container's limit when that is lower."""
    try:
        import psutil  # lazy: optional (without it the OS is asked)

        total = int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - psutil missing or unreadable: ask the OS
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min(total, _cgroup_limit() or total)


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < 1 << 60:   # "max", or v1's "no limit" figure
            return int(text)
    return None


def default_cap(total_memory_bytes: int, per_conversation_bytes: int = PER_CONVERSATION_BYTES,
                share: float = MEMORY_SHARE) -> int:
    """Live conversation processes (spares and starts included) for a machine with this much
    memory: `share` of it over `per_conversation_bytes`, at least CAP_FLOOR, at most CAP_CEILING."""
    fits = int(total_memory_bytes * share) // max(1, per_conversation_bytes)
    return max(CAP_FLOOR, min(CAP_CEILING, fits))


def configured_cap(max_live: int, total_memory_bytes: int | None = None) -> int:
    """`max_live` when set (over 0), else derived from the memory (this machine's by default)."""
    if max_live > 0:
        return max_live
    return default_cap(total_memory() if total_memory_bytes is None else total_memory_bytes)


class SessionsFull(SessionsBusy):
    """Every conversation process the server has room for is busy; try again in `retry_after` s."""

    def __str__(self) -> str:
        return (f"Every conversation the server has room for is busy; "
                f"try again in {self.retry_after} s.")


class Admission:
    """The registry's book of live conversations: when each was last used, the cap, the
    newcomers admitted whose process is not live yet (`entering`), those waiting for room, and
    the releases under way. `others` in the questions below is the processes the book does not
    list: the warm spares and the spares still starting."""

    def __init__(self, cap: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = max(1, int(cap))
        self.clock = clock
        self._last: dict[str, float] = {}
        self.entering = 0
        self.waiting = 0
        self.released = 0            # conversations let go for room since the start
        self.releasing: dict[str, asyncio.Future[bool]] = {}
        # Other processes that hold a place while their socket is open and are never let go
        # for room: camera streams ("camera:<id>") and connected devices ("device:<id>").
        # The connection now holding each (a device that reconnects takes its place over).
        self.streams: dict[str, str] = {}
        self._freed: asyncio.Event | None = None

    # -- what the registry tells it -----------------------------------------------------------

    def touch(self, session_id: str, idle_for: float = 0.0) -> None:
        """`session_id` is live and was last used `idle_for` seconds ago (now, by default)."""
        self._last[session_id] = self.clock() - max(0.0, idle_for)

    def drop(self, session_id: str) -> None:
        """`session_id`'s process is gone (released, exited, replaced): its place is free."""
        if self._last.pop(session_id, None) is not None:
            self._signal()

    def note(self, activity: dict[str, float | None]) -> set[str]:
        """What the live conversations answered (seconds idle, None while busy): an idle one's
        last use is the later of its own answer and the registry's last hand-out (a caller
        that was just given it has not used it yet); returns the busy ones."""
        busy: set[str] = set()
        for session_id, idle_for in activity.items():
            if session_id not in self._last:
                continue
            if idle_for is None:
                busy.add(session_id)
            else:
                self._last[session_id] = max(self._last[session_id], self.clock() - max(0.0, idle_for))
        return busy

    def end_stream(self, key: str, holder: str = "") -> None:
        """A camera stream or device connection closed: its place is free, unless another
        connection (`holder` given and not the latest) has taken it over meanwhile."""
        if key in self.streams and (not holder or self.streams[key] == holder):
            del self.streams[key]
            self._signal()

    def settle(self, freed: bool = True) -> None:
        """An admitted newcomer's start is over: `freed` when it failed (its place is free
        again), not when its conversation is live now (the place passed to it)."""
        self.entering = max(0, self.entering - 1)
        if freed:
            self._signal()

    # -- what it answers ----------------------------------------------------------------------

    def live(self) -> list[str]:
        """The live conversations, least recently used first."""
        return sorted(self._last, key=self._last.__getitem__)

    def occupied(self, others: int = 0) -> int:
        return len(self._last) + len(self.streams) + self.entering + others

    def fits(self, incoming: int = 1, others: int = 0) -> bool:
        return self.occupied(others) + incoming <= self.cap

    def to_release(self, busy: Iterable[str], incoming: int = 1, others: int = 0) -> list[str]:
        """The idle conversations to let go, least recently used first, so that `incoming` more
        processes fit; never a busy one nor one already being released. Empty when they fit
        already, and when letting every idle one go would still not be enough."""
        need = self.occupied(others) + incoming - self.cap
        if need <= 0:
            return []
        held = set(busy) | set(self.releasing)
        idle = [sid for sid in self.live() if sid not in held]
        return idle[:need] if len(idle) >= need else []

    def must_wait(self, busy: Iterable[str], incoming: int = 1, others: int = 0) -> bool:
        """True when `incoming` does not fit and releasing idle conversations cannot make it."""
        return not self.fits(incoming, others) and not self.to_release(busy, incoming, others)

    # -- waiting for room ---------------------------------------------------------------------

    def _signal(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def freed(self, timeout: float) -> bool:
        """Wait until a place frees (a release, an exit, a start given up) or `timeout` s."""
        if self._freed is None:
            self._freed = asyncio.Event()
        try:
            await asyncio.wait_for(self._freed.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False


async def make_room(book: Admission, others: Callable[[], int],
                    survey: Callable[[], Awaitable[dict[str, float | None]]],
                    release: Callable[[str], Awaitable[bool]], bound: float | None,
                    retry_after: int = FULL_RETRY_SECONDS, recheck: float = RECHECK_SECONDS) -> None:
    """Return once one more process fits, its place taken (`book.entering`; the caller calls
    `book.settle()` when its start is over). At the cap, the least recently used idle
    conversations are asked to go: `survey()` reports each live one's idle seconds (None: busy)
    and `release(id)` asks one (True: it is gone, and the caller has dropped it from its map).
    With everything busy, raises SessionsFull when there is a `bound` (a person waiting), else
    waits for a place to free, looking again every `recheck` s (a turn's end tells nobody)."""
    refused: set[str] = set()
    surveyed = False
    while True:
        if book.fits(1, others()):
            book.entering += 1
            return
        if not surveyed:
            refused |= book.note(await survey())
            surveyed = True
            continue
        victims = book.to_release(refused, 1, others())
        if victims:
            if not await _release(book, victims[0], release):
                refused.add(victims[0])
            continue
        if bound is not None:
            raise SessionsFull(retry_after)
        book.waiting += 1
        try:
            await book.freed(recheck)
        finally:
            book.waiting -= 1
        refused.clear()
        surveyed = False


async def claim_stream(book: Admission, key: str, holder: str, others: Callable[[], int],
                       survey: Callable[[], Awaitable[dict[str, float | None]]],
                       release: Callable[[str], Awaitable[bool]], bound: float | None,
                       retry_after: int = FULL_RETRY_SECONDS) -> None:
    """A place under the same cap for a camera stream or a device connection (`key`), held
    until `book.end_stream(key)`. Room is made as for a conversation (idle ones let go first);
    with everything busy it raises SessionsFull when there is a `bound`. A key that already
    holds a place (a device reconnecting) keeps it, now held by `holder`."""
    if key not in book.streams:
        await make_room(book, others, survey, release, bound, retry_after)
        book.settle(freed=False)
    book.streams[key] = holder


async def _release(book: Admission, session_id: str, release: Callable[[str], Awaitable[bool]]) -> bool:
    """Ask one idle conversation to go; callers acquiring it meanwhile wait for the answer."""
    answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    book.releasing[session_id] = answer
    gone = False
    try:
        gone = await release(session_id)
    except Exception:  # noqa: BLE001 - one that cannot answer is left where it is
        gone = False
    finally:
        if gone:
            book.released += 1
            book.drop(session_id)
        book.releasing.pop(session_id, None)
        answer.set_result(gone)
    return gone
