"""Playbook distillation: after a piece of work, a few short rules for next time.

The playbook grows by deltas. The model sees the related rules with their ids and may say a
new rule replaces one of them; the old rule is then retired and the new one added, so the
history stays and the rest of the playbook is never rewritten wholesale.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, field_validator

from actors.memory.dedup import Insert, decide_insert
from actors.common.jsonish import find_object
from actors.memory.model import MindItem
from actors.memory.reflect_prompt import cut
from actors.memory.reflection import DeactivateOp, InsertOp, ReinforceOp, parse_id
from actors.memory.secrets import looks_secret

MAX_RULES = 3
RULE_CAP = 220
WORK_CAP = 4000
RULES_CAP = 1800
RULE_IMPORTANCE = 6.0
_DOMAIN = re.compile(r"^\[([a-z0-9 _-]{1,24})\]\s*", re.IGNORECASE)

PLAYBOOK_INSTRUCTION = """You distil a playbook of short rules that make an assistant better at recurring work.
Read the finished work below and answer with ONE JSON object and nothing else:
{"rules": [{"domain": "one word, e.g. email, travel, code", "rule": "an imperative sentence under 25 words", "replaces": id or null}]}
At most 3 rules, only ones that would change what the assistant does next time. If an existing rule is
wrong or incomplete, write the better rule and give the id it replaces. No rules is a fine answer."""


class RuleDelta(BaseModel):
    domain: str = "general"
    rule: str
    replaces: int | None = None

    @field_validator("domain", mode="before")
    @classmethod
    def _domain(cls, value: Any) -> str:
        text = str(value or "").strip().lower()
        return re.sub(r"[^a-z0-9_-]+", "-", text)[:24].strip("-") or "general"


def rule_text(delta: RuleDelta) -> str:
    """Stored form: the domain tag first, so a rule reads as advice for a kind of task."""
    return f"[{delta.domain}] {cut(delta.rule, RULE_CAP)}"


def playbook_prompt(work: str, related: Sequence[MindItem]) -> list[dict[str, str]]:
    rules = "\n".join(f"[#{r.id}] {cut(r.text, 240)}" for r in related)
    rules = cut(rules, RULES_CAP)
    return [{"role": "system", "content": PLAYBOOK_INSTRUCTION},
            {"role": "user", "content": f"Finished work:\n{cut(work, WORK_CAP)}\n\n"
                                        f"Existing related rules:\n{rules or '(none)'}"}]


def parse_playbook(raw: str) -> list[RuleDelta]:
    """The rule deltas in the model's answer; [] when there is nothing usable. Never raises."""
    data = find_object(raw, {"rules"})
    if data is None:
        return []
    entries = data.get("rules")
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list):
        return []
    deltas: list[RuleDelta] = []
    for entry in entries:
        if isinstance(entry, str):
            entry = {"rule": entry}
        if not isinstance(entry, dict):
            continue
        text = str(entry.get("rule") or entry.get("text") or "").strip()
        if not text or looks_secret(text):
            continue
        domain = entry.get("domain")
        tagged = _DOMAIN.match(text)
        if tagged:  # the model wrote the tag into the rule itself
            domain, text = domain or tagged.group(1), text[tagged.end():]
        deltas.append(RuleDelta(domain=domain, rule=text, replaces=parse_id(entry.get("replaces"))))
        if len(deltas) >= MAX_RULES:
            break
    return deltas


def plan_playbook(deltas: Sequence[RuleDelta], existing: Sequence[MindItem],
                  now: float) -> list[InsertOp | ReinforceOp | DeactivateOp]:
    """Retire the rules a delta replaces (only active playbook rules), then add or reinforce."""
    rules = {r.id: r for r in existing if r.kind == "playbook" and r.active}
    pool = list(rules.values())
    ops: list[InsertOp | ReinforceOp | DeactivateOp] = []
    for delta in deltas:
        if delta.replaces in rules:
            ops.append(DeactivateOp(item_id=delta.replaces, reason="outdated"))
            pool = [r for r in pool if r.id != delta.replaces]
            del rules[delta.replaces]
        text = rule_text(delta)
        decision = decide_insert("playbook", text, RULE_IMPORTANCE, pool)
        if isinstance(decision, Insert):
            ops.append(InsertOp(kind="playbook", text=text, importance=RULE_IMPORTANCE, created=now))
            pool.append(MindItem(id=-len(ops), kind="playbook", text=text, created=now))
        elif decision.item_id > 0:
            ops.append(ReinforceOp(item_id=decision.item_id, importance=decision.new_importance, last_used=now))
    return ops
