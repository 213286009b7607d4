"""Where the local model stands, as one pydantic model the actor reports and the routes show."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field

State = Literal["off", "getting_ready", "ready", "failed"]
PROVIDER = "local"


class LocalStatus(BaseModel):
    state: State = "getting_ready"
    model: str = ""
    # What it is doing now: "build", "weights", "install", "load", "serve".
    stage: str = "starting"
    detail: str = ""
    stage_started: float = Field(default_factory=time.time)
    base_url: str | None = None
    # memory's learning calls go to a second server on the same weights, paused while a chat
    # turn runs; None when it is not up (they then share the chat server)
    learning_url: str | None = None
    error: str | None = None
    restarts: int = 0

    @property
    def key(self) -> str:
        return f"{PROVIDER}/{self.model or 'off'}"

    def line(self, now: float | None = None) -> str:
        """One sentence for a person: the terminal, /v1/providers and the stand-in's replies."""
        if self.state == "ready":
            return f"local model: ready ({self.model})"
        if self.state == "off":
            return f"local model: off ({self.detail or self.error or 'not enabled'})"
        if self.state == "failed":
            return f"local model: failed ({self.error})"
        took = max(0.0, (now or time.time()) - self.stage_started)
        detail = f": {self.detail}" if self.detail else ""
        return f"local model: getting ready ({self.stage}{detail}, {took / 60:.1f} min so far)"

    def clause(self, now: float | None = None) -> str:
        """The same, as part of a sentence the stand-in says."""
        if self.state == "failed":
            return f"the local model failed to start ({self.error})"
        if self.state == "off":
            return f"the local model is off ({self.detail})"
        return "the local model is " + self.line(now).removeprefix("local model: ")

    def moved(self, stage: str, detail: str = "") -> "LocalStatus":
        if stage != self.stage:
            self.stage_started = time.time()
        self.stage, self.detail = stage, detail
        return self
