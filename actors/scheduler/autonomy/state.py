"""What the autonomy loop remembers between wakes, in one kv record (`autonomy_state`).

The next wake, the interval the agent chose, the inputs' fingerprint, today's spend against the
budget, the day's plan, which night was consolidated, the last decisions with their thoughts and
the reach-outs of the last five days. All of it is in the store, so a restarted scheduler carries
on where it was, and `GET /v1/autonomy` reads it without asking the actor.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from actors.scheduler.autonomy.clock import DEFAULT_CHECK_MINUTES
from actors.scheduler.autonomy.situation import FEEDBACK_DAYS, ReachOut
from actors.store.store import Store

AUTONOMY_KV = "autonomy_state"
KEEP_DECISIONS = 40
KEEP_REACH_OUTS = 60


class DecisionRecord(BaseModel):
    """One wake, as the owner's view shows it."""

    ts: float
    kind: str  # decision | triaged | unchanged | rest | consolidated | budget_spent | no_model | unparsed | error
    action: str = "none"
    thought: str = ""
    outcome: str = ""
    tokens: int = 0
    next_wake: float | None = None


class AutonomyState(BaseModel):
    next_wake: float | None = None
    interval: int = DEFAULT_CHECK_MINUTES
    parts: dict[str, str] | None = None
    fingerprint: str = ""
    day: str = ""
    spent: int = 0
    spent_by: dict[str, int] = Field(default_factory=dict)
    # What is left of today's budget cannot pay for a look: no more calls until tomorrow.
    exhausted: bool = False
    budget: int = 0
    plan_day: str = ""
    plan: str = ""
    checkpoints: list[str] = Field(default_factory=list)
    consolidated_night: str = ""
    decisions: list[DecisionRecord] = Field(default_factory=list)
    reach_outs: list[ReachOut] = Field(default_factory=list)
    background: list[float] = Field(default_factory=list)

    def record(self, entry: DecisionRecord) -> None:
        self.decisions = [*self.decisions, entry][-KEEP_DECISIONS:]

    def add_reach_out(self, reach_out: ReachOut) -> None:
        since = reach_out.ts - FEEDBACK_DAYS * 86400
        self.reach_outs = [r for r in self.reach_outs if r.ts >= since][-KEEP_REACH_OUTS + 1:] + [reach_out]

    def spend(self, purpose: str, tokens: int) -> None:
        self.spent += tokens
        self.spent_by[purpose] = self.spent_by.get(purpose, 0) + tokens


class StateStore(Protocol):
    async def load(self) -> AutonomyState: ...

    async def save(self, state: AutonomyState) -> None: ...


class KvState:
    """The state in the store's kv table."""

    def __init__(self, store: Store, key: str = AUTONOMY_KV) -> None:
        self.store = store
        self.key = key

    async def load(self) -> AutonomyState:
        raw: Any = await self.store.get_kv(self.key)
        return AutonomyState.model_validate(raw) if isinstance(raw, dict) else AutonomyState()

    async def save(self, state: AutonomyState) -> None:
        await self.store.set_kv(self.key, state.model_dump(mode="json"))


class MemoryState:
    """The state in memory, for tests and the benchmark."""

    def __init__(self) -> None:
        self.state = AutonomyState()

    async def load(self) -> AutonomyState:
        return self.state.model_copy(deep=True)

    async def save(self, state: AutonomyState) -> None:
        self.state = state.model_copy(deep=True)
