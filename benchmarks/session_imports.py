"""What a conversation's actor process costs before it holds a conversation: the unique set
size (private pages) of a fresh Python after importing Ray, then each heavy package the
SessionActor pulls in, then the actor's own module. Prints one JSON line (MB after each step).

Usage: python benchmarks/session_imports.py
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STEPS = ["ray", "numpy", "pydantic", "sqlalchemy", "sqlalchemy.ext.asyncio", "asyncpg", "aiosqlite", "httpx",
         "actors.store.store", "actors.providers.router_actor", "actors.session.core", "actors.session.actor"]


def uss_mb() -> float:
    total = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return round(total / 1024, 1)


def main() -> None:
    after = {"python": uss_mb()}
    for name in STEPS:
        importlib.import_module(name)
        after[name] = uss_mb()
    print(json.dumps({"benchmark": "session_imports", "uss_mb_after": after,
                      "session_over_ray_mb": round(after["actors.session.actor"] - after["ray"], 1),
                      "goal_mb_per_conversation": 60}))


if __name__ == "__main__":
    main()
