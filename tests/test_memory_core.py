"""Memory core: tokenisation, the score formula, dedup, secret refusal, per-prompt selection,
rendering of the memory block, and reflection parsing and planning. All pure; time is passed
in as `now`, never read from a clock."""

from __future__ import annotations

import math

import pytest

from actors.memory.dedup import DUPLICATE_OVERLAP, Insert, Reinforce, decide_insert
from actors.memory.model import MindItem, Mood, Persona
from actors.memory.prompt import MOOD_TTL_SECONDS, current_mood, render_memory_block
from actors.memory.reflection import (
    DeactivateOp, InsertOp, ReinforceOp, Reflection, SetMoodOp, UpdateOp, is_trivial, parse_reflection,
    plan_reflection)
from actors.memory.scoring import jaccard, score
from actors.memory.secrets import looks_secret
from actors.memory.select import (
    MAX_LESSONS, MAX_MEMORIES, MAX_OPEN_LOOPS, MAX_PEOPLE, MAX_PLAYBOOK, MAX_SKILLS, Selection, select)
from actors.common.text import stem, tokenize, words

HOUR = 3600.0
NOW = 1_000_000.0


def _item(item_id: int, kind: str, text: str, importance: float = 5.0, *, active: bool = True,
          created: float = NOW, last_used: float | None = None) -> MindItem:
    return MindItem.model_validate({"id": item_id, "kind": kind, "text": text, "importance": importance,
                                    "active": active, "created": created, "last_used": last_used})


# ---- tokenisation ----------------------------------------------------------------------------

@pytest.mark.parametrize("forms", [
    ("write", "writing", "writer", "writes", "writers", "wrote"),
    ("coffee", "coffees"),
    ("party", "parties"),
    ("schedule", "scheduled", "scheduling"),
    ("plan", "planned", "planning", "planner"),
    ("quick", "quickly"),
    ("pay", "payment", "payments", "paid"),
    ("kind", "kindness"),
    ("owner", "owners"),
])
def test_forms_of_a_word_share_a_stem(forms: tuple[str, ...]) -> None:
    assert len({stem(w) for w in forms}) == 1


def test_words_are_lowercase_content_words_of_three_or_more_characters() -> None:
    assert words("The owner's Sister is called ANNA, ok? We go to NYC") == {"own", "sist", "cal", "anna", "nyc"}
    # Short words ("ok", "go") and grammar ("the", "is", "we", "to") carry nothing.
    assert words("it is ok to go") == set()


def test_memory_keeps_the_verbs_routing_treats_as_noise() -> None:
    # "like" and "need" are what these memories are about.
    assert "lik" in words("The owner likes jazz")
    assert "need" in words("Need to call the plumber")


def test_tokenize_keeps_order_and_repeats() -> None:
    assert tokenize("Writing, then writers write") == ["writ", "writ", "writ"]


# ---- score ---------------------------------------------------------------------------------

def test_score_formula_with_exact_numbers() -> None:
    # Item words: own, writ, poem, daili (4). Query words: writ, poem, tonight. Overlap 2.
    item = _item(1, "fact", "Owner writes poems daily", importance=5, created=NOW - 100 * HOUR,
                 last_used=NOW - 10 * HOUR)
    recency = 0.995 ** 10                           # 0.95111013...
    importance = 5 / 10                             # 0.5
    relevance = 1.6 * min(1.0, 2 / math.sqrt(4 + 1))  # 1.6 * 0.89442719 = 1.43108351
    assert score(item, "writing a poem tonight", NOW) == pytest.approx(recency + importance + relevance, abs=1e-12)
    assert score(item, "writing a poem tonight", NOW) == pytest.approx(2.8821936361, abs=1e-9)


def test_score_uses_created_when_never_used_and_caps_relevance() -> None:
    # Two item words, both in the query: 2 / sqrt(3) > 1, so relevance is capped at 1.6.
    item = _item(2, "fact", "jazz records", importance=8, created=NOW - 20 * HOUR, last_used=None)
    assert score(item, "play jazz records", NOW) == pytest.approx(0.995 ** 20 + 0.8 + 1.6, abs=1e-12)
    # No overlap: only recency and importance.
    assert score(item, "weather", NOW) == pytest.approx(0.995 ** 20 + 0.8, abs=1e-12)


def test_score_of_a_future_timestamp_counts_as_now() -> None:
    item = _item(3, "fact", "jazz", importance=0, created=NOW + 5 * HOUR)
    assert score(item, "", NOW) == pytest.approx(1.0)


