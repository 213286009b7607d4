"""The relay's error vocabulary: one status and one code per failure, as clients of the
original relay match on them. Errors cross Ray as a typed `RelayFault` (an `ErrorInfo` and the
rate limit's retry-after), never as exceptions."""

from __future__ import annotations

from actors.common.errors import ErrorInfo, IriisError
from actors.relay.messages import RelayFault

STATUS: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "not_found": 404,
    "session_read_only": 409,
    "limit_exceeded": 409,
    "gone": 410,
    "payload_too_large": 413,
    "rate_limited": 429,
    "internal": 500,
}


class RelayError(IriisError):
    """A refusal with its documented code; `retry_after` only for rate_limited."""

    code = "internal"

    def __init__(self, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message, code)
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        return STATUS[self.code]

    def fault(self) -> RelayFault:
        """The error as it crosses Ray."""
        return RelayFault(error=self.info(), retry_after=self.retry_after)

    @classmethod
    def from_fault(cls, fault: RelayFault) -> RelayError:
        return cls(fault.error.code, fault.error.message, fault.retry_after)


def error_body(info: ErrorInfo) -> dict[str, dict[str, str]]:
    """The contract's error body: `{"error": {"code", "message"}}`."""
    return {"error": info.model_dump()}
