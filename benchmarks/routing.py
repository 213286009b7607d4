"""Tool routing benchmark: does the server a message needs get offered, and at what size?

A deterministic catalogue (benchmarks/routing_data/catalogue.py) of personal-agent tool servers
and labelled user messages (benchmarks/routing_data/messages.py, slots filled with a fixed
seed). For each message we route with the previous message as context and count a hit when the
labelled server is offered, or is what one more_tools(need=<the message>) call would add.
No network, no model. Prints one JSON line. Usage: python benchmarks/routing.py
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.tools.routing import (  # noqa: E402
    MAX_TOOLS, ServerEntry, more_tools, offered_specs, route, schema_chars)
from actors.tools.spec import ToolSpec  # noqa: E402
from benchmarks.routing_data.catalogue import SERVERS  # noqa: E402
from benchmarks.routing_data.messages import HELD_OUT, MESSAGES, SLOTS  # noqa: E402

SEED = 20240611
_SLOT = re.compile(r"\{(\w+)\}")
_ENUM = re.compile(r"enum\((.*)\)")
_FORMATS = {"date": "date", "datetime": "date-time", "email": "email"}


def _parameter(spec: str) -> tuple[str, dict[str, Any], bool]:
    name, kind, description = (spec.split(":", 2) + ["", ""])[:3]
    required = name.endswith("*")
    name = name.rstrip("*")
    kind = kind or "string"
    schema: dict[str, Any]
    if enum := _ENUM.fullmatch(kind):
        schema = {"type": "string", "enum": enum.group(1).split("|")}
    elif kind == "list":
        schema = {"type": "array", "items": {"type": "string"}}
    elif kind in _FORMATS:
        schema = {"type": "string", "format": _FORMATS[kind]}
    else:
        schema = {"type": kind}
    if description:
        schema["description"] = description
    return name, schema, required


def _schema(params: list[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for spec in params:
        name, schema, is_required = _parameter(spec)
        properties[name] = schema
        if is_required:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def build_catalogue() -> list[ServerEntry]:
    """The benchmark's servers as ServerEntry, each tool a full ToolSpec."""
    return [ServerEntry(name=name, keywords=list(keywords),
                        tools=[ToolSpec(name=tool, tier=tier, description=description,
                                        parameters=_schema(params), source=name)
                               for tool, tier, description, params in tools])
            for name, keywords, tools in SERVERS]


def build_messages(seed: int = SEED) -> list[tuple[str, str, str | None]]:
    """(label, message, previous) with {slots} filled; the same seed gives the same list."""
    rng = random.Random(seed)

    def fill(text: str) -> str:
        return _SLOT.sub(lambda m: rng.choice(SLOTS[m.group(1)]), text)

    out: list[tuple[str, str, str | None]] = []
    for entry in (*MESSAGES, *HELD_OUT):
        label, message = entry[0], entry[1]
        previous = entry[2] if len(entry) == 3 else None
        out.append((label, fill(message), fill(previous) if previous else None))
    return out


def evaluate(servers: list[ServerEntry], messages: list[tuple[str, str, str | None]],
             max_tools: int = MAX_TOOLS) -> dict[str, Any]:
    hits = direct = 0
    tool_counts: list[int] = []
    sizes: list[int] = []
    misses: list[dict[str, Any]] = []
    for label, message, previous in messages:
        result = route(servers, message, previous, max_tools=max_tools)
        tool_counts.append(len(result.tools))
        sizes.append(schema_chars(offered_specs(servers, result)))
        if label in result.servers:
            hits += 1
            direct += 1
            continue
        added = more_tools(servers, message, set(result.servers))
        if added == label:
            hits += 1
        else:
            misses.append({"label": label, "message": message, "previous": previous,
                           "offered": result.servers, "more_tools": added})
    all_tools = [t for s in servers for t in s.tools]
    n = max(len(messages), 1)
    return {
        "benchmark": "routing",
        "servers": len(servers),
        "tools": len(all_tools),
        "messages": len(messages),
        "hit_rate": round(hits / n, 4),
        "hit_rate_without_more_tools": round(direct / n, 4),
        "mean_tools_offered": round(sum(tool_counts) / n, 2),
        "max_tools_offered": max(tool_counts, default=0),
        "mean_schema_chars": round(sum(sizes) / n),
        "baseline_all_tools_schema_chars": schema_chars(all_tools),
        "_misses": misses,
    }


def run() -> dict[str, Any]:
    return evaluate(build_catalogue(), build_messages())


def main() -> None:
    report = run()
    misses = report.pop("_misses")
    if "--misses" in sys.argv:
        for miss in misses:
            print(json.dumps(miss), file=sys.stderr)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
