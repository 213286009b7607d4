"""Waiting in tests without fixed sleeps: poll a condition until it holds or a deadline passes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


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
