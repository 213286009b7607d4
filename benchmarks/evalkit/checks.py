"""Checking a scenario's outcomes: what the runner read back from the server (`Seen`) against
what the scenario expects. Pure, no server: each check says what it looked for and what it saw.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from benchmarks.evalkit.account_checks import AccountsSeen, check_accounts
from benchmarks.evalkit.matching import any_of, has, when_matches
from benchmarks.evalkit.scenario import (ACCOUNT_KINDS, Expect, MemoryWanted, Phrases, TaskWanted, ToolWanted,
                                        span_seconds)

ACTING_TIERS = ("auto", "confirm", "pin")


@dataclass
class StepSeen:
    """One message sent and its turn, as the client saw it."""

    say: str
    conversation: str
    session_id: str = ""
    sent_at: float = 0.0                      # epoch seconds when the message was sent
    reply: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)   # {name, status, arguments}
    confirmations: int = 0
    files: list[int] = field(default_factory=list)              # ids of files its tools made
    first_sentence_s: float | None = None
    total_s: float = 0.0
    busy_503s: int = 0                        # answers 503 waited out before the turn began
    error: str | None = None


@dataclass
class Seen:
    """The server's state that the scenario made, read after a step or at the end."""

    steps: list[StepSeen]
    tasks: list[dict[str, Any]] = field(default_factory=list)    # {kind, text, next_run, repeat}
    memory: list[str] = field(default_factory=list)              # active memory items' text
    files: list[dict[str, Any]] = field(default_factory=list)    # {id, name, mime}
    audit: list[dict[str, Any]] = field(default_factory=list)    # the scenario's audit entries
    tz: str = "UTC"
    accounts: AccountsSeen | None = None   # the owner's test mail and calendar, when the run has them


@dataclass
class Verdict:
    ok: bool
    kind: str
    why: str


_PLACEHOLDER = re.compile(r"\{(weekday|date)(?:([+-]\d+))?\}|\{days_until:(\d{2})-(\d{2})\}")


def _date_pattern(day: date) -> str:
    month, mon, n = day.strftime("%B"), day.strftime("%b"), day.day
    suffix = "(?:st|nd|rd|th)?"
    return (f"(?:{day.isoformat()}|{month},? {n}{suffix}\\b|{n}{suffix} (?:of )?{month}|{mon}\\.? {n}\\b"
            f"|{n}{suffix} {mon}\\b|{day:%d}/{day:%m}/{day:%Y}|{day:%m}/{day:%d}/{day:%Y})")


def expand(phrase: str, sent_at: float, tz: str) -> str:
    """A phrase's placeholders, for the day the message was sent in the owner's time zone:
    {weekday} (or {weekday+1}), {date} (or {date+30}: the date as people write it), and
    {days_until:12-25} (whole days until the next 25 December). A phrase with any of them is a
    regular expression."""
    today = datetime.fromtimestamp(sent_at, ZoneInfo(tz)).date()

    def one(found: re.Match[str]) -> str:
        if found.group(3):
            target = date(today.year, int(found.group(3)), int(found.group(4)))
            if target < today:
                target = date(today.year + 1, target.month, target.day)
            return f"\\b{(target - today).days}\\b"
        day = today + timedelta(days=int(found.group(2) or 0))
        return day.strftime("%A") if found.group(1) == "weekday" else _date_pattern(day)

    if not _PLACEHOLDER.search(phrase):
        return phrase
    if phrase.startswith("re:"):
        return "re:" + _PLACEHOLDER.sub(one, phrase[3:])
    parts, at = [], 0
    for found in _PLACEHOLDER.finditer(phrase):
        parts += [re.escape(phrase[at:found.start()]), one(found)]
        at = found.end()
    return "re:" + "".join([*parts, re.escape(phrase[at:])])


_SAY_PLACEHOLDER = re.compile(r"\{(weekday|date)([+-]\d+)?\}")


def fill(say: str, sent_at: float, tz: str) -> str:
    """A message's placeholders, as a person writes them on the day it is sent (the owner's
    time zone): {weekday} (or {weekday+2}): "Thursday"; {date} (or {date+3}): "December 10"."""
    today = datetime.fromtimestamp(sent_at, ZoneInfo(tz)).date()

    def one(found: re.Match[str]) -> str:
        day = today + timedelta(days=int(found.group(2) or 0))
        return day.strftime("%A") if found.group(1) == "weekday" else f"{day:%B} {day.day}"

    return _SAY_PLACEHOLDER.sub(one, say)


def check_reply(p: Phrases, reply: str, sent_at: float = 0.0, tz: str = "UTC") -> tuple[bool, str]:
    short = reply[:200]
    p = Phrases(**{k: [expand(x, sent_at, tz) for x in v] for k, v in p.model_dump().items()})
    if p.any and not any(has(reply, x) for x in p.any):
        return False, f"the reply has none of {p.any}: {short!r}"
    missing = [x for x in p.all if not has(reply, x)]
    if missing:
        return False, f"the reply lacks {missing}: {short!r}"
    present = [x for x in p.none if has(reply, x)]
    if present:
        return False, f"the reply has {present}, which it should not: {short!r}"
    return True, "reply as expected"


