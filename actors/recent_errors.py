"""The recent-errors ring the owner reads at GET /v1/errors (module `actors.recent_errors`; the error
model itself is `actors.common.errors`).

`ErrorRing` is the pure buffer; `ErrorLog` is the singleton actor every process reports to,
so errors from any gateway replica, session or agent loop land in one place.
"""

from __future__ import annotations

import time
import traceback
from collections import deque
from typing import Any

import ray
from pydantic import BaseModel, Field

from actors.common.names import ERROR_LOG, NAMESPACE
from actors.logmask import mask_secrets

ERROR_LOG_NAME = ERROR_LOG
RING_SIZE = 200


class ErrorEntry(BaseModel):
    ts: float = Field(default_factory=time.time)
    source: str
    path: str | None = None
    error: str
    trace: str = ""
    request: dict[str, Any] = Field(default_factory=dict)


def make_entry(source: str, exc: BaseException, path: str | None = None,
               request: dict[str, Any] | None = None) -> ErrorEntry:
    """Keep the last few frames only: enough to find the line, short enough to read on a phone."""
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4)
    return ErrorEntry(
        source=source, path=path, error=mask_secrets(f"{type(exc).__name__}: {exc}")[:500],
        trace=mask_secrets("".join(frames))[-2000:], request=request or {},
    )


class ErrorRing:
    def __init__(self, size: int = RING_SIZE) -> None:
        self._items: deque[ErrorEntry] = deque(maxlen=size)

    def add(self, entry: ErrorEntry) -> None:
        self._items.append(entry)

    def recent(self, limit: int = 50) -> list[ErrorEntry]:
        return list(self._items)[-limit:][::-1]


@ray.remote(num_cpus=0, max_restarts=-1)
class ErrorLog:
    def __init__(self) -> None:
        self.ring = ErrorRing()

    def record(self, entry: ErrorEntry) -> None:
        self.ring.add(entry)

    def recent(self, limit: int = 50) -> list[ErrorEntry]:
        return self.ring.recent(limit)


def error_log() -> Any:
    return ErrorLog.options(name=ERROR_LOG_NAME, namespace=NAMESPACE, get_if_exists=True,
                            lifetime="detached").remote()


def report(source: str, exc: BaseException, path: str | None = None,
           request: dict[str, Any] | None = None) -> None:
    """Fire and forget: reporting an error must never raise or wait.

    Outside a running Ray (a unit test, a CLI command) there is no log to reach, and reaching
    for one would start a whole Ray cluster in this process: only the process log keeps it."""
    if not ray.is_initialized():
        return
    try:
        error_log().record.remote(make_entry(source, exc, path, request))
    except Exception:  # noqa: BLE001 - the error reporter is the last line; never let it fail a request
        pass
