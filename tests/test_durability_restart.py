"""`through_restart`: a call that meets an actor restarting in place is made again until it is
back (with a deadline); an actor gone for good is not waited for. `begin_stream`: a streaming
call whose actor was gone before its first item goes once more to a fresh handle. No Ray
cluster needed: the exceptions are Ray's own."""

from __future__ import annotations

import pytest
from ray.exceptions import ActorDiedError, ActorUnavailableError

from actors.common.restart import begin_stream, first_then_rest, through_restart


def restarting() -> ActorUnavailableError:
    return ActorUnavailableError("The actor is temporarily unavailable: IOError: The actor is restarting.", None)


async def test_a_call_is_made_again_until_the_actor_is_back() -> None:
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise restarting()
        return "back"

    assert await through_restart(call) == "back" and len(calls) == 3


async def test_an_actor_gone_for_good_is_not_waited_for() -> None:
    calls: list[int] = []

    async def call() -> str:
        calls.append(1)
        raise ActorDiedError()

    with pytest.raises(ActorDiedError):
        await through_restart(call)
    assert len(calls) == 1


async def test_the_wait_has_a_deadline() -> None:
    async def call() -> str:
        raise restarting()

    with pytest.raises(ActorUnavailableError):
        await through_restart(call, wait=0.3)


class Stream:
    """What a streaming actor call gives back: refs to await, or the actor's death at the first."""

    def __init__(self, items: list[str], dead: Exception | None = None) -> None:
        self.items, self.dead = list(items), dead

    def __aiter__(self) -> "Stream":
        return self

    async def __anext__(self) -> object:
        if self.dead is not None:
            raise self.dead
        if not self.items:
            raise StopAsyncIteration
        item = self.items.pop(0)

        async def ref() -> str:
            return item
        return ref()


async def test_a_stream_whose_actor_was_gone_goes_once_to_a_fresh_handle() -> None:
    started: list[str] = []

    def start(handle: str) -> Stream:
        started.append(handle)
        return Stream(["turn", "a", "b"], dead=ActorDiedError() if handle == "old" else None)

    async def refind() -> str:
        return "new"

    handle, stream, first = await begin_stream("old", start, refind)
    assert (handle, first, started) == ("new", "turn", ["old", "new"])
    assert [item async for item in first_then_rest(first, stream)] == ["turn", "a", "b"]


async def test_a_stream_is_not_sent_a_third_time() -> None:
    started: list[str] = []

    def start(handle: str) -> Stream:
        started.append(handle)
        return Stream([], dead=restarting())

    async def refind() -> str:
        return "again"

    with pytest.raises(ActorUnavailableError):
        await begin_stream("old", start, refind)
    assert started == ["old", "again"]


async def test_a_live_stream_is_read_once_from_its_first_item() -> None:
    async def refind() -> str:
        raise AssertionError("a live actor is not replaced")

    handle, stream, first = await begin_stream("live", lambda _h: Stream(["turn", "x"]), refind)
    assert handle == "live" and [item async for item in first_then_rest(first, stream)] == ["turn", "x"]
    assert [item async for item in first_then_rest(None, Stream(["only"]))] == ["only"]


def test_a_turn_lost_to_an_actor_death_ends_with_an_error_naming_the_cause() -> None:
    from actors.session.durable import lost_turn

    lost = lost_turn(restarting())
    assert lost.error.code == "session_unavailable"
    assert "its process was lost (killed or crashed) and is restarting" in lost.error.message
    assert "marked interrupted" in lost.error.message
    assert "its process died" in lost_turn(ActorDiedError()).error.message
    assert "(KeyError)" in lost_turn(KeyError("x")).error.message