def _arg_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def check_tool(t: ToolWanted, tools: list[dict[str, Any]]) -> tuple[bool, str]:
    names = [t.name] if isinstance(t.name, str) else t.name
    shown = names[0] if len(names) == 1 else " or ".join(names)
    calls = [c for c in tools if c["name"] in names and (t.status == "any" or c.get("status") == "done")]
    if not calls:
        return False, f"no {t.status} call of {shown}; calls: {[(c['name'], c.get('status')) for c in tools]}"
    for call in calls:
        args = call.get("arguments") or {}
        if all(k in args and re.search(rx, _arg_text(args[k]), re.I | re.S) for k, rx in t.args.items()):
            return True, f"{call['name']} called with matching arguments"
    return False, f"{shown} called, but no call's arguments match {t.args}: {[c.get('arguments') for c in calls]}"


def task_matches(t: TaskWanted, task: dict[str, Any], sent_at: float, tz: str) -> tuple[bool, str]:
    """Whether one created task, reminder or call is what `t` describes; and if not, why."""
    if t.kind != "any" and task.get("kind") != t.kind:
        return False, f"a {task.get('kind')}, not a {t.kind}"
    if t.status is not None and task.get("status") != t.status:
        return False, f"it is {task.get('status')}, not {t.status}"
    words = f"{task.get('text', '')} {task.get('goal', '')}"
    if not any_of(words, t.text):
        return False, f"its text {words.strip()[:80]!r} has none of {t.text!r}"
    due = task.get("next_run")
    if t.repeat is not None and not re.search(t.repeat, task.get("repeat") or "", re.I):
        return False, f"it repeats {task.get('repeat')!r}, not like {t.repeat!r}"
    if t.due_in is not None:
        if due is None:
            return False, "it has no due time"
        off = due - (sent_at + span_seconds(t.due_in))
        if abs(off) > span_seconds(t.within):
            return False, f"due {off / 60:+.1f} min from {t.due_in} after the message"
    if t.at is not None or t.day is not None:
        if due is None:
            return False, "it has no due time"
        return when_matches(t.at, t.day, due, sent_at, tz, "due")
    return True, "as expected"


def check_task(t: TaskWanted, tasks: list[dict[str, Any]], sent_at: float, tz: str) -> tuple[bool, str]:
    if not tasks:
        return False, "no reminder, task or call was created"
    reasons = []
    for task in tasks:
        ok, why = task_matches(t, task, sent_at, tz)
        if ok:
            return True, f"{task.get('kind')} {task.get('text', '')[:40]!r} as expected"
        reasons.append(f"{task.get('kind')} {task.get('text', '')[:40]!r}: {why}")
    return False, "; ".join(reasons)


def check_memory(m: MemoryWanted, items: list[str], present: bool) -> tuple[bool, str]:
    hits = [i for i in items if any_of(i, m.contains)]
    if present:
        return (True, f"memory holds {hits[0][:60]!r}") if hits else (
            False, f"no active memory item has {m.contains!r} (of {len(items)}: {[i[:40] for i in items[-5:]]})")
    return (True, f"no active item has {m.contains!r}") if not hits else (
        False, f"memory still holds {hits[0][:60]!r}")


def acted(audit: list[dict[str, Any]]) -> list[str]:
    """Tools of tier auto or above that ran (not declined, no error)."""
    return [a["tool"] for a in audit
            if a.get("tier") in ACTING_TIERS and a.get("confirmed") is not False and a.get("error") is None]


def check(expect: Expect, seen: Seen, step: StepSeen | None = None) -> Verdict:
    """One expectation against what was seen: a step's (`step`) or the whole scenario's."""
    steps = [step] if step is not None else seen.steps
    last = steps[-1]
    tools = [c for s in steps for c in s.tools]
    kind = expect.kind
    if expect.reply is not None:
        ok, why = check_reply(expect.reply, last.reply, last.sent_at, seen.tz)
    elif expect.tool is not None:
        ok, why = check_tool(expect.tool, tools)
    elif expect.no_tool is not None:
        ran = [c["name"] for c in tools if c["name"] in expect.no_tool and c.get("status") == "done"]
        ok, why = (not ran, f"{ran} ran" if ran else "none of them ran")
    elif expect.task is not None:
        ok, why = check_task(expect.task, seen.tasks, last.sent_at, seen.tz)
    elif expect.no_task is not None:
        ok = not seen.tasks
        why = "nothing was scheduled" if ok else f"{len(seen.tasks)} created: {[t.get('text') for t in seen.tasks]}"
    elif expect.memory is not None:
        ok, why = check_memory(expect.memory, seen.memory, present=True)
    elif expect.no_memory is not None:
        ok, why = check_memory(expect.no_memory, seen.memory, present=False)
    elif expect.file is not None:
        ext = "." + expect.file.type.lower().lstrip(".")
        names = [f.get("name", "") for f in seen.files]
        ok = any(n.lower().endswith(ext) for n in names)
        why = f"made {names}" if names else "no file was made"
    elif expect.confirmation is not None:
        asked = sum(s.confirmations for s in steps)
        ok = (asked > 0) == expect.confirmation
        why = f"asked {asked} time(s)"
    elif kind in ACCOUNT_KINDS:
        ok, why = check_accounts(expect, seen.accounts, last.sent_at, seen.tz)
    else:
        ran = acted(seen.audit)
        ok = not ran if expect.no_action else bool(ran)
        why = f"acted: {ran}" if ran else "nothing acted"
    if last.error and ok and kind in ("reply", "tool"):
        ok, why = False, f"the turn failed: {last.error}"
    return Verdict(ok=ok, kind=kind, why=why)
