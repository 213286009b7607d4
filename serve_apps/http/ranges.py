"""Serving stored bytes with HTTP byte ranges (audio and video seek with these).

Uploaded bytes are someone's content, not our page: only media a browser shows without running
it (images other than SVG, audio, video, PDF) is served inline. Anything else (HTML, SVG,
scripts) is a download, never sniffed, and sandboxed if opened anyway, so an uploaded page can
never run on the app's origin with its cookie.
"""

import re
from urllib.parse import quote

from fastapi.responses import Response

RANGE = re.compile(r"\s*bytes=([0-9]*)-([0-9]*)\s*")
INLINE_PREFIXES = ("image/", "audio/", "video/")
NOT_INLINE = {"image/svg+xml"}


def content_headers(mime: str, name: str) -> dict[str, str]:
    """Disposition and safety headers for serving an uploaded file."""
    mime = mime.split(";")[0].strip().lower()
    inline = (mime.startswith(INLINE_PREFIXES) or mime == "application/pdf") and mime not in NOT_INLINE
    ascii_name = re.sub(r'[^A-Za-z0-9._ -]', "_", name)[:150] or "file"
    disposition = f"{'inline' if inline else 'attachment'}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
    headers = {"Content-Disposition": disposition, "X-Content-Type-Options": "nosniff"}
    if not inline:
        # Opened anyway (a download a browser chose to show): no script, no origin.
        headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return headers


def byte_range_response(data: bytes, mime: str, name: str, range_header: str | None) -> Response:
    """Serve bytes whole (200) or one `bytes=` range (206); an unsatisfiable range is 416."""
    headers = {"Accept-Ranges": "bytes", **content_headers(mime, name)}
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
