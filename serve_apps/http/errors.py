"""The HTTP error shape: `ApiError` (what a route raises), the body every error answer has
(`{"error": {"code", "message"}}`) and the statuses a route documents. The app that turns them
into answers is `serve_apps.http.app`.
"""

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel

from actors.common.errors import ErrorInfo, IriisError


class ApiError(IriisError):
    """An error answer: `{"error": {"code", "message"}}` with `status` (and any `headers`)."""

    code = "http_error"   # each raise names its own

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers


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
