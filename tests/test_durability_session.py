"""Nothing a conversation accepted waits in memory: the session cores wired with `DurableTurns`
(as the SessionActor wires them) against a real store on both backends. The person's message
is stored when the turn starts, the reply before the client reads `done`, and a conversation
rebuilt after its actor died mid-turn keeps what was said, marked interrupted."""

from __future__ import annotations

import asyncio
from typing import Any

from actors.session.core import CRASHED_NOTE, RESTART_CAUSE, SessionCore
from actors.session.events import Done, Sentence, TurnError, TurnResult
from actors.session.turnlog import TurnLog
from actors.store.buffer import ConversationBuffer
from actors.store.models import MessageRecord
from actors.store.store import Store
from tests.actor_harness import DEADLINE, FakeAgent, Hold, SessionHarness


class DurableHarness(SessionHarness):
    """The harness with the actor's durability wiring and a real store."""

    def __init__(self, agent: FakeAgent, store: Store, session_id: str = "s1", core: SessionCore | None = None) -> None:
        super().__init__(agent, session_id=session_id, store=store, core=core)
        self.store = store
        # What the store held at the moment each follower got the turn's last event.
        self.stored_at_end: list[list[MessageRecord]] = []

    async def collect(self, turn: TurnLog) -> list[Any]:
        async def follow() -> list[Any]:
            out = []
            async for event in self.desk.follow(turn):
                if isinstance(event, (Done, TurnError)):
                    self.stored_at_end.append(await self.store.list_messages(self.core.session_id))
                out.append(event)
            return out
        return await asyncio.wait_for(follow(), DEADLINE)


async def new_conversation(store: Store, agent: FakeAgent, session_id: str = "s1") -> DurableHarness:
    harness = DurableHarness(agent, store, session_id)
    await harness.durable.flush()  # the conversation row, as `open(create=True)` writes it
    return harness


def said(*sentences: str) -> list[Any]:
    events: list[Any] = [Sentence(text=s, index=i) for i, s in enumerate(sentences)]
    return events + [TurnResult(text=" ".join(sentences))]


async def until_stored(store: Store, session_id: str, check: Any) -> list[MessageRecord]:
    for _ in range(200):
        rows = await store.list_messages(session_id)
        if check(rows):
            return rows
        await asyncio.sleep(0.01)
    raise AssertionError(f"store never matched: {rows}")


async def test_the_reply_is_stored_before_the_client_reads_done(store: Store) -> None:
    harness = await new_conversation(store, FakeAgent(said("Four.")))
    events = await harness.chat("what is 2+2?")
    done = events[-1]
    assert isinstance(done, Done)
    at_done = harness.stored_at_end[0]
    assert [(m.role, m.content) for m in at_done] == [("user", "what is 2+2?"), ("assistant", "Four.")]
    assert at_done[1].id == done.message_id and not (at_done[1].meta or {}).get("pending")
    assert harness.core.buffer.unsaved_messages == 0


async def test_the_message_is_stored_when_the_turn_starts_and_the_reply_follows_the_sentences(store: Store) -> None:
    hold = Hold()
    harness = await new_conversation(store, FakeAgent([Sentence(text="One.", index=0), hold,
                                                        *said("Two.")[:1], TurnResult(text="One. Two.")]))
    turn = harness.start("count")
    await asyncio.wait_for(hold.reached.wait(), DEADLINE)
    rows = await until_stored(store, "s1", lambda r: len(r) == 2 and r[1].content == "One.")
    assert rows[0].role == "user" and rows[0].content == "count"
    assert rows[1].role == "assistant" and rows[1].meta == {"pending": True, "turn_id": turn.turn_id}
    hold.released.set()
    await harness.collect(turn)
    final = await store.list_messages("s1")
    # The pending row became the reply: same id and seq, no second row.
    assert [(m.id, m.seq) for m in final] == [(r.id, r.seq) for r in rows]
    assert final[1].content == "One. Two." and final[1].meta is None


