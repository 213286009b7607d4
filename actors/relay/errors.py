"""The relay's error vocabulary: one status and one code per failure, as clients of the
original relay match on them. Errors cross Ray as plain dicts, never as exceptions."""

from __future__ import annotations

from typing import Any

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


class RelayError(Exception):
    """A refusal with its documented code; `retry_after` only for rate_limited."""

    def __init__(self, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        return STATUS[self.code]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": {"code": self.code, "message": self.message}}
        if self.retry_after is not None:
            out["retry_after"] = self.retry_after
        return out


def from_dict(data: dict[str, Any]) -> RelayError:
    err = data["error"]
    return RelayError(err["code"], err["message"], data.get("retry_after"))


def is_error(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("error"), dict) and "code" in data["error"]
