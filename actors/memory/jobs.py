"""The learning jobs: per-turn reflection, playbook distillation, nightly consolidation and
persona authoring. Each reads memory, asks the model through `complete` (the ProviderRouter
behind it), and applies the plan in one transaction.

No Ray here: the AgentLoop deployment hands in its router-backed `complete`, tests hand in a
scripted one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel

from actors.memory.apply import Applied, apply_ops
from actors.memory.events import record_event
from actors.memory.consolidation import (
    RECENT_ITEMS, activity_histogram, consolidation_prompt, parse_consolidation, plan_consolidation)
from actors.memory.model import MindItem, Persona
from actors.memory.outside import guard_reflection, mark_inserts, owner_items
from actors.memory.persona import parse_persona, persona_prompt
from actors.memory.playbook import parse_playbook, plan_playbook, playbook_prompt
from actors.memory.reflect_prompt import Exchange, reflection_prompt
from actors.memory.reflection import find_reflection, is_trivial, plan_reflection
from actors.memory.repository import PERSONA_KV, list_items
from actors.memory.scoring import score
from actors.common.text import word_set
from actors.store import schema
from actors.store.models import HEALTH_CHANNEL
from actors.store.store import Store

log = logging.getLogger(__name__)

# (messages, purpose) -> the model's text, or None when no model is configured.
Complete = Callable[[list[dict[str, str]], str], Awaitable[str | None]]

RELATED_MEMORIES = 12
RELATED_RULES = 10
PERSONA_RETRY_SECONDS = 86400.0
PERSONA_ATTEMPT_KV = "mind_persona_attempt"
# Until this many things are known, a persona would be invented rather than fitted.
PERSONA_MIN_ITEMS = 3

Outcome = Literal["applied", "nothing_new", "unparsed", "skipped_trivial", "no_model"]


class ReflectionOutcome(BaseModel):
    outcome: Outcome
    applied: Applied = Applied()


def _related(items: list[MindItem], text: str, limit: int, now: float) -> list[MindItem]:
    words = word_set(text)
    ranked = sorted(items, key=lambda i: (-score(i, words, now), i.id))
    return ranked[:limit]


async def reflect_exchange(store: Store, complete: Complete, exchange: Exchange,
                           now: float | None = None) -> ReflectionOutcome:
    """Learn from one finished turn. Trivial turns are skipped without a model call."""
    now = now or time.time()
    if is_trivial(exchange.user, exchange.reply, exchange.tools):
        await record_event(store, "reflection", session_id=exchange.session_id,
                           data={"outcome": "skipped_trivial"})
        return ReflectionOutcome(outcome="skipped_trivial")
    active = await list_items(store, active=True, limit=5000)
    loops = [i for i in active if i.kind == "open_loop"][:8]
    others = [i for i in active if i.kind not in ("open_loop", "playbook")]
    related = _related(others, f"{exchange.user} {exchange.reply}", RELATED_MEMORIES, now)
    raw = await complete(reflection_prompt(exchange, related, loops), "reflection")
    if raw is None:
        return ReflectionOutcome(outcome="no_model")
    reflection = find_reflection(raw)
    if reflection is None:
        await record_event(store, "reflection", session_id=exchange.session_id,
                           data={"outcome": "unparsed", "raw": raw[:500]})
        return ReflectionOutcome(outcome="unparsed")
    # Only ids the model was shown may be touched: a guessed id must not retire a stranger.
    # Dedup of new notes still sees every active item.
    shown = {i.id for i in [*related, *loops]}
    reflection = reflection.model_copy(update={
        "updates": [u for u in reflection.updates if u.id in shown],
        "outdated": [i for i in reflection.outdated if i in shown],
        "closed_loops": [i for i in reflection.closed_loops if i in shown]})
    # An exchange that read outside content keeps facts about what happened, never its
    # instructions; what it keeps is marked with where it came from.
    reflection = guard_reflection(reflection, exchange.sources)
    ops = mark_inserts(plan_reflection(reflection, {i.id: i for i in active}, now), exchange.sources)
    applied = await apply_ops(store, ops, "reflection", exchange.session_id, now)
    outcome: Outcome = "applied" if applied.changed else "nothing_new"
    await record_event(store, "reflection", session_id=exchange.session_id,
                       data={"outcome": outcome, **applied.model_dump()})
    await maybe_author_persona(store, complete, now)
    return ReflectionOutcome(outcome=outcome, applied=applied)


async def distill_playbook(store: Store, complete: Complete, work: str,
                           session_id: str | None = None, now: float | None = None) -> Applied:
    """A few rules from a finished background task or work session."""
    now = now or time.time()
    rules = owner_items(await list_items(store, kind="playbook", active=True, limit=2000))
    related = _related(rules, work, RELATED_RULES, now)
    raw = await complete(playbook_prompt(work, related), "playbook")
    if raw is None:
        return Applied()
    deltas = parse_playbook(raw)
    applied = await apply_ops(store, plan_playbook(deltas, related, now), "playbook", session_id, now)
    await record_event(store, "playbook", session_id=session_id,
                       data={"rules": len(deltas), **applied.model_dump()})
    return applied


async def _owner_message_times(store: Store, since: float) -> list[float]:
    conversations, messages = schema.conversations, schema.messages
    query = (sa.select(messages.c.created)
             .join(conversations, conversations.c.id == messages.c.conversation_id)
             .where(messages.c.role == "user", messages.c.created >= since,
                    conversations.c.channel != HEALTH_CHANNEL))
    async with store.engine.connect() as conn:
        return [r[0] for r in (await conn.execute(query)).all()]


class ConsolidationReport(BaseModel):
    applied: Applied
    histogram: list[int]
    persona: Literal["authored", "revised", "unchanged", "no_model"]


async def consolidate(store: Store, complete: Complete, now: float | None = None,
                      progress: Callable[[str], Awaitable[None]] | None = None) -> ConsolidationReport:
    """The nightly job: insights, patterns, growth areas, revised goals, retirements, then a
    slight persona revision."""
    now = now or time.time()
    if progress:
        await progress("reading memory")
    # Only what the owner's own words produced is condensed into insights, patterns and goals.
    recent = owner_items(await list_items(store, active=True, limit=RECENT_ITEMS))
    goals = owner_items(await list_items(store, kind="goal", active=True, limit=100))
    histogram = activity_histogram(await _owner_message_times(store, now - 14 * 86400), now)
    if progress:
        await progress("asking the model")
    raw = await complete(consolidation_prompt(recent, goals, histogram), "consolidation")
    if raw is None:
        return ConsolidationReport(applied=Applied(), histogram=histogram, persona="no_model")
    if progress:
        await progress("applying")
    plan = plan_consolidation(parse_consolidation(raw), [*recent, *goals], now)
    applied = await apply_ops(store, plan, "consolidation", None, now)
    await record_event(store, "consolidation", data={"histogram": histogram, **applied.model_dump()})
    if progress:
        await progress("revising the persona")
    persona = await author_persona(store, complete, now, revise=True)
    return ConsolidationReport(applied=applied, histogram=histogram, persona=persona)


async def author_persona(store: Store, complete: Complete, now: float | None = None,
                         revise: bool = False) -> Literal["authored", "revised", "unchanged", "no_model"]:
    now = now or time.time()
    current_raw = await store.get_kv(PERSONA_KV)
    current = Persona(**current_raw) if current_raw else None
    if current is not None and not revise:
        return "unchanged"
    # A persona trait is never learned from outside content.
    known = [i for i in owner_items(await list_items(store, active=True, limit=300))
             if i.kind in ("fact", "person", "insight", "pattern", "goal")]
    lessons = owner_items(await list_items(store, kind="lesson", active=True, limit=10))
    raw = await complete(persona_prompt(known, current, lessons), "persona")
    if raw is None:
        return "no_model"
    persona = parse_persona(raw, current)
    if persona is None or persona == current:
        return "unchanged"
    await store.set_kv(PERSONA_KV, persona.model_dump())
    result = "revised" if current else "authored"
    await record_event(store, "persona", data={"result": result, **persona.model_dump()})
    return result


async def maybe_author_persona(store: Store, complete: Complete, now: float) -> None:
    """First run: write a persona once enough is known; retried at most daily."""
    if await store.get_kv(PERSONA_KV):
        return
    last = await store.get_kv(PERSONA_ATTEMPT_KV, 0.0)
    if now - float(last) < PERSONA_RETRY_SECONDS:
        return
    known = await list_items(store, active=True, limit=PERSONA_MIN_ITEMS)
    if len(known) < PERSONA_MIN_ITEMS:
        return
    await store.set_kv(PERSONA_ATTEMPT_KV, now)
    await author_persona(store, complete, now)
