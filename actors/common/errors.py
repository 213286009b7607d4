"""One error shape for every boundary in the house.

Between actors, deployments and sockets an error travels as `ErrorInfo` (`code`, `message`);
HTTP wraps it as `{"error": {"code", "message"}}`, SSE and WebSocket send it as an `error` event.
Each boundary raises its own subclass of `IriisError`, so a caller catches one family.
"""

from __future__ import annotations

from pydantic import BaseModel


class ErrorInfo(BaseModel):
    """What went wrong, in a stable machine code and one sentence for a person."""

    code: str
    message: str


class IriisError(Exception):
    """Base of every error the house raises on purpose: it carries an `ErrorInfo`."""

    code = "internal_error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def info(self) -> ErrorInfo:
        return ErrorInfo(code=self.code, message=self.message)
