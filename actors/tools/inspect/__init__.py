"""Look inside a stored file and say what is in it, in text a model can use.

Documents become their text (PDF, Word, Excel, PowerPoint, text and code); images are
described by a vision model when one is configured and read by OCR otherwise; audio is
transcribed when a speech-to-text provider is configured; a video becomes a contact sheet
(stored back as a PNG file) plus its soundtrack transcript.

Decoding and OCR are CPU-bound, so they run in worker threads and the MCP server's event
loop keeps answering. The heavy libraries are imported where they are used: a PDF question
should not wait for the OCR models or FFmpeg to load.
"""

from __future__ import annotations

import asyncio
import io
import mimetypes
import os
import zipfile
from collections.abc import Mapping

from actors.common.attachments import extract_text
from actors.tools.inspect.docs import document_text
from actors.tools.inspect.images import inspect_image
from actors.tools.inspect.media import inspect_audio, video_stream
from actors.tools.inspect.model import (
    MAX_CHARS,
    NO_SPEECH,
    NO_VISION,
    FileKind,
    Inspection,
    SaveFile,
    Tile,
    cap_text,
)
from actors.tools.inspect.video import contact_sheet, inspect_video

__all__ = ["MAX_CHARS", "NO_SPEECH", "NO_VISION", "FileKind", "Inspection", "SaveFile", "Tile", "contact_sheet",
           "detect_kind", "inspect_bytes", "inspect_file"]

# -- kinds --------------------------------------------------------------------------------

_OFFICE_MIMES: dict[str, FileKind] = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}
_ZIP_MARKERS: tuple[tuple[str, FileKind], ...] = (
    ("word/document.xml", "docx"), ("xl/workbook.xml", "xlsx"), ("ppt/presentation.xml", "pptx"),
)
_GENERIC_MIMES = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/zip",
                            "application/x-zip-compressed"})


def detect_kind(data: bytes, mime: str, name: str | None) -> FileKind:
    """What the file is: the declared mime first, then the name, then the bytes themselves."""
    base = (mime or "").split(";", 1)[0].strip().lower()
    if base in _GENERIC_MIMES and name:
        base = (mimetypes.guess_type(name)[0] or base).lower()
    if base == "application/pdf" or data.startswith(b"%PDF-"):
        return "pdf"
    if base == "image/svg+xml":
        return "text"  # SVG is XML that Pillow cannot draw; its text is the useful part
    if base in _OFFICE_MIMES:
        return _OFFICE_MIMES[base]
    if data.startswith(b"PK\x03\x04"):
        try:
            names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
        except zipfile.BadZipFile:
            names = set()
        for marker, kind in _ZIP_MARKERS:
            if marker in names:
                return kind
    for family in ("image", "audio", "video"):
        if base.startswith(family + "/"):
            return family  # type: ignore[return-value]
    if base.startswith("text/") or extract_text(b"", mime, name) == "":
        return "text"  # extract_text decodes text kinds, so empty bytes give ""
    return _sniff_media(data)


def _sniff_media(data: bytes) -> FileKind:
    try:
        from PIL import Image  # lazy: Pillow loads only when an image is read

        with Image.open(io.BytesIO(data)) as img:
            img.verify()
        return "image"
    except Exception:  # Pillow raises many types for non-images
        pass
    try:
        import av  # lazy: PyAV (FFmpeg) loads only for audio or video

        with av.open(io.BytesIO(data)) as container:
            if video_stream(container) is not None:
                return "video"
            if container.streams.audio:
                return "audio"
    except Exception:  # FFmpeg errors for anything it cannot demux
        pass
    return "other"


# -- entry points -------------------------------------------------------------------------


async def inspect_file(
    data: bytes,
    mime: str,
    name: str | None,
    question: str | None = None,
    *,
    save: SaveFile | None = None,
    environ: Mapping[str, str] | None = None,
    max_chars: int = MAX_CHARS,
) -> Inspection:
    """Inspect one file's bytes. ``save`` stores a derived file (a contact sheet) and returns its id."""
    env = os.environ if environ is None else environ
    question = (question or "").strip() or None
    display = name or "unnamed file"
    kind = await asyncio.to_thread(detect_kind, data, mime, name)
    if kind == "image":
        result = await inspect_image(data, display, question, env)
    elif kind == "audio":
        result = await inspect_audio(data, mime, display, env)
    elif kind == "video":
        result = await inspect_video(data, mime, display, question, save, env)
    else:
        text = await asyncio.to_thread(document_text, kind, data, mime, name)
        result = Inspection(kind=kind, text=text)
    result.text = cap_text(result.text, max_chars)
    return result


async def inspect_bytes(
    data: bytes,
    mime: str,
    name: str | None,
    question: str | None = None,
    *,
    save: SaveFile | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The text of :func:`inspect_file`, for callers that want only the words."""
    return (await inspect_file(data, mime, name, question, save=save, environ=environ)).text
