"""The autonomy loop with an injected clock and a scripted model: rest hours, the 10/240
clamps, the budget stopping it, triage not escalating when nothing changed, the owner-only
tool list, and a sloppy decision read leniently. No Ray, no server."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from actors.common.toolspec import ToolSpec
from actors.scheduler.autonomy import AutonomyConfig, AutonomyLoop, autonomy_loop
from actors.scheduler.autonomy.clock import MAX_CHECK_MINUTES, MIN_CHECK_MINUTES, RestHours, next_midnight
from actors.scheduler.autonomy.decision import parse_decision, parse_triage
from actors.scheduler.autonomy.situation import ChatLine, ReachOut, Situation
from actors.scheduler.autonomy.state import MemoryState
from actors.scheduler.owner_tools import LOOP_ACTIONS, WORK_TOOLS, OwnerOnlyTools, could_contact_others
from actors.tools.builtin import builtin_toolbox

UTC = ZoneInfo("UTC")


def at(day: int, hour: int, minute: int = 0) -> float:
    return dt.datetime(2026, 12, day, hour, minute, tzinfo=UTC).timestamp()


class ScriptedModel:
    """Answers by purpose from queues; an empty queue answers a quiet default."""

    DEFAULTS = {
        "plan": '{"plan": "Keep an eye on the owner\'s tasks.", "checkpoints": []}',
        "triage": '{"escalate": true, "why": "owner wrote", "next_check_minutes": 60}',
        "decision": '{"thought": "Nothing needs me.", "action": "none", "next_check_minutes": 90}',
    }

    def __init__(self) -> None:
        self.queues: dict[str, list[str]] = {}
        self.calls: list[str] = []

    def enqueue(self, purpose: str, *answers: str) -> None:
        self.queues.setdefault(purpose, []).extend(answers)

    async def __call__(self, messages: list[dict[str, str]], purpose: str) -> str | None:
        self.calls.append(purpose)
        queue = self.queues.get(purpose)
        return queue.pop(0) if queue else self.DEFAULTS.get(purpose, "{}")


class FakeSource:
    def __init__(self) -> None:
        self.owner: ChatLine | None = None

    def owner_writes(self, text: str, when: float) -> None:
        self.owner = ChatLine(id=f"m{when}", role="user", text=text, at=when)

    async def read(self, now: float, zone: ZoneInfo, reach_outs: Sequence[ReachOut], plan: str,
                   checkpoints: Sequence[str], day_start: float) -> Situation:
        return Situation(now=now, zone=zone.key, last_owner_message=self.owner, plan=plan,
                         checkpoints=list(checkpoints), messages=[self.owner] if self.owner else [],
                         feedback=list(reach_outs))


class FakeActions:
    def __init__(self) -> None:
        self.done: list[tuple[str, str]] = []

    async def notify_owner(self, kind: str, title: str, body: str, data: dict[str, Any]) -> str:
        self.done.append((kind, body))
        return "outbox 1"

    async def start_background(self, kind: str, title: str, goal: str, run_at: float | None, now: float) -> str:
        self.done.append((kind, goal))
        return "task 1"

    async def call_owner(self, reason: str, opening: str, now: float) -> str:
        self.done.append(("call", opening))
        return "call 1"


def make_loop(budget: int = 50_000, rest: str = "23-7", triage: bool = True):
    model, source, actions = ScriptedModel(), FakeSource(), FakeActions()
    nights: list[float] = []

    async def consolidate(now: float) -> str:
        nights.append(now)
        return "consolidated"

    loop = AutonomyLoop(model, source, actions, MemoryState(),
                        AutonomyConfig(zone=UTC, rest=RestHours.parse(rest), tokens_per_day=budget, triage=triage),
                        consolidate=consolidate)
    return loop, model, source, actions, nights


async def test_rest_hours_take_no_action_and_consolidate_once_a_night() -> None:
    loop, model, source, actions, nights = make_loop()
    source.owner_writes("are you there?", at(1, 22, 50))
    first = await loop.wake(at(1, 23, 5))
    assert first.kind == "consolidated" and nights == [at(1, 23, 5)]
    again = await loop.wake(at(2, 2, 0))
    assert again.kind == "rest" and nights == [at(1, 23, 5)]
    assert model.calls == [] and actions.done == []
    # Asleep until rest ends at 07:00, never more than 240 minutes at a time.
    assert again.next_wake == at(2, 6, 0)
    last = await loop.wake(at(2, 6, 0))
    assert last.next_wake == at(2, 7, 0)
    # The next night consolidates again.
    await loop.wake(at(2, 23, 0))
    assert nights == [at(1, 23, 5), at(2, 23, 0)]


async def test_the_next_wake_is_brought_forward_to_the_start_of_rest() -> None:
    loop, model, source, *_ = make_loop()
    model.enqueue("decision", '{"thought": "quiet", "action": "none", "next_check_minutes": 240}')
    result = await loop.wake(at(1, 21, 30))
    assert result.next_wake == at(1, 23, 0)


@pytest.mark.parametrize(("chosen", "minutes"), [(1, MIN_CHECK_MINUTES), (0, MIN_CHECK_MINUTES),
                                                 (-5, MIN_CHECK_MINUTES), (10_000, MAX_CHECK_MINUTES),
                                                 ('"45"', 45), ('"soon"', 60)])
async def test_next_check_minutes_is_clamped_to_10_and_240(chosen: object, minutes: int) -> None:
    loop, model, *_ = make_loop()
    model.enqueue("decision", f'{{"thought": "t", "action": "none", "next_check_minutes": {chosen}}}')
    now = at(1, 9, 0)
    result = await loop.wake(now)
    assert result.kind == "decision"
    assert result.next_wake == now + minutes * 60


async def test_an_unchanged_situation_is_not_escalated_and_costs_nothing() -> None:
    loop, model, source, actions, _ = make_loop()
    source.owner_writes("remind me about the plumber", at(1, 8, 0))
    model.enqueue("decision", '{"thought": "wait", "action": "none", "next_check_minutes": 30}')
    first = await loop.wake(at(1, 9, 0))
    assert model.calls == ["plan", "triage", "decision"] and first.tokens > 0
    second = await loop.wake(first.next_wake)
    assert second.kind == "unchanged" and second.tokens == 0
    assert model.calls == ["plan", "triage", "decision"]
    # It keeps the interval the agent chose last time.
    assert second.next_wake == first.next_wake + 30 * 60
    # Something changes: the triage looks, and it may decline the full situation.
    source.owner_writes("thanks, done", second.next_wake - 60)
    model.enqueue("triage", '{"escalate": false, "why": "just thanks", "next_check_minutes": 120}')
    third = await loop.wake(second.next_wake)
    assert third.kind == "triaged" and model.calls[-1] == "triage"
    assert "decision" not in model.calls[3:]
    assert third.next_wake == second.next_wake + 120 * 60
    assert actions.done == []


async def test_the_budget_stops_the_loop_until_the_next_day() -> None:
    loop, model, source, actions, _ = make_loop(budget=1500, rest="")
    now = at(1, 9, 0)
    kinds = []
    for i in range(12):
        source.owner_writes(f"message {i}", now - 1)  # always something new
        result = await loop.wake(now)
        kinds.append(result.kind)
        if result.kind == "budget_spent":
            break
        now = result.next_wake
    assert kinds[-1] == "budget_spent"
    calls = len(model.calls)
    state = await loop.state_store.load()
    assert state.spent <= 1500
    assert result.next_wake == next_midnight(now, UTC)
    # Woken early anyway: still spent, still no call.
    source.owner_writes("hello?", now + 60)
    again = await loop.wake(now + 120)
    assert again.kind == "budget_spent" and len(model.calls) == calls
    # The next day the budget is fresh.
    source.owner_writes("good morning", at(2, 8, 59))
    fresh = await loop.wake(at(2, 9, 0))
    assert fresh.tokens > 0 and fresh.kind != "budget_spent"


async def test_a_message_decision_reaches_the_owner_and_feeds_the_feedback_line() -> None:
    loop, model, source, actions, _ = make_loop()
    source.owner_writes("I have an exam on Friday", at(1, 8, 0))
    model.enqueue("decision", '{"thought": "Offer help.", "action": "message", "message": "Want a revision plan?",'
                              ' "next_check_minutes": 60}')
    result = await loop.wake(at(1, 9, 0))
    assert result.action == "message" and actions.done == [("autonomy_message", "Want a revision plan?")]
    state = await loop.state_store.load()
    assert [r.text for r in state.reach_outs] == ["Want a revision plan?"]
    assert state.decisions[-1].thought == "Offer help."


def test_a_sloppy_decision_is_read_leniently() -> None:
    raw = """Sure! Here is my decision:
