"""What the autonomy loop costs: a simulated week on an injected clock with a scripted model.

The owner writes on weekdays (some days a lot, the weekend not at all), answers some of the
agent's reach-outs and ignores others. The same week runs twice: with the cost guard's triage
(fingerprint, then a cheap call, then the full situation only when worth it) and without it
(every wake reads the full situation). Tokens are characters / 4 (the project has no tokeniser);
the situation carries a memory block and twelve messages of realistic size. Nightly consolidation
is memory's own job and is not counted here.

    .venv/bin/python benchmarks/autonomy_cost.py

Prints one JSON line. Goal: a day where nothing happens costs under 5,000 tokens.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.scheduler.autonomy import AutonomyConfig, AutonomyLoop  # noqa: E402
from actors.scheduler.autonomy.clock import RestHours  # noqa: E402
from actors.scheduler.autonomy.situation import ChatLine, ReachOut, Situation, answered  # noqa: E402
from actors.scheduler.autonomy.state import MemoryState  # noqa: E402

ZONE = ZoneInfo("Europe/Paris")
START = dt.datetime(2026, 11, 30, 0, 0, tzinfo=ZONE).timestamp()  # a Monday
DAYS = 7
# Owner messages per day (Mon..Sun): two quiet days at the end, where nothing happens.
OWNER_MESSAGES = [6, 2, 8, 1, 4, 0, 0]
MEMORY_BLOCK = "\n".join(["## Who you are", "Purpose: help the owner keep their week in order."]
                         + [f"- [#{i}] (fact) the owner's note number {i} about work, family and plans, "
                            f"kept in a sentence of ordinary length" for i in range(1, 40)])


class Owner:
    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.messages: list[ChatLine] = []
        for day, count in enumerate(OWNER_MESSAGES):
            for k in range(count):
                when = START + day * 86400 + rng.uniform(8.5, 21.5) * 3600
                self.messages.append(ChatLine(id=f"o{day}.{k}", role="user", text=f"owner message {day}.{k} "
                                              "about something ordinary that needs no action", at=when))
        self.answers = 0
        self.rng = rng

    def answer(self, reach_out_ts: float) -> None:
        """The owner answers about half of the reach-outs, within an hour."""
        if self.rng.random() < 0.5:
            self.answers += 1
            when = reach_out_ts + self.rng.uniform(5, 60) * 60
            self.messages.append(ChatLine(id=f"a{reach_out_ts}", role="user", text="ok, thanks", at=when))


class SimSource:
    def __init__(self, owner: Owner) -> None:
        self.owner = owner

    async def read(self, now: float, zone: ZoneInfo, reach_outs: Sequence[ReachOut], plan: str,
                   checkpoints: Sequence[str], day_start: float) -> Situation:
        seen = sorted((m for m in self.owner.messages if m.at <= now), key=lambda m: m.at)
        chat = [m for pair in seen[-6:] for m in (pair, ChatLine(id=f"r{pair.id}", role="assistant",
                text="a reply of ordinary length to the message just before it", at=pair.at + 5))]
        return Situation(now=now, zone=zone.key, last_owner_message=seen[-1] if seen else None,
                         owner_messages_today=sum(1 for m in seen if m.at >= day_start),
                         reach_outs_today=sum(1 for r in reach_outs if r.ts >= day_start),
                         memory_block=MEMORY_BLOCK, plan=plan, checkpoints=list(checkpoints),
                         feedback=answered(list(reach_outs), [m.at for m in seen]), messages=chat[-12:])


class SimActions:
    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.reach_outs: dict[int, int] = defaultdict(int)

    async def notify_owner(self, kind: str, title: str, body: str, data: dict[str, Any]) -> str:
        return "outbox"

    async def start_background(self, kind: str, title: str, goal: str, run_at: float | None, now: float) -> str:
        return "task"

    async def call_owner(self, reason: str, opening: str, now: float) -> str:
        return "call"


def scripted_model(actions: SimActions, clock: list[float]):
    """Plans two checkpoints; triage escalates when the owner wrote or a checkpoint arrived;
    the decision reaches out once a day at most (less after ignored ones), otherwise waits."""
    async def complete(messages: list[dict[str, str]], purpose: str) -> str:
        text = messages[-1]["content"]
        if purpose == "plan":
            return json.dumps({"plan": "Watch for the owner's messages; one check-in around lunch.",
                               "checkpoints": ["12:30", "18:00"]})
        if purpose == "triage":
            wrote = "Changed since your last look: " in text and "owner" in text.split("Changed since your last look: ")[1].split(".")[0]
            checkpoint = "Checkpoints reached: none" not in text
            return json.dumps({"escalate": wrote or checkpoint, "why": "owner wrote" if wrote else "checkpoint",
                               "next_check_minutes": 120})
        day = int((clock[0] - START) // 86400)
        ignored = text.count("no answer within 2 h")
        if "your reach-outs 0" in text and OWNER_MESSAGES[day] > 0 and ignored < 3:
            actions.reach_outs[day] += 1
            actions.owner.answer(clock[0])
            return json.dumps({"thought": "A short check-in could help.", "action": "message",
                               "message": "Anything I can take off your plate today?", "next_check_minutes": 90})
        return json.dumps({"thought": "Nothing needs me now.", "action": "none", "next_check_minutes": 90})
    return complete


async def simulate(triage: bool) -> dict[str, Any]:
    owner = Owner(seed=7)
    actions = SimActions(owner)
    clock = [START + 7 * 3600]
    loop = AutonomyLoop(scripted_model(actions, clock), SimSource(owner), actions, MemoryState(),
                        AutonomyConfig(zone=ZONE, rest=RestHours.parse("23-7"), tokens_per_day=50_000, triage=triage),
                        clock=lambda: clock[0])
    tokens: dict[int, int] = defaultdict(int)
    wakes: dict[int, int] = defaultdict(int)
    while clock[0] < START + DAYS * 86400:
        result = await loop.wake(clock[0])
        day = int((clock[0] - START) // 86400)
        tokens[day] += result.tokens
        wakes[day] += 1
        clock[0] = result.next_wake
    return {"tokens": [tokens[d] for d in range(DAYS)], "wakes": [wakes[d] for d in range(DAYS)],
            "reach_outs": [actions.reach_outs[d] for d in range(DAYS)], "answered": owner.answers}


async def main() -> None:
    guarded, baseline = await simulate(True), await simulate(False)
    quiet = [d for d in range(DAYS) if OWNER_MESSAGES[d] == 0]
    quiet_max = max(guarded["tokens"][d] for d in quiet)
    print(json.dumps({
        "benchmark": "autonomy_cost", "days": DAYS, "token_count": "characters/4 (no project tokeniser)",
        "owner_messages_per_day": OWNER_MESSAGES,
        "tokens_per_day_with_triage": guarded["tokens"], "tokens_per_day_without_triage": baseline["tokens"],
        "week_tokens_with_triage": sum(guarded["tokens"]), "week_tokens_without_triage": sum(baseline["tokens"]),
        "wakes_per_day": guarded["wakes"], "reach_outs_per_day": guarded["reach_outs"],
        "reach_outs_answered": guarded["answered"],
        "quiet_day_max_tokens": quiet_max, "goal_quiet_day_under_5000": quiet_max < 5000,
    }))


if __name__ == "__main__":
    asyncio.run(main())
