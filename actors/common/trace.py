"""Opt-in timing marks along a turn's path, for the benchmarks' breakdowns.

With IRIIS_TRACE set to a file, `mark(stage, key)` appends one JSON line: the stage, a key (a
session or turn id), the wall-clock time and the process. Every process on one machine appends
to the same file, so benchmarks/chat_overhead.py can say how long each hop took (the Serve
proxy, the gateway, the session actor, the agent loop, the provider). Unset, a mark costs one
attribute read. No Ray.
"""

from __future__ import annotations

import json
import os
import time

PATH = os.environ.get("IRIIS_TRACE") or None


def mark(stage: str, key: str | None = None) -> None:
    if PATH is None:
        return
    line = json.dumps({"stage": stage, "key": key, "t": time.time(), "pid": os.getpid()})
    with open(PATH, "a") as f:
        f.write(line + "\n")