def test_jaccard() -> None:
    assert jaccard({"a", "b", "c"}, {"b", "c", "d"}) == pytest.approx(2 / 4)
    assert jaccard(set(), set()) == 0.0


# ---- dedup ---------------------------------------------------------------------------------

EXISTING_TEXT = "alpha bravo charlie delta echo"


@pytest.mark.parametrize(("new_text", "overlap", "duplicate"), [
    ("alpha bravo charlie delta", 4 / 5, True),           # over 0.75
    ("alpha bravo charlie", 3 / 5, False),                # under
    ("alpha bravo charlie echo foxtrot", 4 / 6, False),   # under
])
def test_dedup_threshold(new_text: str, overlap: float, duplicate: bool) -> None:
    existing = [_item(7, "fact", EXISTING_TEXT, importance=4)]
    assert jaccard(words(new_text), words(EXISTING_TEXT)) == pytest.approx(overlap)
    decision = decide_insert("fact", new_text, 6, existing)
    assert isinstance(decision, Reinforce if duplicate else Insert)


def test_exactly_three_quarters_is_not_a_duplicate() -> None:
    existing = [_item(7, "fact", "alpha bravo charlie delta")]
    assert jaccard(words("alpha bravo charlie"), words("alpha bravo charlie delta")) == DUPLICATE_OVERLAP
    assert decide_insert("fact", "alpha bravo charlie", 5, existing) == Insert(
        kind="fact", text="alpha bravo charlie", importance=5)


def test_reinforce_raises_importance_up_to_the_cap() -> None:
    existing = [_item(7, "fact", EXISTING_TEXT, importance=4)]
    assert decide_insert("fact", EXISTING_TEXT, 6, existing) == Reinforce(item_id=7, new_importance=7)
    strong = [_item(7, "fact", EXISTING_TEXT, importance=9.5)]
    assert decide_insert("fact", EXISTING_TEXT, 3, strong) == Reinforce(item_id=7, new_importance=10)


def test_only_active_items_of_the_same_kind_are_reinforced() -> None:
    assert isinstance(decide_insert("fact", EXISTING_TEXT, 5, [_item(7, "lesson", EXISTING_TEXT)]), Insert)
    assert isinstance(decide_insert("fact", EXISTING_TEXT, 5, [_item(7, "fact", EXISTING_TEXT, active=False)]),
                      Insert)


def test_dedup_picks_the_closest_item() -> None:
    existing = [_item(1, "fact", "alpha bravo charlie delta echo foxtrot"), _item(2, "fact", EXISTING_TEXT)]
    decision = decide_insert("fact", EXISTING_TEXT, 5, existing)
    assert isinstance(decision, Reinforce) and decision.item_id == 2


# ---- secrets -------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "my password is hunter2",
    "Password: swordfish",
    "the password for gmail is swordfish",
    "The wifi password is 'correct horse'",
    "PIN 4821",
    "My bank PIN is 4821.",
    "the door code is 1234",
    "1234 is the gate code",
    "api key sk-abc123def456ghi789",
    "my token is ghp_abcdefghijklmnopqrstuv",
    "Authorization: Bearer abc.def.ghi",
    "use bearer token abcdef123456",
    "card 4111 1111 1111 1111",
])
def test_secret_text_is_recognised(text: str) -> None:
    assert looks_secret(text)


@pytest.mark.parametrize("text", [
    "the key to success is patience",
    "the key is patience",
    "I keep my keys in the bowl",
    "pin the poster on the wall",
    "The wifi password is on the router sticker",
    "The owner uses a password manager",
    "Her phone number is 0151 234 5678",
    "zip code 90210",
    "a token of appreciation",
    "The secret to good bread is time",
    "The owner's sister is called Anna",
])
def test_ordinary_text_is_not_secret(text: str) -> None:
    assert not looks_secret(text)


# ---- selection -----------------------------------------------------------------------------

