"""The relay's HTTP surface: the eight endpoints of the iris contract, over RelayService.

`build_relay_app(service, peer=False)` is the host's localhost listener (it alone creates
sessions); `peer=True` is what the TLS listener serves to other machines. The service answers
with typed models (`actors.relay.messages`), dumped here to the contract's JSON. Nothing here
blocks the event loop: an upload's bytes are written to disk in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import uuid
from typing import BinaryIO

from pydantic import BaseModel

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from actors.common.ids import MAX_ROW_ID, ascii_digits, ascii_int, over_cap
from actors.recent_errors import report
from actors.relay.envelope import validate_post
from actors.relay.errors import RelayError, error_body
from actors.relay.messages import Envelope, FileFound
from actors.relay.service import Clock, RelayService

log = logging.getLogger(__name__)
# Upload bytes gathered before each write, so a worker thread is used per megabyte, not per chunk.
WRITE_BYTES = 1 << 20


def error_response(exc: RelayError) -> JSONResponse:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONResponse(error_body(exc.info()), status_code=exc.status, headers=headers)


def model_response(model: BaseModel, status_code: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(), status_code=status_code)


def _key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


def _int_param(request: Request, name: str, default: int, minimum: int) -> int:
    """A plain integer query parameter (ASCII digits, an optional minus) from `minimum` to
    2^31 - 1, the most a stored sequence number can be; anything else is `invalid_request`."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    digits = raw[1:] if raw.startswith("-") else raw
    if not ascii_digits(digits):
        raise RelayError("invalid_request", f"{name} must be an integer")
    value = ascii_int(digits)
    if value is None:
        raise RelayError("invalid_request", f"{name} must be at most {MAX_ROW_ID}")
    if raw.startswith("-"):
        value = -value
    if value < minimum:
        raise RelayError("invalid_request", f"{name} must be at least {minimum}")
    return value


