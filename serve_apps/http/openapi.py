"""The OpenAPI document, made to tell the truth (issue 31). FastAPI documents what it reads in a
route's signature; what it cannot see is added here, once, over the whole generated document:

- Every error is documented in the one shape the server answers (`ErrorBody`,
  `{"error": {"code", "message"}}`); FastAPI's `HTTPValidationError` is gone. Each operation lists
  the statuses it can answer: 422 (a NUL is refused anywhere) and 400 for a body that is not JSON,
  401/403 where its auth dependency can refuse (see AUTH), 404 where its path names something,
  503 (with Retry-After) wherever the replica's backpressure may answer first, and whatever the
  route declares itself with `error_responses(...)` (serve_apps.http.errors).
- The three ways a key arrives (bearer header, `?token=`, the page's cookie) are security
  schemes, required by every operation with an auth dependency.
- A route that answers a stream says so with its `response_class` (`EventStream`,
  `JsonLines`); `content` a route declares in `responses` (bytes of any type, or JSON or a
  stream by Accept) replaces FastAPI's JSON guess for that status.

No `from __future__ import annotations`: FastAPI reads these types at import time.
"""

from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any

import fastapi.routing
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from serve_apps.http.auth import COOKIE_NAME
from serve_apps.http.deps import require_manager_person, require_owner, require_person, require_person_or_device
from serve_apps.http.errors import ErrorBody


class EventStream(StreamingResponse):
    """Server-sent events (`text/event-stream`)."""

    media_type = "text/event-stream"


class JsonLines(StreamingResponse):
    """One JSON object per line (`application/x-ndjson`)."""

    media_type = "application/x-ndjson"


# One server-sent event as a client's parser hands it over: its name and its data (JSON text).
SSE_EVENT = {"type": "object", "description": "One server-sent event; `data` is a JSON object's text.",
             "properties": {"event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"},
                            "retry": {"type": "integer"}},
             "required": ["data"]}
EVENTS = {"text/event-stream": {"schema": SSE_EVENT}}
ANY_BYTES = {"*/*": {"schema": {"type": "string", "format": "binary",
                                "description": "The bytes, in the media type Content-Type names."}}}

# What each auth dependency refuses: 401 without an accepted key; 403 a device token where a
# person must sign in, or a member where an owner or an admin must.
AUTH: dict[Callable[..., Any], tuple[int, ...]] = {
    require_owner: (401, 403),
    require_person: (401, 403),
    require_manager_person: (401, 403),
    require_person_or_device: (401,),
}
SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer",
               "description": "The owner key, a person's session token, or (where allowed) a device token."},
    "token": {"type": "apiKey", "in": "query", "name": "token", "description": "The same key as `?token=`."},
    "cookie": {"type": "apiKey", "in": "cookie", "name": COOKIE_NAME,
               "description": "The page's HTTP-only cookie (POST /v1/auth/cookie)."},
}
SECURITY = [{name: []} for name in SCHEMES]
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}
WHY = {
    400: "The body is not valid JSON.",
    401: "No key, or one that is not accepted.",
    403: "This caller may not do this (a device token, a member, a wrong PIN).",
    404: "Nothing with that id here (or not the caller's).",
    422: "The request is not valid: the message names the field (a NUL character is never valid).",
    503: "The server is busy or a part of it is restarting: try again after Retry-After.",
}
ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def install(app: FastAPI, unthrottled: Iterable[str] = ()) -> None:
    """Make `app.openapi()` (and /openapi.json) the true document. `unthrottled`: the paths the
    backpressure never refuses (they do not document its 503)."""
    generate, exempt = app.openapi, frozenset(unthrottled)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            truthful(generate(), app.routes, exempt)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]


def truthful(document: dict[str, Any], routes: Iterable[BaseRoute], unthrottled: frozenset[str]) -> dict[str, Any]:
    """`document` (FastAPI's, for `routes`) corrected in place, and returned."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    body = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(body.pop("$defs", {}), ErrorBody=body)
    components["securitySchemes"] = SCHEMES
    for path, route in api_routes(routes):
        for method in route.methods if route.include_in_schema else ():
            operation = document["paths"].get(path, {}).get(method.lower())
            if operation is not None:
                _correct(operation, route, path not in unthrottled)
    return document


def api_routes(routes: Iterable[BaseRoute]) -> Iterator[tuple[str, APIRoute]]:
    """Each API route with the path it is served at. Older FastAPI lists them flat in
    `app.routes`; newer keeps an included router whole, and `iter_route_contexts` walks it."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)
    for route in contexts(list(routes)) if contexts else routes:
        original = getattr(route, "original_route", route)
        if isinstance(original, APIRoute):
            yield route.path_format, original


def refusals(dependant: Dependant) -> set[int]:
    """The statuses the auth dependencies under `dependant` answer with."""
    found: set[int] = set()
    stack = [dependant]
    while stack:
        current = stack.pop()
        found.update(AUTH.get(current.call, ()) if current.call else ())
        stack.extend(current.dependencies)
    return found


def _correct(operation: dict[str, Any], route: APIRoute, throttled: bool) -> None:
    responses: dict[str, Any] = operation["responses"]
    declared = {str(status): answer["content"] for status, answer in route.responses.items() if "content" in answer}
    for status, content in declared.items():
        if content:
            responses[status]["content"] = content
        else:  # an answer without a body
            responses[status].pop("content", None)
    statuses = refusals(route.dependant)
    if statuses:
        operation["security"] = SECURITY
    # 422 everywhere: besides each route's own checks, a NUL anywhere is refused (http/nul.py).
    statuses.add(422)
    if operation.get("requestBody"):
        statuses.add(400)
    if any(param["in"] == "path" for param in operation.get("parameters", [])):
        statuses.add(404)
    if throttled:
        statuses.add(503)
    for status in statuses:
        responses.setdefault(str(status), {})
    for answer in responses.values():
        if "text/event-stream" in answer.get("content", {}):
            answer["content"]["text/event-stream"] = {"schema": SSE_EVENT}
    for status, answer in responses.items():
        code = int(status) if status.isdigit() else 0
        if code < 400:
            continue
        answer["description"] = WHY.get(code) or answer.get("description") or HTTPStatus(code).phrase
        if status not in declared:
            answer["content"] = {"application/json": {"schema": ERROR_REF}}
        if code in (429, 503):
            answer["headers"] = RETRY_AFTER
    operation["responses"] = dict(sorted(responses.items()))
