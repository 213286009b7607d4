"""The HTTP error shape: `ApiError` (what a route raises), the body every error answer has
(`{"error": {"code", "message"}}`) and the statuses a route documents. The app that turns them
into answers is `serve_apps.http.app`.
"""

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel

from actors.common.errors import ErrorInfo, IriisError


# The code of every answer that means "busy now, come back after Retry-After" (503).
OVERLOADED = "overloaded"

# The one table from a domain error's code (`IriisError.code`) to the status it answers with
# when it reaches the HTTP edge without a route turning it into an `ApiError` of its own. A code
# not listed is the server's fault: 500, logged (serve_apps/http/app.py).
HTTP_STATUS: dict[str, int] = {
    "bad_expression": 422, "invalid_repeat": 422, "memory_refused": 422, "weights_refused": 422,
    "bad_frame": 422, "bad_message": 422, "bad_clip": 422,
    "session_not_found": 404, "not_found": 404,
    "refused": 403, "invalid_token": 401, "conflict": 409, "gone": 410, "too_large": 413,
    "fetch_failed": 502, "provider_error": 502, "tool_server_error": 502, "tool_error": 502,
    OVERLOADED: 503, "no_provider": 503, "engine_missing": 503, "detector_unavailable": 503,
    "ocr_unavailable": 503,
}


def status_of(error: IriisError) -> int | None:
    """The HTTP status `error` answers with, or None for a server fault."""
    return HTTP_STATUS.get(error.code)


class ApiError(IriisError):
    """An error answer: `{"error": {"code", "message"}}` with `status` (and any `headers`)."""

    code = "http_error"   # each raise names its own

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers


class SocketClosed(IriisError):
    """A WebSocket ends here: closed with the protocol's `close_code` and `reason` (the voice and
    device sockets raise it from deep in their loops; the socket's handler closes with it)."""

    code = "socket_closed"

    def __init__(self, close_code: int, reason: str = "") -> None:
        super().__init__(reason)
        self.close_code, self.reason = close_code, reason


class ErrorBody(BaseModel):
    """Every error answer's body: `{"error": {"code", "message"}}` (an import's 422 also lists
    its bad `lines` in `error`)."""

    error: ErrorInfo


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """For a route's `responses=`: the error statuses it answers beyond the ones every route of
    its kind documents (`serve_apps.http.openapi` adds those, and the body's shape, to each)."""
    return {status: {"description": HTTPStatus(status).phrase} for status in statuses}