def test_selection_caps_each_group_and_ranks_by_score() -> None:
    items: list[MindItem] = []
    next_id = iter(range(1, 1000))
    for kind, count in (("fact", 6), ("insight", 5), ("pattern", 5), ("person", 7), ("lesson", 9),
                        ("skill", 5), ("open_loop", 11), ("goal", 10)):
        # Importance rises with i, so the best are the last ones made.
        items += [_item(next(next_id), kind, f"{kind} note {i}", importance=i % 10) for i in range(count)]
    selection = select(items, "unrelated query", NOW)

    assert len(selection.memories) == MAX_MEMORIES == 12
    assert {item.kind for item in selection.memories} <= {"fact", "insight", "pattern"}
    assert len(selection.people) == MAX_PEOPLE == 5
    assert len(selection.lessons) == MAX_LESSONS == 6
    assert len(selection.skills) == MAX_SKILLS == 3
    assert len(selection.open_loops) == MAX_OPEN_LOOPS == 8
    assert len(selection.goals) == 10  # all goals
    for group in (selection.memories, selection.people, selection.lessons, selection.open_loops):
        scores = [score(item, "unrelated query", NOW) for item in group]
        assert scores == sorted(scores, reverse=True)
    assert [item.importance for item in selection.people] == [6, 5, 4, 3, 2]


def test_playbook_rules_must_share_a_word_with_the_query() -> None:
    rules = [_item(i, "playbook", f"When writing emails keep them short, variant {i}", importance=1)
             for i in range(1, 11)]
    off_topic = _item(50, "playbook", "Check the train times before travelling", importance=10)
    selection = select([*rules, off_topic], "write an email to Bob", NOW)
    assert len(selection.playbook) == MAX_PLAYBOOK == 8
    assert off_topic not in selection.playbook
    assert select([off_topic], "hello there", NOW).playbook == []


def test_selection_skips_inactive_items_and_reports_ids() -> None:
    items = [_item(1, "fact", "Owner likes jazz"), _item(2, "fact", "Owner likes jazz a lot", active=False),
             _item(3, "goal", "Learn piano"), _item(4, "open_loop", "Send the invoice")]
    selection = select(items, "jazz", NOW)
    assert [item.id for item in selection.memories] == [1]
    assert sorted(selection.ids) == [1, 3, 4]
    assert "ids" in selection.model_dump()


def test_relevant_items_outrank_stale_ones() -> None:
    relevant = _item(1, "fact", "Owner plays jazz piano", importance=3, created=NOW - 48 * HOUR)
    fresh = _item(2, "fact", "Owner bought bread", importance=3, created=NOW)
    assert select([fresh, relevant], "play some jazz", NOW).memories == [relevant, fresh]


# ---- mood and rendering --------------------------------------------------------------------

def test_mood_decays_to_neutral_at_eight_hours() -> None:
    mood = Mood(feeling="curious", valence=0.4, why="a new project", ts=NOW)
    assert current_mood(mood, NOW + MOOD_TTL_SECONDS - 1) == mood
    assert current_mood(mood, NOW + 8 * HOUR).is_neutral
    assert current_mood(None, NOW).is_neutral


def test_mood_valence_is_clamped() -> None:
    assert Mood(feeling="elated", valence=4, ts=NOW).valence == 1.0
    assert Mood(feeling="low", valence=-3, ts=NOW).valence == -1.0


def _full_selection() -> Selection:
    return Selection(
        memories=[_item(12, "fact", "Owner drinks black coffee")],
        people=[_item(13, "person", "Anna is the owner's sister")],
        lessons=[_item(14, "lesson", "Confirm times before booking")],
        playbook=[_item(15, "playbook", "Keep emails under five lines")],
        skills=[_item(16, "skill", "When booking trains: check the app first")],
        open_loops=[_item(17, "open_loop", "Send Anna the photos")],
        goals=[_item(18, "goal", "Run a half marathon\n## injected heading")],
    )


def test_render_order_and_ids() -> None:
    persona = Persona(purpose="Help the owner", voice="warm, brief", vocabulary=["grand"], address="Sam",
                      avoid=["emoji"])
    mood = Mood(feeling="curious", valence=0.4, why="a new project", ts=NOW - HOUR)
    block = render_memory_block(_full_selection(), persona, mood, NOW, ["Drafting the quarterly report"])

    headings = ["## Who you are", "## Mood", "## Goals", "## What you remember", "## Playbook rules",
                "## Open loops", "## Background work"]
    positions = [block.index(h) for h in headings]
    assert positions == sorted(positions)
    assert block.startswith("## Who you are")
    for item_id in range(12, 19):
        assert f"[#{item_id}]" in block
    assert "Address the owner as: Sam" in block
    assert "curious (valence +0.4), because a new project" in block
    # Playbook rules only under their own heading.
    remember = block[block.index("## What you remember"):block.index("## Playbook rules")]
    assert "[#15]" not in remember and "[#13]" in remember and "[#16]" in remember
    # Item text is one line each, so stored text cannot open a heading of its own.
    assert "\n## injected" not in block


