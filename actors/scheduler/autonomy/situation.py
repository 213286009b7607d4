"""The situation the autonomy loop decides from (spec section 9), its fingerprint, and the two
renderings: the full one for the decision and the small one for the triage.

`Situation` is plain data; `StoreSituation` reads it from the store (tables that other issues
bring, such as `tasks` and `calls`, are read when they exist and skipped when they do not).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from pydantic import BaseModel, Field

from actors.memory.model import MOOD_KV, PERSONA_KV, Mood, Persona
from actors.memory.prompt import current_mood, render_memory_block
from actors.memory.repository import list_items
from actors.memory.select import select
from actors.scheduler.autonomy.accounts import AccountsGlance, Glance
from actors.scheduler.autonomy.clock import local, local_day
from actors.store import schema
from actors.store.models import HEALTH_CHANNEL
from actors.store.store import Store

log = logging.getLogger(__name__)

FEEDBACK_DAYS = 5
ANSWERED_WITHIN = 2 * 3600.0
LAST_MESSAGES = 12
LINE_CAP = 300
MEMORY_CAP = 4000
GLANCE_SECONDS = 30.0


class ChatLine(BaseModel):
    id: str
    role: str
    text: str
    at: float


class Upcoming(BaseModel):
    kind: str  # "task", "reminder", "call"
    id: str
    title: str
    at: float | None = None
    status: str = ""


class Event(BaseModel):
    kind: str  # "task_done", "task_failed", "missed_call"
    id: str
    text: str
    at: float


class ReachOut(BaseModel):
    """One of the loop's own reach-outs, and how many seconds the owner took to answer (None:
    not within two hours)."""

    ts: float
    action: str
    text: str
    answered_after: float | None = None


class Situation(BaseModel):
    now: float
    zone: str = "UTC"
    last_owner_message: ChatLine | None = None
    owner_messages_today: int = 0
    reach_outs_today: int = 0
    background_today: int = 0
    goals: list[str] = Field(default_factory=list)
    open_loops: list[int] = Field(default_factory=list)
    mood: str = "neutral"
    persona_hash: str = ""
    memory_block: str = ""
    plan: str = ""
    checkpoints: list[str] = Field(default_factory=list)
    upcoming: list[Upcoming] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    feedback: list[ReachOut] = Field(default_factory=list)
    messages: list[ChatLine] = Field(default_factory=list)
    # Counts and times only (actors/scheduler/autonomy/accounts.py): nothing others wrote.
    accounts: AccountsGlance = Field(default_factory=AccountsGlance)

    # -- what counts as "something changed" -----------------------------------------------

    def checkpoints_passed(self) -> int:
        moment = local(self.now, ZoneInfo(self.zone)).strftime("%H:%M")
        return sum(1 for c in self.checkpoints if c <= moment)

    def fingerprint_parts(self) -> dict[str, str]:
        """One short hash per input, `now` left out: equal parts mean nothing happened."""
        soon = self.now + 3600
        parts: dict[str, Any] = {
            # The last owner message, not today's count: a new day starting is not the owner writing.
            "owner": self.last_owner_message.id if self.last_owner_message else None,
            "messages": [m.id for m in self.messages],
            "goals": self.goals,
            "open_loops": self.open_loops,
            "mood": self.mood,
            "persona": self.persona_hash,
            "plan": [self.plan, self.checkpoints_passed()],
            # An item coming due within the hour counts as a change, so a reminder is seen.
            "upcoming": [[u.kind, u.id, u.status, bool(u.at is not None and u.at <= soon)] for u in self.upcoming],
            "events": [[e.kind, e.id] for e in self.events],
            "answers": [r.answered_after is not None for r in self.feedback],
            # New mail or a changed day is something happening.
            "accounts": self.accounts.fingerprint(),
        }
        return {k: hashlib.sha256(json.dumps(v, sort_keys=True, default=str).encode()).hexdigest()[:12]
                for k, v in parts.items()}


def fingerprint(parts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def changed_keys(before: dict[str, str] | None, after: dict[str, str]) -> list[str]:
    if not before:
        return sorted(after)
    return sorted(k for k in after if before.get(k) != after[k])


# -- renderings ---------------------------------------------------------------------------

def _when(ts: float, zone: ZoneInfo) -> str:
    return local(ts, zone).strftime("%a %H:%M")


def _ago(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 90:
        return f"{minutes} min"
    hours = seconds / 3600
    return f"{hours:.0f} h" if hours < 48 else f"{hours / 24:.0f} days"


def _cut(text: str, cap: int = LINE_CAP) -> str:
    text = " ".join(text.split())
    return text if len(text) <= cap else text[:cap - 1] + "…"


def feedback_line(feedback: Sequence[ReachOut], zone: ZoneInfo) -> str:
    """The main learning signal: own reach-outs in the last days and whether each was answered."""
    if not feedback:
        return f"No reach-outs of yours in the last {FEEDBACK_DAYS} days."
    answered = sum(1 for r in feedback if r.answered_after is not None)
    items = "; ".join(
        f"{_when(r.ts, zone)} {r.action} \"{_cut(r.text, 60)}\" -> "
        + (f"answered after {_ago(r.answered_after)}" if r.answered_after is not None else "no answer within 2 h")
        for r in feedback[-8:])
    return f"{len(feedback)} reach-outs in {FEEDBACK_DAYS} days, {answered} answered within 2 h: {items}"


def _counts(s: Situation) -> str:
    accounts = s.accounts.line()
    return (f"owner messages {s.owner_messages_today}, your reach-outs {s.reach_outs_today}, "
            f"background jobs you started {s.background_today}" + (f"; {accounts}" if accounts else ""))


def _upcoming_lines(s: Situation, zone: ZoneInfo) -> list[str]:
    return [f"- {u.kind} {u.id}: {_cut(u.title, 120)}" + (f" at {_when(u.at, zone)}" if u.at else "")
            + (f" ({u.status})" if u.status else "") for u in s.upcoming]


def render_full(s: Situation) -> str:
    zone = ZoneInfo(s.zone)
    last = s.last_owner_message
    sections = [
        f"Now: {local(s.now, zone).strftime('%A %d %B %Y, %H:%M')} ({s.zone})",
        "Last owner message: " + (f"{_ago(s.now - last.at)} ago: \"{_cut(last.text)}\"" if last else "none yet"),
        f"Today: {_counts(s)}",
        f"Mood: {s.mood}",
        "Memory:\n" + (s.memory_block[:MEMORY_CAP] or "(nothing yet)"),
        "Agenda: " + (s.plan or "(no plan)") + (f"\nCheckpoints: {', '.join(s.checkpoints)}" if s.checkpoints else ""),
        "Upcoming:\n" + ("\n".join(_upcoming_lines(s, zone)) or "(nothing scheduled)"),
        "Recent events:\n" + ("\n".join(f"- {_when(e.at, zone)} {e.kind}: {_cut(e.text, 160)}" for e in s.events)
                              or "(none)"),
        "Feedback: " + feedback_line(s.feedback, zone),
        "Last messages:\n" + ("\n".join(f"- {_when(m.at, zone)} {m.role}: {_cut(m.text, 200)}" for m in s.messages)
                              or "(none)"),
    ]
    return "\n\n".join(sections)


def render_triage(s: Situation, changed: Sequence[str], spent: int, budget: int) -> str:
    """The small context: what changed, the last owner message, counts, what is next."""
    zone = ZoneInfo(s.zone)
    last = s.last_owner_message
    nxt = _upcoming_lines(s, zone)[:2]
    due = [c for c in s.checkpoints if c <= local(s.now, zone).strftime("%H:%M")]
    lines = [
        f"Now: {local(s.now, zone).strftime('%a %H:%M')}. Changed since your last look: {', '.join(changed) or 'nothing'}.",
        "Last owner message: " + (f"{_ago(s.now - last.at)} ago: \"{_cut(last.text, 160)}\"" if last else "none"),
        f"Today: {_counts(s)}. Plan: {_cut(s.plan, 200) or '(none)'}",
        f"Checkpoints reached: {', '.join(due) or 'none'}",
        "Next: " + ("; ".join(x.lstrip('- ') for x in nxt) or "nothing scheduled"),
        "Events: " + ("; ".join(f"{e.kind}: {_cut(e.text, 80)}" for e in s.events[:3]) or "none"),
        f"Reach-outs answered lately: {sum(1 for r in s.feedback if r.answered_after is not None)}/{len(s.feedback)}",
        f"Tokens left today: {max(0, budget - spent)}",
    ]
    return "\n".join(lines)


# -- reading it from the store ------------------------------------------------------------

class SituationSource(Protocol):
    async def read(self, now: float, zone: ZoneInfo, reach_outs: Sequence[ReachOut], plan: str,
                   checkpoints: Sequence[str], day_start: float) -> Situation: ...


def answered(reach_outs: Sequence[ReachOut], owner_times: Sequence[float]) -> list[ReachOut]:
    """Each reach-out with how long the owner took to answer, when within two hours."""
    times = sorted(owner_times)
    out = []
    for r in reach_outs:
        after = next((t - r.ts for t in times if r.ts < t <= r.ts + ANSWERED_WITHIN), None)
        out.append(r.model_copy(update={"answered_after": after}))
    return out


class StoreSituation:
    """Reads the situation from the store: messages, memory, and (when their tables exist)
    tasks and calls."""

    def __init__(self, store: Store, accounts: Glance | None = None) -> None:
        self.store = store
        self.accounts = accounts

    async def _owner_lines(self, since: float) -> tuple[list[ChatLine], list[float]]:
        c, m = schema.conversations, schema.messages
        base = (sa.select(m.c.id, m.c.role, m.c.content, m.c.created)
                .join(c, c.c.id == m.c.conversation_id).where(c.c.channel != HEALTH_CHANNEL))
        async with self.store.engine.connect() as conn:
            last = (await conn.execute(base.where(m.c.role.in_(["user", "assistant"]))
                                       .order_by(m.c.created.desc()).limit(LAST_MESSAGES))).all()
            times = (await conn.execute(sa.select(m.c.created).join(c, c.c.id == m.c.conversation_id)
                                        .where(m.c.role == "user", m.c.created >= since,
                                               c.c.channel != HEALTH_CHANNEL))).scalars().all()
            owner = (await conn.execute(base.where(m.c.role == "user").order_by(m.c.created.desc()).limit(1))).all()
        lines = [ChatLine(id=r[0], role=r[1], text=_cut(r[2] or "", 400), at=r[3]) for r in reversed(last)]
        if owner:
            lines.append(ChatLine(id=owner[0][0], role="owner_last", text=_cut(owner[0][2] or "", 400), at=owner[0][3]))
        return lines, list(times)

    async def _glance(self) -> AccountsGlance:
        """The accounts' counts, or nothing when none is connected or they do not answer in time."""
        if self.accounts is None:
            return AccountsGlance()
        try:
            return await asyncio.wait_for(self.accounts(), GLANCE_SECONDS)
        except Exception:  # an optional input of the loop: it decides without it
            log.exception("autonomy: the accounts' glance failed")
            return AccountsGlance()

    async def _optional(self, sql: str, **params: Any) -> list[Any]:
        """Rows of a query on a table another issue brings; [] while it does not exist."""
        try:
            async with self.store.engine.connect() as conn:
                return list((await conn.execute(sa.text(sql), params)).all())
        except sa.exc.DBAPIError as exc:
            log.debug("autonomy: optional table not readable (%s)", exc.__class__.__name__)
            return []

    async def _upcoming_and_events(self, now: float, since: float) -> tuple[list[Upcoming], list[Event]]:
        upcoming: list[Upcoming] = []
        for r in await self._optional(
                "SELECT id, title, status, next_run, kind FROM tasks WHERE status IN ('scheduled', 'running') "
                "ORDER BY next_run LIMIT 8"):
            upcoming.append(Upcoming(kind=r[4] or "task", id=str(r[0]), title=r[1] or "", status=r[2] or "",
                                     at=r[3]))
        for r in await self._optional(
                "SELECT id, reason, status, at FROM calls WHERE status IN ('scheduled', 'ringing') "
                "AND at >= :now ORDER BY at LIMIT 5", now=now - 600):
            upcoming.append(Upcoming(kind="call", id=str(r[0]), title=r[1] or "", status=r[2] or "", at=r[3]))
        events: list[Event] = []
        for r in await self._optional(
                "SELECT id, title, status, updated, result FROM tasks WHERE status IN ('done', 'failed') "
                "AND updated >= :since ORDER BY updated DESC LIMIT 6", since=since):
            text = f"{r[1] or ''}" + (f": {_cut(str(r[4]), 120)}" if r[4] else "")
            events.append(Event(kind=f"task_{r[2]}", id=str(r[0]), text=text, at=r[3] or now))
        for r in await self._optional(
                "SELECT id, reason, at FROM calls WHERE status = 'missed' AND at >= :since "
                "ORDER BY at DESC LIMIT 4", since=since):
            events.append(Event(kind="missed_call", id=str(r[0]), text=r[1] or "", at=r[2] or now))
        return upcoming, events

    async def read(self, now: float, zone: ZoneInfo, reach_outs: Sequence[ReachOut], plan: str,
                   checkpoints: Sequence[str], day_start: float) -> Situation:
        since = now - FEEDBACK_DAYS * 86400
        lines, owner_times = await self._owner_lines(since)
        owner_last = next((line for line in lines if line.role == "owner_last"), None)
        lines = [line for line in lines if line.role != "owner_last"]
        items = await list_items(self.store, active=True, limit=5000)
        persona_raw = await self.store.get_kv(PERSONA_KV)
        mood_raw = await self.store.get_kv(MOOD_KV)
        persona = Persona(**persona_raw) if persona_raw else None
        mood = current_mood(Mood(**mood_raw) if mood_raw else None, now)
        query = " ".join([plan, owner_last.text if owner_last else ""])
        # Read without marking items used: the loop looking is not the owner talking.
        block = render_memory_block(select(items, query, now), persona, mood, now)
        upcoming, events = await self._upcoming_and_events(now, max(since, now - 86400))
        feedback = answered([r for r in reach_outs if r.ts >= since], owner_times)
        return Situation(
            accounts=await self._glance(),
            now=now, zone=zone.key,
            last_owner_message=ChatLine(**{**owner_last.model_dump(), "role": "user"}) if owner_last else None,
            owner_messages_today=sum(1 for t in owner_times if t >= day_start),
            reach_outs_today=sum(1 for r in reach_outs if r.ts >= day_start),
            goals=[f"[#{i.id}] {i.text}" for i in items if i.kind == "goal"][:10],
            open_loops=sorted(i.id for i in items if i.kind == "open_loop")[:20],
            mood=mood.feeling if mood.is_neutral else f"{mood.feeling} ({mood.valence:+.1f})",
            persona_hash=hashlib.sha256(json.dumps(persona_raw or {}, sort_keys=True).encode()).hexdigest()[:12],
            memory_block=block, plan=plan, checkpoints=list(checkpoints), upcoming=upcoming, events=events,
            feedback=feedback, messages=lines)


def day_start_of(now: float, zone: ZoneInfo) -> float:
    """Local midnight that began the owner's day containing `now`."""
    return dt.datetime.combine(dt.date.fromisoformat(local_day(now, zone)), dt.time(0), zone).timestamp()
