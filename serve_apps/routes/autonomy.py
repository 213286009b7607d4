"""The owner's view of the autonomy loop: its last decisions with their thoughts, the tokens it
spent today against the daily budget, and when it looks next. Read from the store (the loop's
kv record), so it answers without asking the scheduler.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from functools import lru_cache

from fastapi import APIRouter
from pydantic import BaseModel

from actors.scheduler.autonomy.state import KvState
from actors.settings import load_settings
from serve_apps.http.deps import Owner, StoreDep
from serve_apps.http.models import Page, page

router = APIRouter()


class AutonomyDecisionPublic(BaseModel):
    """One wake: what kind it was, the action, the agent's thought, what was done."""

    ts: float
    kind: str
    action: str
    thought: str
    outcome: str
    tokens: int
    next_wake: float | None = None


class AutonomyView(Page[AutonomyDecisionPublic]):
    """`data`: the last decisions, newest first; then the spend of `day` (the owner's day of the
    loop's latest wake) against the budget, and the next wake."""

    day: str
    tokens_today: int
    tokens_by_purpose: dict[str, int]
    budget: int
    next_wake: float | None
    plan: str
    consolidated_night: str


@lru_cache(maxsize=1)
def configured_budget() -> int:
    """The daily budget in force (`IRIIS_AUTONOMY_TOKENS_PER_DAY`), shown before the first wake."""
    return load_settings().iriis_autonomy_tokens_per_day


@router.get("/autonomy")
async def autonomy(_owner: Owner, store: StoreDep, limit: int = 20) -> AutonomyView:
    state = await KvState(store).load()
    today = state.day
    decisions = list(reversed(state.decisions))[:max(1, min(limit, 40))]
    return page(AutonomyView, decisions, day=today, tokens_today=state.spent, tokens_by_purpose=state.spent_by,
                budget=state.budget or configured_budget(), next_wake=state.next_wake,
                plan=state.plan if state.plan_day == today else "", consolidated_night=state.consolidated_night)