```json
{'thought': 'The owner asked about the "plumber" yesterday', 'Action': 'Message',
 'message': 'Shall I remind you to call the plumber at 5?', 'closeLoops': ['#12', 7, 'x'],
 'mood': {'feeling': 'attentive', 'valence': '0.4'}, 'nextCheckMinutes': '15', 'urgent': None,}
```"""
    decision = parse_decision(raw)
    assert decision is not None
    assert decision.action == "message"
    assert decision.message.startswith("Shall I remind you")
    assert decision.close_loops == [12, 7]
    assert decision.mood is not None and decision.mood.feeling == "attentive" and decision.mood.valence == 0.4
    assert decision.next_check_minutes == 15
    # Cut off mid-answer: the start still counts.
    cut = parse_decision('{"thought": "later", "action": "none", "next_check_minutes": 500')
    assert cut is not None and cut.next_check_minutes == MAX_CHECK_MINUTES
    # A message with no text reaches no one; no object at all is no decision.
    assert parse_decision('{"action": "message"}').action == "none"  # type: ignore[union-attr]
    assert parse_decision("I think I'll wait.") is None
    assert parse_triage("{escalate: 'yes'}") is None or parse_triage('{"escalate": "yes"}').escalate  # type: ignore[union-attr]


# -- owner only, by construction -------------------------------------------------------------

async def _every_configured_tool() -> dict[str, ToolSpec]:
    """Every tool of every server in mcp.yaml (listed in-process), the built-ins, and a
    device that offers to send: what a hub listing could ever hold."""
    from actors.tools.servers import calendar, core, files, mail, memory, relay, selfinfo, studio, web

    servers = {"core": core.create_server({}), "memory": memory.mcp, "files": files.mcp, "studio": studio.mcp,
               "relay": relay.mcp, "self": selfinfo.create_server({}),
               "web": web.create_server({"IRIIS_SEARCH_URL": "http://search.invalid", "IRIIS_SEARCH_KEY": "k"}),
               # The owner's accounts, configured (nothing is dialled to list their tools).
               "mail": mail.create_server({"IRIIS_MAIL_IMAP_HOST": "imap.example.org",
                                           "IRIIS_MAIL_SMTP_HOST": "smtp.example.org",
                                           "IRIIS_MAIL_USER": "me@example.org", "IRIIS_MAIL_PASSWORD": "p"}),
               "calendar": calendar.create_server({"IRIIS_CALDAV_URL": "https://dav.example.org/",
                                                   "IRIIS_CALDAV_USER": "me", "IRIIS_CALDAV_PASSWORD": "p"})}
    specs: dict[str, ToolSpec] = {}
    for server, mcp in servers.items():
        for tool in await mcp.list_tools():
            name = tool.name if tool.name not in specs else f"{server}__{tool.name}"
            specs[name] = ToolSpec(name=name, description=tool.description or "", parameters={}, source=server)
    for name, description in [("send_sms", "Send a text message"), ("email_send", "Send an email"),
                              ("fetch_url", "a device's own fetch that could post anywhere")]:
        specs[f"phone__{name}"] = ToolSpec(name=f"phone__{name}", description=description, parameters={},
                                           source="phone")
    return specs


async def test_every_tool_the_loop_can_reach_addresses_only_the_owner(tmp_path: Path) -> None:
    listing = await _every_configured_tool()
    builtin = builtin_toolbox(None, tmp_path)
    everything = {**{n: s.model_copy(update={"source": "builtin"}) for n, s in builtin.specs.items()}, **listing}
    # The tripwire sees the dangerous ones in what the hub could list...
    dangerous = {n for n, s in everything.items() if could_contact_others(s)}
    assert {"post", "put", "host", "join", "notify_owner", "run_shell", "phone__send_sms", "send_mail",
            "draft_mail", "invite"} <= dangerous

    async def hub_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"text": f"ran {name}"}

    box = OwnerOnlyTools(builtin, hub_call).toolbox(listing)
    reachable = set(box.specs)
    # ...and none of them is in what the loop's work sessions get.
    assert [n for n in reachable if could_contact_others(box.specs[n])] == []
    allowed = {(server, tool) for server, tools in WORK_TOOLS.items() for tool in tools}
    assert {(s.source, s.name.split("__")[-1]) for s in box.specs.values()} <= allowed
    assert reachable == {"fetch_url", "link_preview", "web_search", "inspect_file", "list_files", "make_chart",
                         "make_pdf", "make_word", "make_slides", "make_spreadsheet", "read_file", "save_note"}
    # A model naming a tool it was not given gets a refusal, not the tool.
    refused = await box.execute("post", {"text": "hi"})
    assert not refused.ok
    # The loop's own actions: the outbox, background rows, the owner's call hook.
    assert set(LOOP_ACTIONS) == {"owner_notification", "owner_call", "background_row"}


# -- on the store ------------------------------------------------------------------------------

async def test_on_the_store_a_decision_writes_outbox_tasks_loops_and_mood(tmp_path: Path) -> None:
    from actors.memory.repository import get_item, remember
    from actors.scheduler import tasks
    from actors.scheduler.autonomy.actions import is_autonomy_task
    from actors.store.migrate import migrate
    from actors.store.store import Store

    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'a.sqlite3'}")
    await migrate(store)
    try:
        loop_item, _ = await remember(store, "open_loop", "need to book the dentist")
        model = ScriptedModel()
        model.enqueue("decision",
                      '{"thought": "Book it in the background.", "action": "task", "title": "Dentist options",'
                      f' "goal": "Find three dentists near home", "close_loops": [{loop_item.id}, 999],'
                      ' "mood": {"feeling": "helpful", "valence": 0.5, "why": "progress"}, "next_check_minutes": 30}',
                      '{"thought": "Tell them.", "action": "message", "message": "I found three dentists.",'
                      ' "next_check_minutes": 60}')
        now = at(1, 9, 0)
        loop = autonomy_loop(store, model, zone="UTC", rest_hours="23-7", tokens_per_day=50_000, clock=lambda: now)
        # A first run waits ten minutes before its first look.
        assert not await loop.due(now) and await loop.due(now + 600)
        first = await loop.wake(now)
        assert first.action == "task"
        rows = await tasks.list_tasks(store)
        assert [r.title for r in rows] == ["Dentist options"] and await is_autonomy_task(store, rows[0].id)
        assert (await get_item(store, loop_item.id)).active is False  # type: ignore[union-attr]
        assert (await store.get_kv("mind_mood"))["feeling"] == "helpful"
        # The new row is upcoming: a change, so the next wake looks again.
        second = await loop.wake(first.next_wake)
        assert second.action == "message"
        outbox = await store.list_outbox()
        assert [(o.kind, o.body) for o in outbox] == [("autonomy_message", "I found three dentists.")]
        state = await loop.state_store.load()
        assert state.spent > 0 and state.decisions[-1].thought == "Tell them."
    finally:
        await store.close()
