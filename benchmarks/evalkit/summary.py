"""The one JSON line of an evaluation run, from its records: success overall, by category and
for the welcome screen's suggestions, memory on against off on the multi-session scenarios, and
first-sentence latency for tool turns and plain answers. Pure."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 2)


def _rate(records: list[dict[str, Any]]) -> float | None:
    return round(100.0 * sum(r["ok"] for r in records) / len(records), 1) if records else None


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    on = [r for r in records if r["memory"]]
    main = on or records
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in main:
        by_category[r["category"]].append(r)
    steps = [s for r in main for s in r["steps"] if s.get("first_sentence_s") is not None]
    tool = [s["first_sentence_s"] for s in steps if s["tool_turn"]]
    plain = [s["first_sentence_s"] for s in steps if not s["tool_turn"]]
    multi_on = [r for r in records if r["memory"] and r["multi_session"]]
    multi_off = [r for r in records if not r["memory"] and r["multi_session"]]
    firsts = [r["first_after_serving_s"] for r in records if r.get("first_after_serving_s") is not None]
    welcome = [r for r in main if "welcome" in r["tags"]]
    return {
        "scenarios": len(main), "passed": sum(r["ok"] for r in main), "success_pct": _rate(main),
        "by_category": {k: {"n": len(v), "success_pct": _rate(v)} for k, v in sorted(by_category.items())},
        "welcome": {"n": len(welcome), "passed": sum(r["ok"] for r in welcome)},
        "memory_on_multi_session_pct": _rate(multi_on), "memory_off_multi_session_pct": _rate(multi_off),
        "memory_margin_points": (round(_rate(multi_on) - _rate(multi_off), 1)
                                 if multi_on and multi_off else None),
        "first_sentence_s": {"tool_p50": pct(tool, 0.5), "tool_p95": pct(tool, 0.95),
                             "plain_p50": pct(plain, 0.5), "plain_p95": pct(plain, 0.95),
                             "tool_turns": len(tool), "plain_turns": len(plain)},
        "first_after_serving_s": round(statistics.median(firsts), 2) if firsts else None,
        "busy_503s": sum(s.get("busy_503s", 0) for r in main for s in r["steps"]),
        "failed": [r["id"] for r in main if not r["ok"]],
    }
