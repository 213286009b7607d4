"""The autonomy loop (spec section 9), Ray-free: one `wake(now)` at a time, driven by whoever
holds the clock (the Scheduler actor in production, an injected clock in tests and the
benchmark).

Each wake:

1. A new owner's day resets the spend.
2. Rest hours (IRIIS_REST_HOURS in IRIIS_TIMEZONE): no action; the night's consolidation and
   persona revision run once (actors/memory/jobs.consolidate), then sleep on.
3. Budget spent (IRIIS_AUTONOMY_TOKENS_PER_DAY): sleep to the next day.
4. No plan for today: plan the day.
5. The cost guard: the inputs' fingerprint unchanged since the last wake means nothing happened,
   so no model call at all; changed, a cheap triage call with a small context decides whether
   the full situation is worth reading.
6. The decision (thought, action, close_loops, mood, next_check_minutes), carried out for the
   owner only, and the next wake at the chosen time clamped to 10-240 minutes (brought forward
   to the start of rest hours, so the night's consolidation runs when rest begins).

Every model call goes through `complete(messages, purpose)` (the memory jobs' signature) and is
metered in tokens (characters / 4: the project has no tokeniser of its own).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from actors.memory import jobs
from actors.memory.apply import apply_ops
from actors.memory.model import Mood
from actors.memory.reflection import DeactivateOp, SetMoodOp
from actors.scheduler.autonomy.accounts import Glance
from actors.scheduler.autonomy.actions import ActionSink, PlaceCall, StoreActions, carry_out
from actors.scheduler.autonomy.clock import MIN_CHECK_MINUTES, RestHours, clamp_minutes, local_day, next_midnight
from actors.scheduler.autonomy.decision import (
    BACKGROUND, REACH_OUTS, Decision, estimate_tokens, messages_tokens, parse_decision, parse_plan, parse_triage)
from actors.scheduler.autonomy.prompt import decision_messages, plan_messages, triage_messages
from actors.scheduler.autonomy.situation import (
    ReachOut, Situation, SituationSource, StoreSituation, changed_keys, day_start_of, fingerprint)
from actors.scheduler.autonomy.state import AutonomyState, DecisionRecord, KvState, StateStore
from actors.store.store import Store

log = logging.getLogger(__name__)

# (messages, purpose) -> the model's text, or None when no model is configured.
Complete = Callable[[list[dict[str, str]], str], Awaitable[str | None]]
# now -> a short report; runs the night's consolidation and persona revision.
Consolidate = Callable[[float], Awaitable[str]]
# (ops, now) -> None; writes close_loops and mood through memory's apply_ops.
ApplyMemory = Callable[[list[Any], float], Awaitable[None]]

# What a call may cost at most in output, reserved before it is made.
OUTPUT_RESERVE = {"plan": 200, "triage": 60, "decision": 300}


@dataclass
class AutonomyConfig:
    zone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    rest: RestHours = field(default_factory=RestHours)
    tokens_per_day: int = 50_000
    # False: every wake reads the full situation (the benchmark's baseline).
    triage: bool = True


@dataclass
class WakeResult:
    kind: str
    action: str = "none"
    tokens: int = 0
    next_wake: float = 0.0
    outcome: str = ""
    thought: str = ""
    calls: list[str] = field(default_factory=list)


class AutonomyLoop:
    def __init__(self, complete: Complete, source: SituationSource, actions: ActionSink, state: StateStore,
                 config: AutonomyConfig | None = None, consolidate: Consolidate | None = None,
                 apply_memory: ApplyMemory | None = None, clock: Callable[[], float] = time.time) -> None:
        self.complete = complete
        self.source = source
        self.actions = actions
        self.state_store = state
        self.config = config or AutonomyConfig()
        self.consolidate = consolidate
        self.apply_memory = apply_memory
        self.clock = clock

    # -- for the driver ------------------------------------------------------------------------

    async def next_wake(self) -> float:
        """When `wake` is next due. A first run waits the shortest interval (10 minutes), so
        starting a server never begins with a burst of model calls."""
        state = await self.state_store.load()
        if state.next_wake is None:
            state.next_wake = self.clock() + MIN_CHECK_MINUTES * 60
            await self.state_store.save(state)
        return state.next_wake

    async def due(self, now: float | None = None) -> bool:
        return (now if now is not None else self.clock()) >= await self.next_wake()

    # -- one wake ------------------------------------------------------------------------------

    async def wake(self, now: float | None = None) -> WakeResult:
        now = now if now is not None else self.clock()
        state = await self.state_store.load()
        state.budget = self.config.tokens_per_day
        day = local_day(now, self.config.zone)
        if state.day != day:
            state.day, state.spent, state.spent_by, state.exhausted = day, 0, {}, False
        result = WakeResult(kind="decision")
        try:
            if self.config.rest.contains(now, self.config.zone):
                await self._rest(state, now, result)
            elif state.exhausted or state.spent >= self.config.tokens_per_day:
                self._sleep_to_tomorrow(now, result)
            else:
                await self._awake(state, now, result)
        except Exception as exc:  # the loop's boundary: record, look again later, never die
            log.exception("autonomy wake failed")
            result.kind, result.outcome = "error", f"{exc.__class__.__name__}: {str(exc)[:200]}"
            result.next_wake = now + clamp_minutes(state.interval) * 60
        state.next_wake = result.next_wake
        state.record(DecisionRecord(ts=now, kind=result.kind, action=result.action, thought=result.thought,
                                    outcome=result.outcome[:300], tokens=result.tokens, next_wake=result.next_wake))
        await self.state_store.save(state)
        return result

    # -- the parts -----------------------------------------------------------------------------

    async def _call(self, state: AutonomyState, result: WakeResult, purpose: str,
                    messages: list[dict[str, str]]) -> str | None:
        """One metered model call; None when unaffordable or when there is no model."""
        cost_in = messages_tokens(messages)
        if state.spent + cost_in + OUTPUT_RESERVE.get(purpose, 200) > self.config.tokens_per_day:
            result.calls.append(f"{purpose}:unaffordable")
            state.exhausted = True
            return None
        raw = await self.complete(messages, purpose)
        if raw is None:
            result.calls.append(f"{purpose}:no_model")
            return None
        tokens = cost_in + estimate_tokens(raw)
        state.spend(purpose, tokens)
        result.tokens += tokens
        result.calls.append(purpose)
        return raw

    async def _rest(self, state: AutonomyState, now: float, result: WakeResult) -> None:
        zone, rest = self.config.zone, self.config.rest
        result.kind = "rest"
        night = rest.night_of(now, zone)
        if self.consolidate is not None and state.consolidated_night != night:
            # Marked first: a consolidation that fails is not retried every ten minutes.
            state.consolidated_night = night
            result.kind = "consolidated"
            result.outcome = await self.consolidate(now)
        end = rest.next_end(now, zone) or now + 3600
        result.next_wake = now + max(60.0, min(end - now, clamp_minutes(240) * 60))

    def _sleep_to_tomorrow(self, now: float, result: WakeResult) -> None:
        result.kind = "budget_spent"
        result.outcome = "the day's token budget is spent; sleeping to the next day"
        target = next_midnight(now, self.config.zone)
        start = self.config.rest.next_start(now, self.config.zone)
        # Rest hours still begin on time (consolidation is not autonomy's spend).
        result.next_wake = min(target, start) if start is not None else target

    async def _situation(self, state: AutonomyState, now: float) -> Situation:
        zone = self.config.zone
        day_start = day_start_of(now, zone)
        plan = state.plan if state.plan_day == state.day else ""
        checkpoints = state.checkpoints if state.plan_day == state.day else []
        situation = await self.source.read(now, zone, state.reach_outs, plan, checkpoints, day_start)
        return situation.model_copy(update={"background_today": sum(1 for t in state.background if t >= day_start)})

    async def _awake(self, state: AutonomyState, now: float, result: WakeResult) -> None:
        situation = await self._situation(state, now)
        if state.plan_day != state.day:
            raw = await self._call(state, result, "plan", plan_messages(situation))
            plan = parse_plan(raw)
            if raw is not None:
                state.plan_day = state.day
                state.plan = plan.plan if plan else ""
                state.checkpoints = plan.checkpoints if plan else []
                situation = situation.model_copy(update={"plan": state.plan, "checkpoints": state.checkpoints})
        parts = situation.fingerprint_parts()
        changed = changed_keys(state.parts, parts)
        previous = state.fingerprint
        state.parts, state.fingerprint = parts, fingerprint(parts)
        interval = state.interval
        escalate = True
        if self.config.triage:
            if previous and state.fingerprint == previous:
                result.kind, result.outcome = "unchanged", "nothing changed since the last look"
                escalate = False
            else:
                raw = await self._call(state, result, "triage",
                                       triage_messages(situation, changed, state.spent, self.config.tokens_per_day))
                triage = parse_triage(raw)
                if triage is None:
                    # No answer to go on: look properly only when the owner wrote or work finished.
                    escalate = raw is not None and bool({"owner", "events", "upcoming"} & set(changed))
                else:
                    escalate = triage.escalate
                    interval = triage.next_check_minutes
                if not escalate:
                    result.kind = "triaged"
                    result.outcome = (triage.why if triage else "") or "not worth a full look"
        if escalate:
            await self._decide(state, situation, now, result)
            interval = state.interval if result.kind == "decision" else interval
        state.interval = clamp_minutes(interval)
        self._schedule(state, now, result)

    def _schedule(self, state: AutonomyState, now: float, result: WakeResult) -> None:
        if state.exhausted or state.spent >= self.config.tokens_per_day:
            # What is left cannot pay for a look: the budget is spent for today.
            self._sleep_to_tomorrow(now, result)
            return
        target = now + state.interval * 60
        start = self.config.rest.next_start(now, self.config.zone)
        result.next_wake = min(target, start) if start is not None else target

    async def _decide(self, state: AutonomyState, situation: Situation, now: float, result: WakeResult) -> None:
        raw = await self._call(state, result, "decision", decision_messages(situation))
        if raw is None:
            result.kind = "budget_spent" if result.calls[-1].endswith("unaffordable") else "no_model"
            result.outcome = "no decision: " + result.calls[-1]
            return
        decision = parse_decision(raw)
        if decision is None:
            result.kind, result.outcome = "unparsed", raw[:200]
            return
        result.kind, result.action = "decision", decision.action
        result.thought = decision.thought
        state.interval = decision.next_check_minutes
        result.outcome = await carry_out(self.actions, decision, now)
        if decision.action in REACH_OUTS:
            state.add_reach_out(ReachOut(ts=now, action=decision.action, text=decision.message))
        elif decision.action in BACKGROUND:
            day_start = day_start_of(now, self.config.zone)
            state.background = [t for t in state.background if t >= day_start] + [now]
        await self._remember(decision, situation, now)

    async def _remember(self, decision: Decision, situation: Situation, now: float) -> None:
        """close_loops (only loops that were shown) and mood, through memory's own writer."""
        if self.apply_memory is None:
            return
        ops: list[Any] = [DeactivateOp(item_id=i, reason="closed")
                          for i in decision.close_loops if i in situation.open_loops]
        if decision.mood is not None:
            ops.append(SetMoodOp(mood=Mood(feeling=decision.mood.feeling, valence=decision.mood.valence,
                                           why=decision.mood.why, ts=now)))
        if ops:
            await self.apply_memory(ops, now)


