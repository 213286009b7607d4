"""The autonomy loop's three prompts: plan the day, triage, decide (spec section 9)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from actors.scheduler.autonomy.situation import Situation, feedback_line, render_full, render_triage

INNER_PROMPT = """You are Iriis, the owner's personal agent, thinking on your own between conversations.
You can reach ONLY the owner: nothing you decide can contact anyone else.
Decide one thing from the situation below. Answer with ONE JSON object only:
{"thought": "one or two sentences of your reasoning",
 "action": "none" | "message" | "call" | "task" | "work" | "practice" | "emergency",
 "message": "for message, call or emergency: what to tell the owner, short and in your voice",
 "reason": "for call: why a call rather than a message",
 "title": "for task, work or practice: a short title",
 "goal": "for task, work or practice: what the background session must produce",
 "run_at": "for task: optional ISO time to start it",
 "close_loops": [ids of open loops that are done],
 "mood": {"feeling": "...", "valence": -1..1, "why": "..."} or null,
 "next_check_minutes": 10-240}
"none" is usually right. Reach out only when it helps the owner now. The feedback line shows
which of your reach-outs the owner answered: do less of what goes unanswered. Never repeat a
message the owner did not answer. "emergency" is only for something that cannot wait."""

TRIAGE_PROMPT = """You are the cheap first look of Iriis's autonomy loop. Given the short summary below,
say whether the full situation is worth reading now (it costs about ten times more).
Escalate only when the change might call for an action: the owner wrote, a task finished or
failed, a reminder or call is due soon, a planned checkpoint arrived. Answer with ONE JSON object:
{"escalate": true | false, "why": "a few words", "next_check_minutes": 10-240}"""

PLAN_PROMPT = """You plan the day for Iriis, the owner's personal agent, from the situation below.
Answer with ONE JSON object only:
{"plan": "two or three short sentences: what you will keep an eye on today and what you might do",
 "checkpoints": ["HH:MM", ...]}
Checkpoints are local times (at most 4) when you want to look properly even if nothing else
changes, e.g. before a reminder or the owner's usual active hours. Fewer is better."""

# The full situation is capped so one decision stays within a free tier's per-call limits.
SITUATION_CAP = 12_000
PLAN_CAP = 3_000


def decision_messages(situation: Situation) -> list[dict[str, str]]:
    return [{"role": "system", "content": INNER_PROMPT},
            {"role": "user", "content": render_full(situation)[:SITUATION_CAP]}]


def triage_messages(situation: Situation, changed: list[str], spent: int, budget: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": TRIAGE_PROMPT},
            {"role": "user", "content": render_triage(situation, changed, spent, budget)}]


def plan_messages(situation: Situation) -> list[dict[str, str]]:
    """The plan needs the goals, what is scheduled and how reach-outs went, not every memory."""
    zone = ZoneInfo(situation.zone)
    text = "\n".join([
        render_triage(situation, [], 0, 0).split("\nTokens left")[0],
        "Goals: " + ("; ".join(situation.goals[:6]) or "(none)"),
        "Feedback: " + feedback_line(situation.feedback, zone),
    ])
    return [{"role": "system", "content": PLAN_PROMPT}, {"role": "user", "content": text[:PLAN_CAP]}]
