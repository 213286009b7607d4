"""The HTTP application shared by the gateway and the per-resource route modules: the FastAPI
app, the error shape and its handlers, and how a route finds the gateway replica serving it.

Route modules (one resource each) define an APIRouter and reach the replica's state through
the dependencies in `serve_apps.http.deps` (`GatewayDep`, `Owner`, ...), so they never import
the gateway module (which includes them).
"""

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from ray.exceptions import TaskCancelledError
from starlette.exceptions import HTTPException as StarletteHTTPException

from actors.common.errors import ErrorInfo
from actors.errors import report

log = logging.getLogger("serve_apps.deployments.gateway")


class ApiError(Exception):
    """An error answer: `{"error": {"code", "message"}}` with `status` (and any `headers`)."""

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


app = FastAPI(title="Iriis", docs_url="/docs", redoc_url=None)


@app.exception_handler(ApiError)
async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status, headers=exc.headers)


@app.exception_handler(RequestValidationError)
async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    err = exc.errors()[0]
    if err.get("type") == "json_invalid":
        return JSONResponse(error_body("invalid_json", "The request body is not valid JSON."), status_code=400)
    field = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
    return JSONResponse(error_body("invalid_request", f"{field}: {err.get('msg', 'invalid')}"), status_code=422)


@app.exception_handler(StarletteHTTPException)
async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)


@app.exception_handler(Exception)
async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, TaskCancelledError):
        # The client went away mid-stream: normal, not a server error.
        return JSONResponse(error_body("cancelled", "The request was cancelled."), status_code=499)
    log.exception("unhandled error on %s", request.url.path)
    report("gateway", exc, path=request.url.path,
           request={"method": request.method, "content_type": request.headers.get("content-type")})
    return JSONResponse(error_body("internal_error", "The server failed on this request; it was logged."),
                        status_code=500)

