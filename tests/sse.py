"""Read a text/event-stream response into typed events, as a client would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx


def iter_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    event, data = "message", ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif line == "" and data:
            yield event, json.loads(data)
            event, data = "message", ""


def chat(client: httpx.Client, key: str, message: str, session_id: str | None = None,
         timeout: float = 60.0, **fields: Any) -> list[tuple[str, dict[str, Any]]]:
    body: dict[str, Any] = {"message": message, **fields}
    if session_id:
        body["session_id"] = session_id
    with client.stream("POST", "/v1/chat", json=body, headers={"Authorization": f"Bearer {key}"},
                       timeout=timeout) as resp:
        if resp.status_code != 200:  # say what the server logged, not only that it failed
            errors = client.get("/v1/errors", headers={"Authorization": f"Bearer {key}"}).text[-4000:]
            raise AssertionError(f"{resp.status_code} {resp.read()!r}; recent server errors: {errors}")
        return list(iter_events(resp))


class LiveChat:
    """A chat streamed on a thread, so a test can act mid-turn (confirm, cancel, disconnect)."""

    def __init__(self, base_url: str, key: str, body: dict[str, Any]) -> None:
        import queue
        import threading

        self.events: list[tuple[str, dict[str, Any]]] = []
        self._queue: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        self._stop = threading.Event()
        self.status: int | None = None
        self.cut = False
        self._thread = threading.Thread(target=self._run, args=(base_url, key, body), daemon=True)
        self._thread.start()

    def _run(self, base_url: str, key: str, body: dict[str, Any]) -> None:
        try:
            with httpx.Client(base_url=base_url, timeout=120) as client:
                with client.stream("POST", "/v1/chat", json=body, headers={"Authorization": f"Bearer {key}"}) as resp:
                    self.status = resp.status_code
                    for event in iter_events(resp):
                        self.events.append(event)
                        self._queue.put(event)
                        if self._stop.is_set():
                            break  # leaving the `with` closes the connection: the client went away
        except (httpx.RemoteProtocolError, httpx.ReadError):
            self.cut = True  # the server's end of the stream went away mid-response
        self._queue.put(None)

    def wait_for(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        """The next event of this kind (earlier events of other kinds are skipped)."""
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {kind!r} event within {timeout}s; saw {self.events}") from None
            if item is None:
                raise AssertionError(f"stream ended without {kind!r}; saw {self.events}")
            if item[0] == kind:
                return item[1]

    def disconnect(self) -> None:
        self._stop.set()

    def join(self, timeout: float = 60.0) -> list[tuple[str, dict[str, Any]]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "chat stream did not end"
        return self.events
