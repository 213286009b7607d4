"""`iriis serve`'s progress line for the local model: its state, printed when it changes."""

from __future__ import annotations

import threading
import time

import ray

from actors.common.names import LOCAL_MODEL, find_actor

POLL_SECONDS = 5.0
# A line at least this often while it is getting ready, so a long build visibly moves.
REPEAT_SECONDS = 30.0


def watch(stop: threading.Event, out=print) -> threading.Thread:
    """Print "iriis: local model: ..." lines until it is ready, failed or off (or `stop`)."""

    def run() -> None:
        last, said_at = "", 0.0
        while not stop.wait(POLL_SECONDS):
            handle = find_actor(LOCAL_MODEL)
            if handle is None:
                continue
            try:
                status = ray.get(handle.state.remote(), timeout=10)
            except Exception:  # noqa: BLE001 - the actor restarting: try again next poll
                continue
            line = status.line()
            changed = line.split(",")[0] != last.split(",")[0]
            if changed or time.monotonic() - said_at > REPEAT_SECONDS:
                out(f"iriis: {line}", flush=True)
                last, said_at = line, time.monotonic()
            if status.state in ("ready", "failed", "off"):
                return

    thread = threading.Thread(target=run, name="local-model-progress", daemon=True)
    thread.start()
    return thread
