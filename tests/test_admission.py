"""The cap on live conversation processes and which idle one makes room (pure logic, no Ray)."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from actors.session.admission import (
    CAP_CEILING,
    CAP_FLOOR,
    FULL_RETRY_SECONDS,
    Admission,
    SessionsFull,
    claim_stream,
    configured_cap,
    default_cap,
    make_room,
    total_memory,
)
from actors.session.start_queue import SessionsBusy
from actors.settings import load_settings

GiB = 1024 ** 3
MiB = 1024 ** 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def book_with(cap: int, *ids: str) -> tuple[Admission, Clock]:
    """A book whose conversations were used in the order given, a second apart."""
    clock = Clock()
    book = Admission(cap, clock)
    for session_id in ids:
        book.touch(session_id)
        clock.now += 1.0
    return book, clock


# -- the default cap --------------------------------------------------------------------------

def test_the_default_cap_is_a_share_of_memory_over_a_per_conversation_budget() -> None:
    assert default_cap(25_276_182_528) == 30       # this 24 GB machine: 6.3 GB over 200 MiB
    assert default_cap(64 * GiB) == 81
    assert default_cap(8 * GiB, per_conversation_bytes=100 * MiB) == 20
    assert default_cap(8 * GiB, share=0.5) == 20


def test_the_default_cap_has_a_floor_and_a_ceiling() -> None:
    assert default_cap(1 * GiB) == CAP_FLOOR == 4
    assert default_cap(0) == CAP_FLOOR
    assert default_cap(4 * 1024 * GiB) == CAP_CEILING == 256


def test_a_configured_cap_wins_and_zero_derives_it() -> None:
    assert configured_cap(3, 64 * GiB) == 3
    assert configured_cap(0, 64 * GiB) == 81
    assert configured_cap(0) == default_cap(total_memory())
    assert total_memory() > 0


def test_the_setting_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IRIIS_SESSION_MAX_LIVE", raising=False)
    assert load_settings().iriis_session_max_live == 0
    monkeypatch.setenv("IRIIS_SESSION_MAX_LIVE", "12")
    assert load_settings().iriis_session_max_live == 12


# -- the book ---------------------------------------------------------------------------------

def test_under_the_cap_nothing_is_let_go() -> None:
    book, _ = book_with(4, "a", "b", "c")
    assert book.fits(1)
    assert book.to_release(set(), 1) == []
    assert not book.must_wait(set(), 1)


def test_at_the_cap_the_least_recently_used_idle_one_goes() -> None:
    book, clock = book_with(3, "a", "b", "c")
    assert not book.fits(1)
    assert book.to_release(set(), 1) == ["a"]
    book.touch("a")                        # used again: now the newest
    assert book.to_release(set(), 1) == ["b"]
    assert book.live() == ["b", "c", "a"]
    assert book.to_release(set(), 2) == ["b", "c"]


def test_over_the_cap_enough_go_for_the_newcomer_to_fit() -> None:
    book, _ = book_with(2, "a", "b", "c", "d")   # e.g. a registry rebuilt under a lower cap
    assert book.occupied() == 4
    assert book.to_release(set(), 1) == ["a", "b", "c"]


def test_a_busy_one_is_never_let_go() -> None:
    book, _ = book_with(3, "a", "b", "c")
    assert book.to_release({"a"}, 1) == ["b"]
    assert book.to_release({"a", "b"}, 1) == ["c"]
    # Everything busy: nothing to let go, the newcomer must wait (or be refused).
    assert book.to_release({"a", "b", "c"}, 1) == []
    assert book.must_wait({"a", "b", "c"}, 1)
    # Not enough idle ones for two newcomers: none is let go for nothing.
    assert book.to_release({"a", "b"}, 2) == []


def test_spares_and_starting_processes_count_against_the_cap() -> None:
    book, _ = book_with(4, "a", "b")
    assert book.fits(1, others=1)               # two live, one spare: a fourth fits
    assert not book.fits(1, others=2)           # two live, a spare and one starting: full
    assert book.to_release(set(), 1, others=2) == ["a"]
    book.entering += 1                          # a newcomer admitted, its process starting
    assert book.occupied(others=1) == 4
    assert book.to_release(set(), 1, others=1) == ["a"]
    book.settle(freed=False)
    assert book.entering == 0


async def test_one_being_released_is_not_chosen_twice() -> None:
    book, _ = book_with(3, "a", "b", "c")
    book.releasing["a"] = asyncio.get_running_loop().create_future()
    assert book.to_release(set(), 1) == ["b"]


def test_the_survey_updates_last_use_and_names_the_busy_ones() -> None:
    book, clock = book_with(3, "a", "b", "c")   # a at 1000, b at 1001, c at 1002; now 1003
    busy = book.note({"a": 0.5, "b": None, "c": 60.0, "gone": 1.0})
    assert busy == {"b"}
    # a was used half a second ago; c's own answer is older than the registry's hand-out.
    assert book.live() == ["b", "c", "a"]
    assert "gone" not in book.live()
    assert book.to_release(busy, 1) == ["c"]


def test_a_drop_frees_a_place() -> None:
    book, _ = book_with(2, "a", "b")
    assert not book.fits(1)
    book.drop("a")
    book.drop("never-there")
    assert book.fits(1) and book.live() == ["b"]


def test_the_refusal_is_a_sessions_busy_that_crosses_processes() -> None:
    full = SessionsFull(5)
    assert isinstance(full, SessionsBusy) and "busy" in str(full) and "5 s" in str(full)
    copy = pickle.loads(pickle.dumps(full))
    assert isinstance(copy, SessionsFull) and copy.retry_after == 5 and str(copy) == str(full)


# -- making room ------------------------------------------------------------------------------

class Fleet:
    """Stands in for the registry: live conversations, which are busy, what each release did."""

    def __init__(self, book: Admission, busy: set[str] | None = None) -> None:
        self.book = book
        self.busy = set(busy or ())
        self.spares = 0
        self.surveys = 0
        self.asked: list[str] = []
        self.refuse: set[str] = set()   # busy by the time they are asked

    def others(self) -> int:
        return self.spares

    async def survey(self) -> dict[str, float | None]:
        self.surveys += 1
        return {sid: (None if sid in self.busy else 0.0) for sid in self.book.live()}

    async def release(self, session_id: str) -> bool:
        self.asked.append(session_id)
        await asyncio.sleep(0)
        if session_id in self.busy or session_id in self.refuse:
            return False
        return True


async def test_under_the_cap_a_place_is_taken_without_asking_anyone() -> None:
    book, _ = book_with(3, "a")
    fleet = Fleet(book)
    await make_room(book, fleet.others, fleet.survey, fleet.release, bound=1.0)
    assert book.entering == 1 and fleet.surveys == 0 and fleet.asked == []


async def test_at_the_cap_the_least_recently_used_idle_one_is_let_go() -> None:
    book, _ = book_with(3, "a", "b", "c")
    fleet = Fleet(book, busy={"a"})
    await make_room(book, fleet.others, fleet.survey, fleet.release, bound=1.0)
    assert fleet.asked == ["b"]
    assert book.live() == ["a", "c"] and book.entering == 1 and book.released == 1
    assert book.occupied() == 3 and not book.releasing


async def test_one_that_turned_busy_when_asked_is_skipped_for_the_next() -> None:
    book, _ = book_with(3, "a", "b", "c")
    fleet = Fleet(book)
    fleet.refuse = {"a"}
    await make_room(book, fleet.others, fleet.survey, fleet.release, bound=None)
    assert fleet.asked == ["a", "b"]
    assert book.live() == ["a", "c"] and book.released == 1


async def test_a_spare_counts_so_a_conversation_goes_for_a_start() -> None:
    book, _ = book_with(3, "a", "b")
    fleet = Fleet(book)
    fleet.spares = 1
    await make_room(book, fleet.others, fleet.survey, fleet.release, bound=1.0)
    assert fleet.asked == ["a"] and book.occupied(fleet.others()) == 3


async def test_everything_busy_refuses_a_person_at_once() -> None:
    book, _ = book_with(2, "a", "b")
    fleet = Fleet(book, busy={"a", "b"})
    with pytest.raises(SessionsFull) as refused:
        await make_room(book, fleet.others, fleet.survey, fleet.release, bound=30.0)
    assert refused.value.retry_after == FULL_RETRY_SECONDS
    assert fleet.asked == [] and book.entering == 0 and book.live() == ["a", "b"]


async def test_everything_busy_a_background_caller_waits_for_an_exit() -> None:
    book, _ = book_with(2, "a", "b")
    fleet = Fleet(book, busy={"a", "b"})
    waiter = asyncio.create_task(make_room(book, fleet.others, fleet.survey, fleet.release,
                                           bound=None, recheck=60.0))
    await asyncio.sleep(0.01)
    assert not waiter.done() and book.waiting == 1
    book.drop("a")                            # the registry saw "a" exit (its sweep, or a death)
    await asyncio.wait_for(waiter, 1.0)       # woken at once, not after the 60 s recheck
    assert book.entering == 1 and book.waiting == 0 and fleet.asked == []


async def test_a_background_caller_looks_again_once_a_busy_one_turned_idle() -> None:
    book, _ = book_with(2, "a", "b")
    fleet = Fleet(book, busy={"a", "b"})
    waiter = asyncio.create_task(make_room(book, fleet.others, fleet.survey, fleet.release,
                                           bound=None, recheck=0.02))
    await asyncio.sleep(0.05)
    assert not waiter.done() and fleet.surveys >= 2
    fleet.busy.discard("b")                   # its turn ended (nobody tells the registry)
    await asyncio.wait_for(waiter, 1.0)
    assert fleet.asked == ["b"] and book.live() == ["a"] and book.entering == 1


async def test_two_newcomers_at_once_let_two_different_ones_go() -> None:
    book, _ = book_with(3, "a", "b", "c")
    fleet = Fleet(book)
    await asyncio.gather(*(make_room(book, fleet.others, fleet.survey, fleet.release, bound=1.0)
                           for _ in range(2)))
    assert sorted(fleet.asked) == ["a", "b"] and book.live() == ["c"]
    assert book.entering == 2 and book.occupied() == 3


async def test_a_failed_start_gives_its_place_back_to_a_waiter() -> None:
    book, _ = book_with(2, "a")
    fleet = Fleet(book, busy={"a"})
    await make_room(book, fleet.others, fleet.survey, fleet.release, bound=None)   # the last place
    waiter = asyncio.create_task(make_room(book, fleet.others, fleet.survey, fleet.release,
                                           bound=None, recheck=60.0))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    book.settle(freed=True)                   # the first start failed
    await asyncio.wait_for(waiter, 1.0)
    assert book.entering == 1


async def test_a_caller_waits_on_the_outcome_of_a_release_under_way() -> None:
    book, _ = book_with(1, "a")
    gate = asyncio.Event()
    fleet = Fleet(book)

    async def slow_release(session_id: str) -> bool:
        await gate.wait()
        return True

    room = asyncio.create_task(make_room(book, fleet.others, fleet.survey, slow_release, bound=1.0))
    await asyncio.sleep(0.01)
    outcome = book.releasing["a"]
    assert not outcome.done()
    gate.set()
    await room
    assert outcome.result() is True and "a" not in book.live() and not book.releasing


async def test_a_release_that_fails_is_a_refusal() -> None:
    book, _ = book_with(1, "a")
    fleet = Fleet(book)

    async def broken(session_id: str) -> bool:
        raise RuntimeError("no answer")

    with pytest.raises(SessionsFull):
        await make_room(book, fleet.others, fleet.survey, broken, bound=1.0)
    assert book.live() == ["a"] and book.released == 0 and not book.releasing


# -- camera streams and devices ------------------------------------------------------------------

async def test_a_stream_takes_a_place_and_an_idle_conversation_goes_for_it() -> None:
    book, _ = book_with(2, "a", "b")
    fleet = Fleet(book)
    await claim_stream(book, "camera:s1", "h1", fleet.others, fleet.survey, fleet.release, bound=1.0)
    assert fleet.asked == ["a"] and book.streams == {"camera:s1": "h1"}
    assert book.entering == 0 and book.occupied() == 2


async def test_a_stream_is_never_let_go_for_room() -> None:
    book, _ = book_with(2, "a")
    fleet = Fleet(book, busy={"a"})
    await claim_stream(book, "device:7", "h1", fleet.others, fleet.survey, fleet.release, bound=1.0)
    # Full: the busy conversation and the device. A camera stream finds no room, and a
    # conversation's newcomer neither: the device is not offered up as idle.
    with pytest.raises(SessionsFull):
        await claim_stream(book, "camera:s1", "h2", fleet.others, fleet.survey, fleet.release, bound=1.0)
    with pytest.raises(SessionsFull):
        await make_room(book, fleet.others, fleet.survey, fleet.release, bound=1.0)
    assert fleet.asked == [] and list(book.streams) == ["device:7"]


async def test_a_stream_that_ends_frees_its_place_for_a_waiter() -> None:
    book, _ = book_with(1)
    fleet = Fleet(book)
    await claim_stream(book, "camera:s1", "h1", fleet.others, fleet.survey, fleet.release, bound=1.0)
    waiter = asyncio.create_task(make_room(book, fleet.others, fleet.survey, fleet.release,
                                           bound=None, recheck=60.0))
    await asyncio.sleep(0.01)
    assert not waiter.done() and book.waiting == 1
    book.end_stream("camera:s1", "h1")
    await asyncio.wait_for(waiter, 1.0)
    assert book.entering == 1 and not book.streams


async def test_a_device_that_reconnects_keeps_one_place_and_the_old_socket_cannot_free_it() -> None:
    book, _ = book_with(2)
    fleet = Fleet(book)
    await claim_stream(book, "device:7", "old", fleet.others, fleet.survey, fleet.release, bound=1.0)
    await claim_stream(book, "device:7", "new", fleet.others, fleet.survey, fleet.release, bound=1.0)
    assert book.occupied() == 1
    book.end_stream("device:7", "old")        # the replaced socket closes after the new one came
    assert book.streams == {"device:7": "new"}
    book.end_stream("device:7", "new")
    assert book.occupied() == 0
