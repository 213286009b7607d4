"""Serving stored bytes with HTTP byte ranges (audio and video seek with these)."""

import re

from fastapi.responses import Response

RANGE = re.compile(r"\s*bytes=(\d*)-(\d*)\s*")


def byte_range_response(data: bytes, mime: str, name: str, range_header: str | None) -> Response:
    """Serve bytes whole (200) or one `bytes=` range (206); an unsatisfiable range is 416."""
    headers = {"Accept-Ranges": "bytes", "Content-Disposition": f'inline; filename="{name}"'}
    size = len(data)
    if not range_header:
        return Response(data, media_type=mime, headers=headers)
    match = RANGE.fullmatch(range_header)
    if not match or match.groups() == ("", ""):
        return Response(status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"})
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    if start >= size or start > end:
        return Response(status_code=416, headers={**headers, "Content-Range": f"bytes */{size}"})
    headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    return Response(data[start:end + 1], status_code=206, media_type=mime, headers=headers)
