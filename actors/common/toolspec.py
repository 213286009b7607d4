"""What a tool is to the loop: its schema, its tier, and how its output may be trusted.

Tiers follow the devices spec: 0 reads, 1 small and undoable, 2 needs the owner's yes, 3 needs
the owner's PIN. Configuration speaks in words (read / auto / confirm / pin). The tier always
comes from configuration, never from the model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from actors.common.errors import IriisError


TierName = Literal["read", "auto", "confirm", "pin"]
TIER_BY_NAME: dict[str, int] = {"read": 0, "auto": 1, "confirm": 2, "pin": 3}
CONFIRM, PIN = 2, 3


def tier_from(value: str | int) -> int:
    if isinstance(value, int):
        if not 0 <= value <= 3:
            raise ValueError(f"tier must be 0-3, got {value}")
        return value
    try:
        return TIER_BY_NAME[value]
    except KeyError:
        raise ValueError(f"tier must be one of {', '.join(TIER_BY_NAME)}, got {value!r}") from None


class ToolSpec(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]
    tier: int = Field(default=1, ge=0, le=3)
    source: str = "builtin"
    # Whether what it returns came from outside the owner's control (web pages, files, devices).
    untrusted_output: bool = True
    # Shell-like tools: the model must say in plain words what the call is for, and that
    # sentence, not the command, is what the owner is asked about.
    purpose_required: bool = False

    def schema_for_model(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class ToolOutput(BaseModel):
    text: str
    files: list[int] = Field(default_factory=list)
    # Where the content came from when the tool can say more precisely than its server's name:
    # a memory item learned from outside content (`memory:12`), a stored file (`file:12 notes.txt`).
    sources: list[str] = Field(default_factory=list)


class ToolResult(BaseModel):
    name: str
    ok: bool
    content: str
    files: list[int] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)


Handler = Callable[[dict[str, Any]], Awaitable[str | ToolOutput]]


class ToolError(IriisError):
    """A tool refusing its input; the message goes back to the model."""

    code = "tool_error"
