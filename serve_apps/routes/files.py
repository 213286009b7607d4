"""Files: uploading one (to attach to a message) and reading it back, with byte ranges.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from typing import Annotated

from fastapi import APIRouter, File, Header, UploadFile
from fastapi.responses import Response

from serve_apps.http.deps import GatewayDep, Owner, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.ids import RowId
from serve_apps.http.models import FileUploaded
from serve_apps.http.openapi import ANY_BYTES
from serve_apps.http.ranges import byte_range_response

router = APIRouter()
ByteRange = Annotated[str | None, Header(alias="Range", description="One `bytes=first-last` range (206), "
                                                                     "or none for the whole file.")]
DOWNLOAD = {
    200: {"description": "The whole file, in its own media type.", "content": ANY_BYTES},
    206: {"description": "The range asked for (Content-Range names it).", "content": ANY_BYTES},
    416: {"description": "A range the file cannot satisfy (Content-Range names its size); no body.", "content": {}},
}


@router.post("/files", status_code=201, responses=error_responses(413))
async def upload(_owner: Owner, gw: GatewayDep, file: Annotated[UploadFile, File()]) -> FileUploaded:
    limit = gw.config.max_upload_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise ApiError(413, "file_too_large", f"Files are limited to {limit} bytes.")
    if not data:
        raise ApiError(422, "invalid_request", "file: the file is empty")
    name = (file.filename or "upload").rsplit("/", 1)[-1][:200]
    record = await gw.store.add_file(name, file.content_type or "application/octet-stream", data)
    return FileUploaded(id=record.id, name=record.name, mime=record.mime, size=record.size,
                        attachment=f"[attachment file:{record.id} {record.name}]")


@router.get("/files/{file_id}", response_model=None, responses=DOWNLOAD)
async def download(file_id: RowId, _owner: Owner, store: StoreDep, byte_range: ByteRange = None) -> Response:
    found = await store.get_file(file_id)
    if found is None:
        raise ApiError(404, "not_found", "No file with that id.")
    meta, data = found
    return byte_range_response(data, meta.mime, meta.name, byte_range)