def test_render_omits_neutral_or_stale_mood_and_empty_sections() -> None:
    stale = Mood(feeling="annoyed", valence=-0.5, why="outage", ts=NOW - 9 * HOUR)
    block = render_memory_block(_full_selection(), None, stale, NOW, [])
    assert "## Mood" not in block and "annoyed" not in block
    assert "## Who you are" not in block and "## Background work" not in block
    neutral = Mood(feeling="neutral", valence=0.0, ts=NOW)
    assert "## Mood" not in render_memory_block(Selection(), None, neutral, NOW, [])
    assert render_memory_block(Selection(), None, None, NOW, []) == ""


# ---- reflection parsing --------------------------------------------------------------------

@pytest.mark.parametrize("raw", ["", "junk", "I have nothing to add.", "[1, 2, 3]", "{not json at all}",
                                 "{" * 5000, '{"observations": 5, "mood": "happy", "skill": [1]}', "null"])
def test_junk_parses_to_an_empty_reflection(raw: str) -> None:
    assert parse_reflection(raw) == Reflection()


def test_parse_json_in_prose_and_fences_with_slips() -> None:
    raw = """Here is my reflection:
```json
{'observations': [{'text': 'Owner likes jazz', 'importance': '8'},
                  {'text': 'Owner hates mornings', 'importance': 42},
                  {'text': '', 'importance': 3},],
 'lesson': null,
 'closed_loops': ['#4', 5, true, 'five'],
 'mood': {'feeling': 'glad', 'valence': 3, 'why': 'owner laughed'},}
```
Hope that helps!"""
    reflection = parse_reflection(raw)
    assert [(n.text, n.importance) for n in reflection.observations] == [
        ("Owner likes jazz", 8.0), ("Owner hates mornings", 10.0)]
    assert reflection.lesson == ""
    assert reflection.closed_loops == [4, 5]
    assert reflection.mood is not None and reflection.mood.valence == 1.0
    assert reflection.people == [] and reflection.updates == [] and reflection.skill is None


def test_parse_partial_and_truncated_answers() -> None:
    reflection = parse_reflection('Sure. {"people": [{"text": "Bob is a colleague", "importance": 0}], '
                                  '"open_loops": ["Call Bob back"')
    assert [(n.text, n.importance) for n in reflection.people] == [("Bob is a colleague", 1.0)]
    assert reflection.open_loops == ["Call Bob back"]
    assert reflection.observations == [] and reflection.mood is None


def test_parse_skill_updates_and_mood_shapes() -> None:
    reflection = parse_reflection(
        '{"skill": {"when": "booking trains", "how": "check the app"}, '
        '"updates": [{"id": "12", "text": "new"}, {"id": "x", "text": "bad"}, {"text": "no id"}], '
        '"outdated": 3, "mood": {"feeling": "", "valence": 0.2}}')
    assert reflection.skill is not None and reflection.skill.when == "booking trains"
    assert [(u.id, u.text) for u in reflection.updates] == [(12, "new")]
    assert reflection.outdated == [3]
    assert reflection.mood is None  # no feeling, no mood


# ---- reflection planning -------------------------------------------------------------------

def _existing(*items: MindItem) -> dict[int, MindItem]:
    return {item.id: item for item in items}


def test_correction_rewrites_the_item_instead_of_adding_a_contradiction() -> None:
    existing = _existing(_item(12, "person", "The owner's sister is called Anna", created=NOW - 50 * HOUR))
    raw = ('{"updates": [{"id": 12, "text": "The owner\'s sister is called Hannah"}], '
           '"people": [{"text": "The owner\'s sister is called Hannah", "importance": 7}]}')
    ops = plan_reflection(parse_reflection(raw), existing, NOW)
    assert ops[0] == UpdateOp(item_id=12, text="The owner's sister is called Hannah", last_used=NOW)
    # The restated fact reinforces the rewritten item; nothing new is inserted.
    assert not [op for op in ops if isinstance(op, InsertOp)]
    assert [op for op in ops if isinstance(op, ReinforceOp)] == [ReinforceOp(item_id=12, importance=8, last_used=NOW)]


