"""Learning: reflection, playbook distillation, consolidation and persona, applied to a real
store on both backends with a scripted `complete` standing in for the router-backed model call.
The pure planners are tested with exact results first."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from actors.memory import jobs
from actors.memory.apply import apply_ops
from actors.memory.consolidation import activity_histogram, parse_consolidation, plan_consolidation
from actors.memory.exchanges import pair_exchanges
from actors.memory.model import MindItem, Persona
from actors.memory.persona import parse_persona
from actors.memory.playbook import parse_playbook, plan_playbook
from actors.memory.reflect_prompt import PROMPT_CAP, Exchange, ToolTrace, reflection_prompt
from actors.memory.reflection import InsertOp, is_correction
from actors.memory.repository import list_events, list_items, memory_block, remember
from actors.store.models import MessageRecord
from actors.store.store import Store
from serve_apps.deployments.agent_loop import cap_messages

NOW = 1_800_000_000.0


def item(id: int, kind: str, text: str, **kw) -> MindItem:
    return MindItem(id=id, kind=kind, text=text, created=NOW - 3600, **kw)


class Scripted:
    """A `complete` that answers from a list and keeps what it was asked."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, list[dict[str, str]]]] = []

    async def __call__(self, messages: list[dict[str, str]], purpose: str) -> str | None:
        self.calls.append((purpose, messages))
        return self.answers.pop(0) if self.answers else "{}"


# ---- pure -----------------------------------------------------------------------------

def test_reflection_prompt_shows_ids_and_stays_within_its_cap() -> None:
    exchange = Exchange(user="x" * 50_000, reply="y" * 50_000,
                        tools=[ToolTrace(name="web_fetch", arguments={"url": "u"}, result="z" * 10_000)] * 30)
    messages = reflection_prompt(exchange, [item(7, "fact", "Owner likes tea")], [item(9, "open_loop", "Send invoice")])
    assert sum(len(m["content"]) for m in messages) <= PROMPT_CAP
    assert "[#7] (fact) Owner likes tea" in messages[1]["content"]
    assert "[#9] Send invoice" in messages[1]["content"]
    assert "appear in the owner's client automatically" in messages[0]["content"]


def test_cap_messages_cuts_the_longest_content_first() -> None:
    capped = cap_messages([{"role": "system", "content": "s" * 100}, {"role": "user", "content": "u" * 5000}], 1000)
    assert capped[0]["content"] == "s" * 100 and len(capped[1]["content"]) == 900
    assert cap_messages([{"role": "user", "content": "short"}], 1000) == [{"role": "user", "content": "short"}]


def test_playbook_parse_tags_caps_and_drops_secrets() -> None:
    raw = ('Here you go: {"rules": [{"domain": "Email", "rule": "Draft replies before sending", "replaces": "#4"},'
           ' "[travel] Check visa rules first", {"rule": "my password is hunter22"},'
           ' {"rule": "one"}, {"rule": "two"}, {"rule": "three"}]}')
    deltas = parse_playbook(raw)
    assert [(d.domain, d.rule, d.replaces) for d in deltas] == [
        ("email", "Draft replies before sending", 4), ("travel", "Check visa rules first", None),
        ("general", "one", None)]
    assert parse_playbook("no json at all") == [] and parse_playbook('{"rules": 5}') == []


def test_playbook_delta_retires_only_the_named_active_rule() -> None:
    existing = [item(4, "playbook", "[email] Send replies quickly"), item(5, "fact", "Owner is Ana")]
    deltas = parse_playbook('{"rules": [{"domain": "email", "rule": "Draft replies and wait for a yes", "replaces": 4},'
                            ' {"domain": "x", "rule": "Retire a fact", "replaces": 5}]}')
    ops = plan_playbook(deltas, existing, NOW)
    assert [op.op for op in ops] == ["deactivate", "insert", "insert"]
    assert ops[0].item_id == 4
    assert ops[1].text == "[email] Draft replies and wait for a yes"