async def _read_capped(request: Request, cap: int) -> bytes:
    if over_cap(request.headers.get("content-length"), cap):
        raise RelayError("payload_too_large", f"the body is over {cap} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise RelayError("payload_too_large", f"the body is over {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _open_spool(folder: str) -> tuple[str, BinaryIO]:
    fd, path = tempfile.mkstemp(dir=folder, prefix="up-")
    return path, os.fdopen(fd, "wb")


def _write(out: BinaryIO, parts: list[bytes]) -> None:
    out.write(b"".join(parts))


def _abandon(out: BinaryIO, path: str) -> None:
    out.close()
    if os.path.exists(path):
        os.unlink(path)


async def _spool(request: Request, cap: int, folder: str) -> tuple[str, int]:
    """Stream an upload to a temporary file under the data folder, refusing it past `cap`.
    The file is opened, written and closed in worker threads."""
    if over_cap(request.headers.get("content-length"), cap):
        raise RelayError("payload_too_large", f"files are at most {cap} bytes")
    path, out = await asyncio.to_thread(_open_spool, folder)
    size = 0
    pending: list[bytes] = []
    pending_bytes = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                raise RelayError("payload_too_large", f"files are at most {cap} bytes")
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes >= WRITE_BYTES:
                await asyncio.to_thread(_write, out, pending)
                pending, pending_bytes = [], 0
        if pending:
            await asyncio.to_thread(_write, out, pending)
        await asyncio.to_thread(out.close)
    except BaseException:
        await asyncio.shield(asyncio.to_thread(_abandon, out, path))
        raise
    return path, size


class _Handlers:
    """The contract's endpoints over one service; each session endpoint authorizes first."""

    def __init__(self, service: RelayService) -> None:
        self.service = service
        self.limits = service.limits

    async def authorized(self, request: Request) -> str:
        uid = request.path_params["uid"]
        await self.service.authorize(uid, _key(request))
        return uid

    async def create_session(self, request: Request) -> Response:
        client = request.client.host if request.client else "unknown"
        created = await self.service.create(client, str(request.base_url))
        return JSONResponse(created.public(), status_code=201)

    async def post_message(self, request: Request) -> Response:
        uid = await self.authorized(request)
        message, metadata = validate_post(await _read_capped(request, self.limits.max_body_bytes))
        return model_response(await self.service.post(uid, message, metadata), 201)

    async def read_messages(self, request: Request) -> Response:
        uid = await self.authorized(request)
        since = _int_param(request, "since", 0, 0)
        limit = min(_int_param(request, "limit", 200, 1), 1000)
        return model_response(await self.service.call(uid, "read", since, limit, self.service.now()))

    async def wait(self, request: Request) -> Response:
        uid = await self.authorized(request)
        since = _int_param(request, "since", 0, 0)
        timeout = _wait_timeout(request, self.limits.max_wait_seconds)
        flt = request.query_params.get("filter")
        if flt not in (None, "", "urgent"):
            raise RelayError("invalid_request", "filter may only be urgent")
        result = await self.service.park(uid, since, timeout, flt == "urgent")
        return Response(status_code=204) if result is None else model_response(result)

    async def put_file(self, request: Request) -> Response:
        uid = await self.authorized(request)
        service = self.service
        name = request.path_params["name"]
        folder = os.path.join(service.config.data_dir, "tmp")
        tmp, size = await _spool(request, self.limits.max_file_bytes, folder)
        content_type = request.headers.get("content-type") or "application/octet-stream"
        # One token per upload: sent again through a restart, it is not stored twice.
        envelope: Envelope = await service.call(uid, "put_file", name, size, content_type, tmp, service.now(),
                                                uuid.uuid4().hex)
        return model_response(envelope, 201)

    async def list_files(self, request: Request) -> Response:
        uid = await self.authorized(request)
        return model_response(await self.service.call(uid, "files", self.service.now()))

    async def get_file(self, request: Request) -> Response:
        uid = await self.authorized(request)
        found: FileFound = await self.service.call(uid, "file", request.path_params["name"], self.service.now())
        if not await asyncio.to_thread(os.path.exists, found.path):
            raise RelayError("not_found", "the file is gone")
        # The stored type exactly as uploaded (no charset added), as the contract promises.
        return FileResponse(found.path, headers={"content-type": found.file.content_type})

    async def terminate(self, request: Request) -> Response:
        uid = await self.authorized(request)
        return model_response(await self.service.call(uid, "terminate", self.service.now()))

    async def admin_clock(self, request: Request) -> Response:
        body = await request.json()
        if isinstance(self.service.clock, Clock):
            self.service.clock.offset += float(body.get("advance", 0))
        return JSONResponse({"now": self.service.now()})

    async def admin_sweep(self, request: Request) -> Response:
        return JSONResponse(await self.service.sweep())


def _wait_timeout(request: Request, max_wait_seconds: float) -> float:
    """The long poll's `timeout` in seconds, capped at the configured most; the most by default."""
    raw = request.query_params.get("timeout")
    try:
        timeout = float(raw) if raw not in (None, "") else float(max_wait_seconds)
    except ValueError:
        raise RelayError("invalid_request", "timeout must be a number of seconds") from None
    if timeout < 0 or timeout != timeout:
        raise RelayError("invalid_request", "timeout must be between 0 and "
                         f"{max_wait_seconds}")
    return min(timeout, float(max_wait_seconds))


def _routes(h: _Handlers, peer: bool, admin: bool) -> list[Route]:
    """The contract's routes for one listener: the host's, or the peers' (`peer`)."""
    routes = [
        Route("/s/{uid}", h.post_message, methods=["POST"]),
        Route("/s/{uid}", h.read_messages, methods=["GET"]),
        Route("/s/{uid}/wait", h.wait, methods=["GET"]),
        Route("/s/{uid}/files", h.list_files, methods=["GET"]),
        Route("/s/{uid}/files/{name:path}", h.put_file, methods=["PUT"]),
        Route("/s/{uid}/files/{name:path}", h.get_file, methods=["GET"]),
        Route("/s/{uid}/terminate", h.terminate, methods=["POST"]),
    ]
    if not peer:
        # Session creation is the host's alone: it is never routed on the peers' listener.
        routes.insert(0, Route("/sessions", h.create_session, methods=["POST"]))
        if admin:
            routes += [Route("/_admin/clock", h.admin_clock, methods=["POST"]),
                       Route("/_admin/sweep", h.admin_sweep, methods=["POST"])]
    return routes


async def _on_relay_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RelayError)
    return error_response(exc)


async def _on_http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    # Unknown paths and methods alike: there is no such resource on this listener.
    if exc.status_code in (404, 405):
        return error_response(RelayError("not_found", "no such endpoint"))
    return error_response(RelayError("invalid_request", str(exc.detail)))


async def _on_fault(request: Request, exc: Exception) -> Response:
    log.exception("relay request failed: %s", request.url.path)
    report("relay.http", exc, path=request.url.path)
    return error_response(RelayError("internal", "the relay failed; this is not your fault"))


def build_relay_app(service: RelayService, peer: bool = False, admin: bool = False) -> Starlette:
    return Starlette(routes=_routes(_Handlers(service), peer, admin), exception_handlers={
        RelayError: _on_relay_error, HTTPException: _on_http_error, Exception: _on_fault})