def test_unknown_or_mistyped_ids_are_never_applied() -> None:
    existing = _existing(_item(1, "fact", "Owner lives in Leeds"), _item(2, "open_loop", "Send the invoice"),
                         _item(3, "fact", "Owner had a cold", active=False))
    reflection = parse_reflection(
        '{"updates": [{"id": 99, "text": "ghost"}, {"id": 3, "text": "Owner is well"}], '
        '"outdated": [42, 3], "closed_loops": [1, 77, 2]}')
    ops = plan_reflection(reflection, existing, NOW)
    # Only loop 2 closes: 1 is a fact, 77 does not exist, 3 is already inactive.
    assert ops == [DeactivateOp(item_id=2, reason="closed")]


def test_outdated_wins_over_an_update_of_the_same_item() -> None:
    existing = _existing(_item(1, "fact", "Owner lives in Leeds"))
    reflection = parse_reflection('{"outdated": [1], "updates": [{"id": 1, "text": "Owner lives in York"}]}')
    assert plan_reflection(reflection, existing, NOW) == [DeactivateOp(item_id=1, reason="outdated")]


def test_secret_texts_are_dropped_from_the_plan() -> None:
    existing = _existing(_item(1, "fact", "Owner uses online banking"))
    reflection = parse_reflection(
        '{"observations": [{"text": "The owner\'s password is hunter2", "importance": 9}, '
        '{"text": "Owner banks with Monzo", "importance": 4}], '
        '"updates": [{"id": 1, "text": "Owner banking PIN 4821"}], "open_loops": ["the door code is 1234"]}')
    ops = plan_reflection(reflection, existing, NOW)
    assert ops == [InsertOp(kind="fact", text="Owner banks with Monzo", importance=4, created=NOW)]


def test_plan_dedups_against_memory_and_within_itself() -> None:
    existing = _existing(_item(5, "fact", "Owner drinks black coffee every morning", importance=5),
                         _item(6, "open_loop", "Book the dentist appointment"))
    reflection = Reflection.model_validate({
        "observations": [{"text": "Owner drinks black coffee every morning", "importance": 6},
                         {"text": "Owner is training for a marathon", "importance": 6},
                         {"text": "Owner is training for a marathon!", "importance": 7}],
        "lesson": "Confirm dates before booking",
        "skill": {"when": "booking trains", "how": "check the app first"},
        "open_loops": ["Book the dentist appointment", "Send Anna the photos"],
        "closed_loops": [6],
        "mood": {"feeling": "curious", "valence": 0.3, "why": "new project"},
    })
    ops = plan_reflection(reflection, existing, NOW)
    assert ops == [
        DeactivateOp(item_id=6, reason="closed"),
        ReinforceOp(item_id=5, importance=7, last_used=NOW),
        InsertOp(kind="fact", text="Owner is training for a marathon", importance=8, created=NOW),
        InsertOp(kind="lesson", text="Confirm dates before booking", importance=6, created=NOW),
        InsertOp(kind="skill", text="When booking trains: check the app first", importance=6, created=NOW),
        # The closed loop no longer counts, so restating it opens a new one.
        InsertOp(kind="open_loop", text="Book the dentist appointment", importance=5, created=NOW),
        InsertOp(kind="open_loop", text="Send Anna the photos", importance=5, created=NOW),
        SetMoodOp(mood=Mood(feeling="curious", valence=0.3, why="new project", ts=NOW)),
    ]


def test_empty_reflection_plans_nothing() -> None:
    assert plan_reflection(parse_reflection("no json here"), {}, NOW) == []


# ---- trivial turns -------------------------------------------------------------------------

@pytest.mark.parametrize(("user_text", "reply", "tool_calls", "trivial"), [
    ("thanks!", "You're welcome.", [], True),
    ("good morning", "Morning! Coffee?", [], True),
    ("what time is it", "It's 10:42.", [{"name": "time"}], False),
    ("no, Tuesday", "Sorry, Tuesday it is.", [], False),
    ("wrong one", "Which did you mean?", [], False),
    ("actually make it 5", "Done: 5.", [], False),
    ("that's not it", "Let me look again.", [], False),
    ("I said Leeds", "Leeds, noted.", [], False),
    ("correction: Hannah", "Got it, Hannah.", [], False),
    ("my sister is Hannah", "Nice to know.", [], False),
    ("ok do it", "I'll draft it tonight.", [], False),
    ("Can you help me compare these three mortgage offers in detail?", "Sure...", [], False),
])
def test_is_trivial(user_text: str, reply: str, tool_calls: list[object], trivial: bool) -> None:
    assert is_trivial(user_text, reply, tool_calls) is trivial