def test_consolidation_retires_revises_goals_and_adds_insights() -> None:
    active = [item(1, "fact", "Owner runs on Tuesdays"), item(2, "goal", "Run a marathon in spring"),
              item(3, "goal", "Learn Italian"), item(4, "fact", "Owner runs Tuesdays")]
    raw = json.dumps({"insights": ["Owner values routine"], "patterns": ["Asks for summaries late at night"],
                      "growth": ["Shorter answers"], "goals": ["Run a marathon in spring"],
                      "retire": [4, 2, 999, "x"]})
    ops = plan_consolidation(parse_consolidation(raw), active, NOW)
    summary = [(op.op, getattr(op, "item_id", None), getattr(op, "text", None)) for op in ops]
    assert ("deactivate", 4, None) in summary
    assert ("deactivate", 3, None) in summary           # a goal no longer listed
    assert ("deactivate", 2, None) not in summary       # goals are revised, not retired by id
    assert ("reinforce", 2, None) in summary
    assert ("insert", None, "Owner values routine") in summary
    assert ("insert", None, "Growth area: Shorter answers") in summary
    assert not [op for op in plan_consolidation(parse_consolidation('{"insights": []}'), active, NOW)
                if op.op == "deactivate"]  # no goals key: goals stay


def test_activity_histogram_counts_utc_hours_in_the_window() -> None:
    base = datetime(2027, 1, 10, 9, 30, tzinfo=timezone.utc).timestamp()
    hist = activity_histogram([base, base + 60, base + 3600, base - 20 * 86400], now=base + 7200)
    assert hist[9] == 2 and hist[10] == 1 and sum(hist) == 3


def test_persona_merges_over_the_current_one_and_rejects_empty_answers() -> None:
    current = Persona(purpose="Keep Ana on track", voice="warm", avoid=["jargon"])
    revised = parse_persona('{"voice": "warm, brief", "purpose": "", "vocabulary": "onward, nice"}', current)
    assert revised == Persona(purpose="Keep Ana on track", voice="warm, brief",
                              vocabulary=["onward", "nice"], avoid=["jargon"])
    assert parse_persona('{"voice": ""}', current) is None
    assert parse_persona("not json", None) is None


def test_exchanges_flag_the_exchange_the_owner_corrected() -> None:
    msgs = [MessageRecord(conversation_id="c", seq=i + 1, role=role, content=text, created=NOW + i)
            for i, (role, text) in enumerate([
                ("user", "Where does Anna live?"), ("assistant", "Paris."),
                ("user", "No, she moved to Lyon."), ("assistant", "Noted.", ),
                ("user", "Thanks"), ("assistant", "Any time.")])]
    rows = pair_exchanges(list(reversed(msgs)))
    assert [(r.user, r.reply, r.corrected) for r in rows] == [
        ("Where does Anna live?", "Paris.", True), ("No, she moved to Lyon.", "Noted.", False),
        ("Thanks", "Any time.", False)]
    assert rows[0].correction == "No, she moved to Lyon."
    assert is_correction("that's not right") and not is_correction("thanks, great")


# ---- on the store ---------------------------------------------------------------------

REFLECT_PARIS = json.dumps({"observations": [{"text": "Anna, the owner's sister, lives in Paris", "importance": 7}],
                            "people": [{"text": "Anna is the owner's sister", "importance": 6}],
                            "open_loops": ["Book the train to see Anna"],
                            "mood": {"feeling": "curious", "valence": 0.3, "why": "planning a trip"}})


async def test_reflection_applies_in_one_go_and_logs_events(store: Store) -> None:
    complete = Scripted(REFLECT_PARIS)
    outcome = await jobs.reflect_exchange(store, complete, Exchange(
        session_id="s1", user="My sister Anna lives in Paris, I want to visit her", reply="Lovely! When?"), now=NOW)
    assert outcome.outcome == "applied" and len(outcome.applied.inserted) == 3
    texts = {i.kind: i.text for i in await list_items(store, active=True)}
    assert texts == {"fact": "Anna, the owner's sister, lives in Paris", "person": "Anna is the owner's sister",
                     "open_loop": "Book the train to see Anna"}
    assert (await store.get_kv("mind_mood"))["feeling"] == "curious"
    events = await list_events(store)
    assert [e["event"] for e in events].count("insert") == 3
    assert events[0]["event"] == "reflection" and events[0]["data"]["outcome"] == "applied"
    assert complete.calls[0][0] == "reflection"