# -- production wiring -----------------------------------------------------------------------

def autonomy_loop(store: Store, complete: Complete, *, zone: str = "UTC", rest_hours: str = "23-7",
                  tokens_per_day: int = 50_000, place_call: PlaceCall | None = None,
                  clock: Callable[[], float] = time.time, accounts: Glance | None = None) -> AutonomyLoop:
    """The loop on the store: situation, outbox and tasks, kv state, memory's nightly jobs.
    `complete` is the learning router's (actors/memory/jobs.Complete); `accounts` glances at
    the owner's mail and calendar (counts and times only)."""
    async def consolidate(now: float) -> str:
        report = await jobs.consolidate(store, complete, now)
        return (f"consolidation: {len(report.applied.inserted)} added, {len(report.applied.deactivated)} retired; "
                f"persona {report.persona}")

    async def apply_memory(ops: list[Any], now: float) -> None:
        await apply_ops(store, ops, "autonomy", None, now)

    config = AutonomyConfig(zone=ZoneInfo(zone or "UTC"), rest=RestHours.parse(rest_hours),
                            tokens_per_day=tokens_per_day)
    return AutonomyLoop(complete, StoreSituation(store, accounts), StoreActions(store, place_call), KvState(store),
                        config, consolidate=consolidate, apply_memory=apply_memory, clock=clock)


async def serve_forever(loop: AutonomyLoop, sleep: Callable[[float], Awaitable[Any]] | None = None,
                        poll: float = 60.0) -> None:
    """Wake the loop whenever it is due; for the Scheduler actor's `loops()`. Looks at the
    clock at least every `poll` seconds, so a changed clock (or a wake moved by another
    server on the same store) is noticed."""
    pause = sleep or asyncio.sleep
    while True:
        try:
            now = loop.clock()
            if await loop.due(now):
                await loop.wake(now)
            delay = await loop.next_wake() - loop.clock()
        except Exception:  # the actor's loop boundary: log, back off, carry on
            log.exception("autonomy loop failed")
            delay = poll
        await pause(max(1.0, min(poll, delay)))
