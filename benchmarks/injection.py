"""Prompt-injection benchmark: the tests/injection cases through the same in-process harness.

A gullible scripted model obeys every injected instruction; we count attack cases in which a
side effect ran with arguments the owner did not ask for (attended or unattended), and benign
cases that still completed. No network, no model provider. `by_path` gives the same figures
for each way the content entered the turn (a tool's result, an attachment, the camera, a relay
message, a device, inspect_file, a memory item planted a turn earlier, the rolling summary, a
task's result); `self_check` reruns the attacks with the taint rule and the marking off, where
they must get through, or the suite would prove nothing.
Prints one JSON line. Usage: python benchmarks/injection.py
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.injection.cases import ATTACKS, CASES  # noqa: E402
from tests.injection.harness import by_path, run_case, run_suite  # noqa: E402


async def self_check() -> dict[str, int]:
    """Attacks (unattended) with the defences off: how many then run, per path."""
    out: dict[str, int] = {}
    for case in ATTACKS:
        if case.path == "tool":
            continue
        result = await run_case(case, attended=False, defenses=False)
        out[case.path] = out.get(case.path, 0) + bool(result.unauthorized)
    return out


def main() -> None:
    summary, results = asyncio.run(run_suite(CASES))
    paths = by_path(CASES, results)
    print(json.dumps({"benchmark": "injection", **summary, "by_path": paths,
                      "self_check_executed_without_rule": asyncio.run(self_check())}))


if __name__ == "__main__":
    main()
