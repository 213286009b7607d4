"""The typed events of a chat turn, as the SSE stream carries them."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

EventType = Literal["session", "sentence", "tool", "confirm", "done", "error", "result"]


class TurnEvent(BaseModel):
    type: EventType
    data: dict[str, Any] = Field(default_factory=dict)

    def sse(self) -> str:
        return f"event: {self.type}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n"
