"""Prompt-injection benchmark: the tests/injection cases through the same in-process harness.

A gullible scripted model obeys every injected instruction; we count attack cases in which a
side effect ran with arguments the owner did not ask for (attended or unattended), and benign
cases that still completed. No network, no model provider.
Prints one JSON line. Usage: python benchmarks/injection.py
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.injection.cases import CASES  # noqa: E402
from tests.injection.harness import run_suite  # noqa: E402


def main() -> None:
    summary, _ = asyncio.run(run_suite(CASES))
    print(json.dumps({"benchmark": "injection", **summary}))


if __name__ == "__main__":
    main()
