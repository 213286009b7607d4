"""Group commit without Ray: batching of concurrent requests, and batch planning in the core."""

from __future__ import annotations

import asyncio

import pytest

from actors.relay.core import SessionCore
from actors.relay.errors import RelayError
from actors.relay.group_commit import GroupCommit
from actors.relay.lifecycle import SessionState
from actors.relay.limits import RelayLimits

T0 = 1_800_000_000.0


class Recorder:
    """A commit that records its batches; a batch holding "poison" fails, and `gate` holds a
    commit open so that the next requests queue behind it."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, items: list[str]) -> list[str | Exception]:
        self.batches.append(list(items))
        await self.gate.wait()
        if "poison" in items:
            raise OSError("disk full")
        return [RelayError("invalid_request", "refused") if i == "bad" else i.upper() for i in items]


async def test_requests_that_arrive_during_a_commit_share_the_next_one_in_order() -> None:
    commit = Recorder()
    group: GroupCommit[str, str] = GroupCommit(commit)
    commit.gate.clear()
    first = asyncio.create_task(group.submit("a"))
    await asyncio.sleep(0)
    while not commit.batches:
        await asyncio.sleep(0)
    rest = [asyncio.create_task(group.submit(x)) for x in ("b", "c", "d")]
    await asyncio.sleep(0)
    assert not any(t.done() for t in [first, *rest])  # nothing is answered before its commit
    commit.gate.set()
    assert await asyncio.gather(first, *rest) == ["A", "B", "C", "D"]
    assert commit.batches == [["a"], ["b", "c", "d"]]
    assert await group.submit("e") == "E" and commit.batches[-1] == ["e"]  # idle again: at once


async def test_a_failed_commit_fails_only_its_own_batch() -> None:
    commit = Recorder()
    group: GroupCommit[str, str] = GroupCommit(commit)
    commit.gate.clear()
    doomed = [asyncio.create_task(group.submit(x)) for x in ("x", "poison")]
    while not commit.batches:
        await asyncio.sleep(0)
    later = [asyncio.create_task(group.submit(x)) for x in ("y", "bad", "z")]
    await asyncio.sleep(0)
    commit.gate.set()
    for task in doomed:
        with pytest.raises(OSError):
            await task
    assert await later[0] == "Y" and await later[2] == "Z"
    with pytest.raises(RelayError):  # a refusal is its own request's answer, not its batch's
        await later[1]
    assert commit.batches == [["x", "poison"], ["y", "bad", "z"]]


async def test_a_caller_that_goes_away_does_not_stop_its_batch() -> None:
    commit = Recorder()
    group: GroupCommit[str, str] = GroupCommit(commit)
    commit.gate.clear()
    leaving = asyncio.create_task(group.submit("a"))
    staying = asyncio.create_task(group.submit("b"))
    while not commit.batches:
        await asyncio.sleep(0)
    leaving.cancel()
    commit.gate.set()
    assert await staying == "B"
    assert commit.batches == [["a", "b"]]  # the write went ahead; only the answer was dropped


def test_batch_planning_is_the_same_as_one_post_at_a_time() -> None:
    limits = RelayLimits(max_messages=5, messages_per_minute=1000)
    core = SessionCore(SessionState(uid="u", key_hash="h", created=T0, last_write=T0, limits=limits))
    before = core.state.model_copy(deep=True)
    posts = [({"role": "user", "name": "a", "content": f"m{i}"}, {}, T0 + i) for i in range(6)]
    plan, results = core.plan_posts(posts)
    assert core.state == before  # planning never mutates; the caller commits once it is stored
    envelopes = [r for r in results if not isinstance(r, RelayError)]
    # Five posts; the fifth reaches 90% of the cap, so the warning follows as seq 6; the sixth
    # post finds the session full.
    assert [e["seq"] for e in envelopes] == [1, 2, 3, 4, 5]
    assert isinstance(results[5], RelayError) and results[5].code == "limit_exceeded"
    assert [e["seq"] for e in plan.envelopes] == [1, 2, 3, 4, 5, 6]
    assert plan.envelopes[-1]["metadata"]["event"] == "limit_warning"
    assert plan.state.last_seq == 6 and plan.state.message_count == 6 and plan.state.last_write == T0 + 4
    core.commit(plan)
    assert core.state.last_seq == 6


def test_a_refused_post_in_a_batch_takes_no_seq() -> None:
    core = SessionCore(SessionState(uid="u", key_hash="h", created=T0, last_write=T0,
                                    limits=RelayLimits(messages_per_minute=2)))
    posts = [({"role": "user", "name": "a", "content": c}, {}, T0 + 1) for c in ("a", "b", "c")]
    plan, results = core.plan_posts(posts)
    assert [r["seq"] for r in results[:2]] == [1, 2]  # type: ignore[index]
    assert isinstance(results[2], RelayError) and results[2].code == "rate_limited"
    assert [e["message"]["content"] for e in plan.envelopes] == ["a", "b"]
