"""Waiting in tests without fixed sleeps: poll a condition until it holds or a deadline passes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
# A page's waits in Chromium (Playwright's default is 30 s): generous, so that a loaded 2-core
# machine slows a page test down without failing it.
WAIT_MS = 90_000


def until(predicate: Callable[[], T], timeout: float = 30.0, describe: Callable[[], str] | None = None,
          every: float = 0.1) -> T:
    """The predicate's first truthy value; AssertionError (with `describe()`) past the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time" + (f": {describe()}" if describe else ""))
