"""The FastAPI app the gateway serves, and how every error becomes an answer in the one error
shape (`serve_apps.http.errors`): a route's `ApiError`, a request that fails validation (422, or
400 for a body that is not JSON), an unknown path or method, and anything unexpected (500, logged
and kept for GET /v1/errors; a request cancelled by its client is a 499).

The routes are gathered in `serve_apps.deployments.api` and included once by the gateway, which
also finishes the app (its state, /static, /mcp) in its constructor.
"""

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray.exceptions import RayTaskError, TaskCancelledError
from starlette.exceptions import HTTPException as StarletteHTTPException

from actors.common.errors import IriisError
from actors.recent_errors import report
from serve_apps.http.errors import ApiError, error_body, status_of

log = logging.getLogger("serve_apps.deployments.gateway")

# Every API route is served under this prefix; the page and its files are not.
API_PREFIX = "/v1"


async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status, headers=exc.headers)


async def _domain_error(request: Request, exc: IriisError) -> JSONResponse:
    """A domain error no route turned into an `ApiError`: its own code, at the status the one
    table gives it (a 503 says when to come back); one the table does not know is a 500."""
    status = status_of(exc)
    if status is None:
        return await _unhandled(request, exc)
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, IriisError):
        exc = exc.cause   # raised in an actor: its own message, not Ray's traceback around it
    retry = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(retry)} if status == 503 and retry is not None else None
    return JSONResponse(error_body(exc.code, exc.message), status_code=status, headers=headers)


async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    err = exc.errors()[0]
    if err.get("type") == "json_invalid":
        return JSONResponse(error_body("invalid_json", "The request body is not valid JSON."), status_code=400)
    field = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
    return JSONResponse(error_body("invalid_request", f"{field}: {err.get('msg', 'invalid')}"), status_code=422)


async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, TaskCancelledError):
        # The client went away mid-stream: normal, not a server error.
        return JSONResponse(error_body("cancelled", "The request was cancelled."), status_code=499)
    log.exception("unhandled error on %s", request.url.path)
    report("gateway", exc, path=request.url.path,
           request={"method": request.method, "content_type": request.headers.get("content-type")})
    return JSONResponse(error_body("internal_error", "The server failed on this request; it was logged."),
                        status_code=500)


def answer_errors(target: FastAPI) -> None:
    """Give `target` (the gateway's app, or a test's app around one router) the error answers."""
    target.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    target.add_exception_handler(IriisError, _domain_error)  # type: ignore[arg-type]
    target.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    target.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    target.add_exception_handler(Exception, _unhandled)


app = FastAPI(title="Iriis", docs_url="/docs", redoc_url=None)
answer_errors(app)
