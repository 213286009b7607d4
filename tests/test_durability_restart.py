"""`through_restart`: a call that meets an actor restarting in place is made again until it is
back (with a deadline); an actor gone for good is not waited for. No Ray cluster needed: the
exceptions are Ray's own."""

from __future__ import annotations

import pytest
from ray.exceptions import ActorDiedError, ActorUnavailableError

from actors.common.restart import through_restart


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


def test_a_turn_lost_to_an_actor_death_ends_with_an_error_naming_the_cause() -> None:
    from actors.session.durable import lost_turn

    lost = lost_turn(restarting())
    assert lost.error.code == "session_unavailable"
    assert "its process was lost (killed or crashed) and is restarting" in lost.error.message
    assert "marked interrupted" in lost.error.message
    assert "its process died" in lost_turn(ActorDiedError()).error.message
    assert "(KeyError)" in lost_turn(KeyError("x")).error.message