async def test_trivial_turns_are_skipped_without_a_model_call(store: Store) -> None:
    complete = Scripted()
    outcome = await jobs.reflect_exchange(store, complete, Exchange(user="thanks", reply="You're welcome."))
    assert outcome.outcome == "skipped_trivial" and complete.calls == []


@pytest.mark.parametrize("raw", ["I could not decide.", '{"observations": [', "{'updates': [{'id': 'x'}]}", ""])
async def test_malformed_reflections_apply_nothing_and_lose_nothing(store: Store, raw: str) -> None:
    kept, _ = await remember(store, "fact", "The owner's cat is called Miso", now=NOW)
    outcome = await jobs.reflect_exchange(store, Scripted(raw), Exchange(
        user="Tell me about my cat Miso and what she eats", reply="Miso likes fish."), now=NOW)
    assert outcome.outcome in ("unparsed", "nothing_new")
    items = await list_items(store)
    assert [(i.id, i.text, i.active) for i in items] == [(kept.id, kept.text, True)]


async def test_unknown_or_unshown_ids_are_never_touched(store: Store) -> None:
    unrelated, _ = await remember(store, "fact", "Owner's bicycle is a blue Brompton", now=NOW)
    shown, _ = await remember(store, "fact", "Owner's sister Anna lives in Paris", now=NOW)
    # Twelve items closer to the exchange push the bicycle out of what the model is shown.
    for hobby in ("painting", "chess", "tennis", "baking", "climbing", "singing", "rowing", "poetry",
                  "pottery", "surfing", "knitting"):
        await remember(store, "fact", f"Sister Anna enjoys {hobby}", now=NOW)
    raw = json.dumps({"outdated": [unrelated.id, 12345], "updates": [{"id": 999, "text": "Nonsense"}],
                      "closed_loops": [shown.id]})
    await jobs.reflect_exchange(store, Scripted(raw), Exchange(
        user="Actually my sister Anna lives in Paris still", reply="Got it."), now=NOW)
    items = {i.id: i for i in await list_items(store)}
    assert items[unrelated.id].active and items[shown.id].active  # not shown / not an open loop
    assert len(items) == 13 and all(i.active for i in items.values())


async def test_a_corrected_fact_replaces_the_old_one_in_the_next_prompt(store: Store) -> None:
    await jobs.reflect_exchange(store, Scripted(REFLECT_PARIS), Exchange(
        user="My sister Anna lives in Paris, I want to visit her", reply="Lovely!"), now=NOW)
    fact = next(i for i in await list_items(store) if i.kind == "fact")
    correction = json.dumps({"updates": [{"id": fact.id, "text": "Anna, the owner's sister, lives in Lyon"}],
                             "observations": [{"text": "Anna the owner's sister lives in Lyon", "importance": 7}]})
    outcome = await jobs.reflect_exchange(store, Scripted(correction), Exchange(
        user="No, Anna moved to Lyon last year", reply="Thanks, noted: Lyon."), now=NOW + 60)
    assert outcome.applied.updated == [fact.id]
    block = await memory_block(store, "where does my sister Anna live?", now=NOW + 120)
    assert "Lyon" in block and "Paris" not in block
    facts = [i for i in await list_items(store, kind="fact")]
    assert len(facts) == 1  # the restated correction reinforced the rewritten item
    update = (await list_events(store, "update"))[0]
    assert update["data"]["old"].endswith("Paris") and update["data"]["new"].endswith("Lyon")


async def test_an_item_deleted_meanwhile_is_not_resurrected(store: Store) -> None:
    from actors.memory.reflection import ReinforceOp, UpdateOp
    from actors.memory.repository import delete_item

    gone, _ = await remember(store, "fact", "Owner drinks oat milk", now=NOW)
    await delete_item(store, gone.id)
    applied = await apply_ops(store, [UpdateOp(item_id=gone.id, text="x", last_used=NOW),
                                      ReinforceOp(item_id=gone.id, importance=9, last_used=NOW),
                                      InsertOp(kind="fact", text="Owner drinks soy milk", importance=5, created=NOW)],
                              "test")
    assert applied.updated == [] and applied.reinforced == [] and len(applied.inserted) == 1


