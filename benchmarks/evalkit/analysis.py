"""Reading agent-evaluation results back (notebooks/evaluation.ipynb): the records of one or
more runs, success by category and over runs, memory on against off, first-sentence latency,
and the failures with what was said. Pure."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.evalkit.summary import pct


def load_results(where: str | Path) -> list[dict[str, Any]]:
    """Every record in a results file, or in every agent_eval-*.jsonl of a directory."""
    where = Path(where)
    files = sorted(where.glob("agent_eval-*.jsonl")) if where.is_dir() else [where]
    records = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records.append(json.loads(line))
    return records


def _rate(rows: list[dict[str, Any]]) -> float:
    return round(100.0 * sum(r["ok"] for r in rows) / len(rows), 1) if rows else 0.0


def by_category(records: list[dict[str, Any]], memory: bool = True) -> list[tuple[str, int, int, float]]:
    """(category, scenarios, passed, success %) for one memory mode, worst first."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["memory"] == memory:
            groups[r["category"]].append(r)
    rows = [(k, len(v), sum(x["ok"] for x in v), _rate(v)) for k, v in groups.items()]
    return sorted(rows, key=lambda row: (row[3], row[0]))


def over_runs(records: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """(run, scenarios, success %) with memory on, oldest run first."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["memory"]:
            groups[r.get("run", "?")].append(r)
    return [(run, len(v), _rate(v)) for run, v in sorted(groups.items())]


def memory_effect(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Multi-conversation scenarios with memory on and off: success in each, and the margin."""
    on = [r for r in records if r["multi_session"] and r["memory"]]
    off = [r for r in records if r["multi_session"] and not r["memory"]]
    return {"on_n": len(on), "on_pct": _rate(on), "off_n": len(off), "off_pct": _rate(off),
            "margin_points": round(_rate(on) - _rate(off), 1) if on and off else None}


def latencies(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """First-sentence seconds of every step, split into tool turns and plain answers."""
    out: dict[str, list[float]] = {"tool": [], "plain": []}
    for r in records:
        for s in r["steps"]:
            if s.get("first_sentence_s") is not None:
                out["tool" if s["tool_turn"] else "plain"].append(s["first_sentence_s"])
    return out


def latency_table(records: list[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    return {kind: {"n": len(v), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for kind, v in latencies(records).items()}


def failures(records: list[dict[str, Any]]) -> list[str]:
    """Each failed scenario: which checks failed and why, then what was said and done."""
    out = []
    for r in records:
        if r["ok"]:
            continue
        lines = [f"{r['id']} [{r['category']}, memory {'on' if r['memory'] else 'off'}]"]
        lines += [f"  x {c['kind']}: {c['why']}" for c in r["checks"] if not c["ok"]]
        for s in r["steps"]:
            tools = ", ".join(f"{t['name']}({t.get('status')})" for t in s["tools"]) or "no tools"
            lines.append(f"  > [{s['conversation']}] {s['say']}")
            lines.append(f"  < {s['reply'][:300]!r} [{tools}]" + (f" error: {s['error']}" if s.get("error") else ""))
        out.append("\n".join(lines))
    return out
