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
         timeout: float = 60.0) -> list[tuple[str, dict[str, Any]]]:
    body: dict[str, Any] = {"message": message}
    if session_id:
        body["session_id"] = session_id
    with client.stream("POST", "/v1/chat", json=body, headers={"Authorization": f"Bearer {key}"},
                       timeout=timeout) as resp:
        assert resp.status_code == 200, resp.read()
        return list(iter_events(resp))
