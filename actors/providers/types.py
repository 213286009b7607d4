"""What a model stream yields, and how a provider call can fail."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from actors.common.errors import IriisError


class TextDelta(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ToolCall(BaseModel):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class StreamEnd(BaseModel):
    type: Literal["end"] = "end"
    finish_reason: str | None = None
    provider: str | None = None
    model: str | None = None


Delta = TextDelta | ToolCall | StreamEnd

FailureKind = Literal[
    "timeout", "server", "rate_limit", "not_found", "too_many_images", "auth", "bad_request", "network",
    "not_ready",
]


class ProviderError(IriisError):
    """A failed provider call, classified so the router can react to each kind differently."""

    code = "provider_error"

    def __init__(self, kind: FailureKind, message: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    def plain(self) -> str:
        """A sentence a person can read, with no trace and no key in it."""
        return {
            "timeout": "The model provider did not answer in time.",
            "server": "The model provider is overloaded or failing right now.",
            "rate_limit": "The model provider is rate-limiting requests right now.",
            "not_found": "The configured model no longer exists at the provider.",
            "too_many_images": "The model provider refused the number of images.",
            "auth": "The model provider refused the API key; check OPENAI_API_KEY.",
            "bad_request": "The model provider refused the request.",
            "network": "The model provider could not be reached.",
            "not_ready": "The local model is not ready yet.",
        }[self.kind]


class AllProvidersFailed(IriisError):
    code = "no_provider"
    def __init__(self, last: ProviderError | None) -> None:
        super().__init__(last.plain() if last else "No model provider is available.")
        self.last = last