async def test_playbook_grows_by_deltas(store: Store) -> None:
    old, _ = await remember(store, "playbook", "[email] Send replies quickly", now=NOW)
    raw = json.dumps({"rules": [{"domain": "email", "rule": "Draft email replies and wait for a yes",
                                 "replaces": old.id}, {"domain": "travel", "rule": "Check trains before flights"}]})
    applied = await jobs.distill_playbook(store, Scripted(raw), "Asked: answer Bob's email\nTools: send_email",
                                          session_id="s", now=NOW)
    assert applied.deactivated == [old.id] and len(applied.inserted) == 2
    rules = {i.text: i.active for i in await list_items(store, kind="playbook")}
    assert rules == {"[email] Send replies quickly": False, "[email] Draft email replies and wait for a yes": True,
                     "[travel] Check trains before flights": True}


async def test_consolidation_job_and_first_persona(store: Store) -> None:
    for text in ("Owner is Ana, a nurse", "Ana works night shifts", "Ana's brother is Leo"):
        await remember(store, "fact", text, now=NOW)
    goal, _ = await remember(store, "goal", "Sleep eight hours", now=NOW)
    persona = json.dumps({"purpose": "Help Ana rest between shifts", "voice": "calm", "address": "Ana",
                          "avoid": ["lectures"]})
    steps: list[str] = []

    async def progress(step: str) -> None:
        steps.append(step)

    complete = Scripted(json.dumps({"insights": ["Ana's schedule drives everything"], "goals": [],
                                    "retire": []}), persona)
    report = await jobs.consolidate(store, complete, now=NOW, progress=progress)
    assert steps == ["reading memory", "asking the model", "applying", "revising the persona"]
    assert report.persona == "authored" and goal.id in report.applied.deactivated
    assert (await store.get_kv("mind_persona"))["purpose"] == "Help Ana rest between shifts"
    assert [c[0] for c in complete.calls] == ["consolidation", "persona"]
    assert "Ana works night shifts" in complete.calls[0][1][1]["content"]
    block = await memory_block(store, "how should I plan my week?", now=NOW)
    assert block.startswith("## Who you are\nPurpose: Help Ana rest between shifts")


async def test_without_a_model_nothing_is_learned(store: Store) -> None:
    async def offline(messages: list[dict[str, str]], purpose: str) -> None:
        return None

    outcome = await jobs.reflect_exchange(store, offline, Exchange(user="My sister Anna lives in Paris", reply="Ok"))
    assert outcome.outcome == "no_model" and await list_items(store) == []
    assert (await jobs.consolidate(store, offline)).persona == "no_model"


async def test_health_check_sessions_stay_out_of_the_list_the_export_and_the_histogram(store: Store) -> None:
    from actors.memory.exchanges import iter_exchanges
    from actors.store.models import HEALTH_CHANNEL, ConversationRecord

    at = datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc).timestamp()
    owner, probe = ConversationRecord(id="owner1", created=at, updated=at), \
        ConversationRecord(id="probe1", channel=HEALTH_CHANNEL, created=at, updated=at + 1)
    messages = [MessageRecord(conversation_id=c, seq=s, role=r, content=f"{c} {r}", created=at + 3600 * (c == "probe1"))
                for c in ("owner1", "probe1") for s, r in ((1, "user"), (2, "assistant"))]
    await store.write_batch([owner, probe], messages)
    assert [c.id for c in await store.list_conversations()] == ["owner1"]
    assert {c.id for c in await store.list_conversations(include_health=True)} == {"owner1", "probe1"}
    assert [row.session_id async for row in iter_exchanges(store)] == ["owner1"]

    complete = Scripted("{}", "{}")
    report = await jobs.consolidate(store, complete, now=at + 7200)
    assert report.histogram[9] == 1 and sum(report.histogram) == 1  # the probe at 10:30 is not counted