async def test_a_conversation_rebuilt_mid_turn_keeps_the_partial_reply_marked_interrupted(store: Store) -> None:
    hold = Hold()
    harness = await new_conversation(store, FakeAgent([Sentence(text="The first half.", index=0), hold]))
    harness.start("tell me a story")
    await asyncio.wait_for(hold.reached.wait(), DEADLINE)
    await until_stored(store, "s1", lambda r: len(r) == 2 and r[1].content)
    # The actor dies here (nothing of it runs again); a restarted one rebuilds from the store.
    rebuilt = SessionCore("s1")
    assert await rebuilt.load(store)
    await rebuilt.buffer.flush(store)
    stored = await store.list_messages("s1")
    assert [(m.role, m.content) for m in stored] == [("user", "tell me a story"), ("assistant", "The first half.")]
    assert stored[1].meta == {"turn_id": stored[1].meta["turn_id"], "interrupted": True, "cause": RESTART_CAUSE}
    assert rebuilt.prompt("system")[-1].content == "The first half." + CRASHED_NOTE
    # The next turn continues after it, with no gap in what the model sees.
    follow = DurableHarness(FakeAgent(said("Where was I.")), store, core=rebuilt)
    await follow.chat("go on")
    assert [m.content for m in await store.list_messages("s1")] == [
        "tell me a story", "The first half.", "go on", "Where was I."]
    hold.released.set()


async def test_a_turn_killed_before_its_first_sentence_leaves_only_the_message(store: Store) -> None:
    hold = Hold()
    harness = await new_conversation(store, FakeAgent([hold]))
    harness.start("hello?")
    await asyncio.wait_for(hold.reached.wait(), DEADLINE)
    await until_stored(store, "s1", lambda r: len(r) == 2)
    rebuilt = SessionCore("s1")
    assert await rebuilt.load(store)
    await rebuilt.buffer.flush(store)
    assert [(m.role, m.content) for m in await store.list_messages("s1")] == [("user", "hello?")]
    assert [m.role for m in rebuilt.history] == ["user"]
    hold.released.set()


async def test_an_agent_error_stores_the_message_and_no_reply(store: Store) -> None:
    agent = FakeAgent([Sentence(text="Partly.", index=0), TurnError.of("provider_error", "Cut short.")])
    harness = await new_conversation(store, agent)
    events = await harness.chat("hi")
    assert events[-1].type == "error"
    assert [(m.role, m.content) for m in harness.stored_at_end[0]] == [("user", "hi")]


async def test_a_barge_in_stores_what_was_heard_before_done(store: Store) -> None:
    hold = Hold()
    harness = await new_conversation(store, FakeAgent([Sentence(text="One.", index=0),
                                                        Sentence(text="Two.", index=1), hold]))
    turn = harness.start("count")
    await asyncio.wait_for(hold.reached.wait(), DEADLINE)
    assert harness.cancel(heard_index=0)
    events = await harness.collect(turn)
    assert isinstance(events[-1], Done) and events[-1].cancelled
    at_done = harness.stored_at_end[0]
    assert [(m.content, m.meta) for m in at_done[1:]] == [("One.", {"interrupted": True})]


class FlakyStore:
    """A store whose writes fail while `down` is set (the database went away)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False

    async def write_batch(self, *args: Any, **kwargs: Any) -> None:
        if self.down:
            raise ConnectionError("database unavailable")
        await self.store.write_batch(*args, **kwargs)


async def test_a_reply_the_store_refused_ends_with_an_error_and_is_written_on_the_next_flush(store: Store) -> None:
    flaky = FlakyStore(store)
    hold = Hold()
    harness = await new_conversation(store, FakeAgent([hold, *said("Saved later.")]))
    harness.durable.store = flaky  # type: ignore[assignment]
    turn = harness.start("remember this")
    await asyncio.wait_for(hold.reached.wait(), DEADLINE)
    flaky.down = True
    hold.released.set()
    events = await harness.collect(turn)
    assert events[-1].type == "error" and events[-1].error.code == "store_unavailable"
    assert harness.core.buffer.unsaved_messages == 1
    flaky.down = False
    await harness.durable.flush()
    assert [m.content for m in await store.list_messages("s1")] == ["remember this", "Saved later."]


async def test_the_buffer_keeps_the_newest_write_of_a_row_and_puts_a_failed_batch_back(store: Store) -> None:
    core = SessionCore("s2")
    core.create()
    first = core.add("user", "hi")
    buffer = core.buffer
    buffer.add(first.model_copy(update={"content": "hi again"}))
    assert buffer.unsaved_messages == 1
    flaky = FlakyStore(store)
    flaky.down = True
    try:
        await buffer.flush(flaky)  # type: ignore[arg-type]
    except ConnectionError:
        pass
    assert buffer.unsaved_messages == 1
    await buffer.flush(store)
    assert [m.content for m in await store.list_messages("s2")] == ["hi again"]
    gone = ConversationBuffer()
    gone.delete(first.id)
    await gone.flush(store)
    assert await store.list_messages("s2") == []
