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
import base64
import io
import json
import math
import mimetypes
import os
import sys
import threading
import zipfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from actors.common.attachments import extract_text
from actors.settings import Kind, ProviderConfig

if TYPE_CHECKING:
    from PIL import Image as PILImage

FileKind = Literal["pdf", "docx", "xlsx", "pptx", "image", "audio", "video", "text", "other"]
SaveFile = Callable[[str, str, bytes], Awaitable[int]]

MAX_CHARS = 20_000
# Spreadsheets can hold a million rows; the model needs their shape, not all of them.
MAX_SHEET_ROWS = 500
MAX_SHEET_COLS = 50
# Speech endpoints commonly refuse uploads over 25 MB; 16 kHz mono WAV is 32 kB/s.
MAX_UPLOAD_BYTES = 24 * 1024 * 1024
MAX_TRANSCRIBE_SECONDS = MAX_UPLOAD_BYTES // 32_000
# Formats OpenAI-compatible transcription endpoints accept as they are.
_STT_FORMATS = frozenset({"flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm"})
# Formats vision endpoints accept as data URLs without conversion.
_VISION_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
VISION_MAX_SIDE = 2048
TILE_WIDTH = 320
TILE_MAX_HEIGHT = 360
TILE_GAP = 4
SHEET_COLUMNS = 3
# Beyond this gap between wanted frames a seek beats decoding every frame in between.
SEEK_GAP_S = 4.0

NO_VISION = ('No vision model is configured (a provider with kind "vision" in IRIIS_PROVIDERS), '
             "so the image was read by OCR only.")
NO_SPEECH = ('No speech-to-text is configured (a provider with kind "speech" in IRIIS_PROVIDERS), '
             "so the spoken words cannot be transcribed.")


class Tile(BaseModel):
    """One frame on a contact sheet: when it was taken and where it sits on the sheet."""

    time: float
    x: int
    y: int
    width: int
    height: int


class Inspection(BaseModel):
    kind: FileKind
    text: str
    # Files made while inspecting (a video's contact sheet).
    files: list[int] = Field(default_factory=list)
    tiles: list[Tile] = Field(default_factory=list)

    @property
    def timestamps(self) -> list[float]:
        return [t.time for t in self.tiles]


# -- providers ----------------------------------------------------------------------------


class ProviderError(Exception):
    """A provider call failed; the message is short and never holds the key."""


_PROVIDERS = TypeAdapter(list[ProviderConfig])


def configured_provider(kind: Kind, environ: Mapping[str, str] | None = None) -> ProviderConfig | None:
    """The first provider in IRIIS_PROVIDERS serving ``kind`` whose key is present."""
    env = os.environ if environ is None else environ
    raw = (env.get("IRIIS_PROVIDERS") or "").strip()
    if not raw:
        return None
    try:
        providers = _PROVIDERS.validate_python(json.loads(raw))
    except (json.JSONDecodeError, ValidationError) as exc:
        # The server's own settings check reports this properly; here it only means "none".
        print(f"inspect: IRIIS_PROVIDERS is not usable ({type(exc).__name__})", file=sys.stderr)
        return None
    for provider in providers:
        if kind not in provider.kinds or (kind == "vision" and provider.max_images < 1):
            continue
        key = env.get(provider.api_key_env, "").strip() if provider.api_key_env else ""
        if provider.api_key_env and not key:
            continue  # a named key that is missing would only earn a 401
        return provider.model_copy(update={"api_key": key or None})
    return None


def _timeout(environ: Mapping[str, str]) -> float:
    # Not IRIIS_PROVIDER_TIMEOUT: that bounds a chat reply's first token, while transcribing
    # a long recording legitimately takes minutes.
    try:
        return max(float(environ.get("IRIIS_INSPECT_TIMEOUT") or 120.0), 1.0)
    except ValueError:
        return 120.0


async def provider_post(
    provider: ProviderConfig,
    path: str,
    *,
    json_body: dict[str, Any] | None = None,
    files: dict[str, tuple[str, bytes, str]] | None = None,
    form: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """POST to an OpenAI-compatible provider and return the JSON body."""
    headers = {"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {}
    url = provider.base_url.rstrip("/") + path
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))) as client:
            resp = await client.post(url, headers=headers, json=json_body, files=files, data=form)
    except httpx.TimeoutException:
        raise ProviderError(f"{provider.name} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise ProviderError(f"{provider.name} could not be reached ({type(exc).__name__})") from None
    if resp.status_code >= 400:
        raise ProviderError(f"{provider.name} answered HTTP {resp.status_code}")
    try:
        body = resp.json()
    except ValueError:
        raise ProviderError(f"{provider.name} answered with something that is not JSON") from None
    if not isinstance(body, dict):
        raise ProviderError(f"{provider.name} answered with unexpected JSON")
    return body


async def _ask_vision(provider: ProviderConfig, image: bytes, mime: str, question: str, timeout: float) -> str:
    data_url = f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
    body = await provider_post(provider, "/chat/completions", timeout=timeout, json_body={
        "model": provider.models[0],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": question},
            {"type": "image_url", "image_url": {"url": data_url}},
        ]}],
        "max_tokens": 1024,
    })
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError(f"{provider.name} sent no answer") from None
    if isinstance(content, list):  # some servers answer in content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "").strip()


async def transcribe(provider: ProviderConfig, audio: bytes, filename: str, mime: str, timeout: float) -> str:
    """Speech to text through an OpenAI-compatible /audio/transcriptions endpoint."""
    return await _transcribe(provider, audio, filename, mime, timeout)


async def _transcribe(provider: ProviderConfig, audio: bytes, filename: str, mime: str, timeout: float) -> str:
    body = await provider_post(
        provider, "/audio/transcriptions", timeout=timeout,
        files={"file": (filename, audio, mime)},
        form={"model": provider.models[0], "response_format": "json"},
    )
    text = body.get("text")
    if not isinstance(text, str):
        raise ProviderError(f"{provider.name} sent no transcript")
    return text.strip()


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
        from PIL import Image

        with Image.open(io.BytesIO(data)) as img:
            img.verify()
        return "image"
    except Exception:  # Pillow raises many types for non-images
        pass
    try:
        import av

        with av.open(io.BytesIO(data)) as container:
            if _video_stream(container) is not None:
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
        result = await _inspect_image(data, display, question, env)
    elif kind == "audio":
        result = await _inspect_audio(data, mime, display, env)
    elif kind == "video":
        result = await _inspect_video(data, mime, display, question, save, env)
    else:
        text = await asyncio.to_thread(_document_text, kind, data, mime, name)
        result = Inspection(kind=kind, text=text)
    result.text = _cap(result.text, max_chars)
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


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"


# -- documents ----------------------------------------------------------------------------


def _document_text(kind: FileKind, data: bytes, mime: str, name: str | None) -> str:
    display = name or "unnamed file"
    try:
        if kind == "pdf":
            return _pdf(data, name)
        if kind == "docx":
            return f"Word document {display} ({_size(len(data))}):\n\n{_docx(data)}"
        if kind == "xlsx":
            return f"Spreadsheet {display} ({_size(len(data))}):\n\n{_xlsx(data)}"
        if kind == "pptx":
            return f"Slide deck {display} ({_size(len(data))}):\n\n{_pptx(data)}"
    except Exception as exc:  # damaged office files raise from deep inside the libraries
        return f"({display} could not be read as {kind.upper()}: {type(exc).__name__})"
    return extract_text(data, mime, name)


def _pdf(data: bytes, name: str | None) -> str:
    from pypdf import PdfReader

    display = name or "unnamed file"
    # Detected by its bytes, so the declared type may be generic: say PDF outright.
    text = extract_text(data, "application/pdf", name or "document.pdf")
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = len(reader.pages)
    except Exception:  # extract_text has already said what went wrong
        return text
    header = f"PDF {display}: {pages} page{'s' if pages != 1 else ''}, {_size(len(data))}."
    if "has no extractable text" in text:
        # A scan: the words are in page images, which OCR can still read.
        scanned = _ocr_pdf_images(reader)
        if scanned:
            return f"{header} It has no text layer; OCR of its page images:\n\n{scanned}"
    return f"{header}\n\n{text}"


def _ocr_pdf_images(reader: Any, max_pages: int = 5) -> str:
    from PIL import Image

    parts: list[str] = []
    for number, page in enumerate(reader.pages[:max_pages], start=1):
        try:
            images = list(page.images)
        except Exception:  # unsupported image filters
            continue
        for img in images:
            try:
                words = _ocr(Image.open(io.BytesIO(img.data)))
            except Exception:
                continue
            if words:
                parts.append(f"[page {number}]\n{words}")
    return "\n\n".join(parts)


def _docx(data: bytes) -> str:
    from docx import Document
    from docx.table import Table

    doc = Document(io.BytesIO(data))
    lines: list[str] = []
    for item in doc.iter_inner_content():
        if isinstance(item, Table):
            lines.append(_docx_table(item))
            continue
        text = item.text.strip()
        if not text:
            continue
        style = (item.style.name if item.style is not None else "") or ""
        if style == "Title":
            lines.append(f"# {text}")
        elif style.startswith("Heading"):
            level = style.removeprefix("Heading").strip()
            lines.append("#" * (int(level) + 1 if level.isdigit() else 2) + f" {text}")
        elif style.startswith("List"):
            lines.append(f"- {text}")
        else:
            lines.append(text)
    return "\n\n".join(lines) or "(the document has no text)"


def _docx_table(table: Any) -> str:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # A merged cell repeats in every grid column it spans.
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text.strip().replace("\n", " "))
        rows.append(" | ".join(cells))
    return "[table]\n" + "\n".join(rows)


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _xlsx(data: bytes) -> str:
    from openpyxl import load_workbook

    # Values are the cached results Excel saved; files written by code have none, so the
    # formula is shown where the value is missing.
    values = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    formulas = load_workbook(io.BytesIO(data), read_only=True, data_only=False)
    parts: list[str] = []
    for ws_values, ws_formulas in zip(values.worksheets, formulas.worksheets):
        lines = [f"## Sheet: {ws_values.title}"]
        shown = 0
        total = 0
        for number, (vrow, frow) in enumerate(
            zip(ws_values.iter_rows(values_only=True), ws_formulas.iter_rows(values_only=True)), start=1
        ):
            cells = [_cell_text(v if v is not None else f) for v, f in zip(vrow, frow)][:MAX_SHEET_COLS]
            while cells and not cells[-1]:
                cells.pop()
            if not cells:
                continue
            total += 1
            if shown < MAX_SHEET_ROWS:
                lines.append(f"row {number}: " + " | ".join(cells))
                shown += 1
        if total > shown:
            lines.append(f"[... {total - shown} more rows not shown]")
        if total == 0:
            lines.append("(empty)")
        parts.append("\n".join(lines))
    values.close()
    formulas.close()
    return "\n\n".join(parts)


def _pptx(data: bytes) -> str:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    parts: list[str] = []
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        lines = [f"## Slide {number}" + (f": {title}" if title else "")]
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            lines.extend(_shape_lines(shape))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                lines.append(f"Notes: {notes}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) or "(the deck has no slides)"


def _shape_lines(shape: Any) -> list[str]:
    lines: list[str] = []
    if getattr(shape, "shapes", None) is not None:  # a group
        for inner in shape.shapes:
            lines.extend(_shape_lines(inner))
    if getattr(shape, "has_text_frame", False):
        for para in shape.text_frame.paragraphs:
            text = "".join(run.text for run in para.runs).strip()
            if text:
                lines.append("  " * para.level + f"- {text}")
    if getattr(shape, "has_table", False):
        lines.append("[table]")
        for row in shape.table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return lines


# -- images -------------------------------------------------------------------------------

_ocr_engine: Any = None
_ocr_lock = threading.Lock()


def _ocr(image: "PILImage.Image") -> str:
    """The text RapidOCR finds, one detected line per line."""
    global _ocr_engine
    from PIL import Image

    with _ocr_lock:
        if _ocr_engine is None:
            from rapidocr import RapidOCR

            # The models ship inside the wheel, so this never downloads. The fast settings
            # cap detection at 640 px: enough for screenshots and photos of pages.
            _ocr_engine = RapidOCR(params={
                "Global.use_cls": False, "Det.limit_type": "max", "Det.limit_side_len": 640,
                "Global.log_level": "warning",
            })
        engine = _ocr_engine
    if image.mode in ("RGBA", "LA", "P", "PA"):
        # Transparent pixels are often black underneath; text drawn on them would vanish.
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, "white")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    elif image.mode != "RGB":
        image = image.convert("RGB")
    result = engine(image)
    return "\n".join(t for t in (getattr(result, "txts", None) or ()) if t.strip())


def _image_facts(data: bytes) -> tuple[str, "PILImage.Image", str | None]:
    from PIL import Image, ImageOps

    img = Image.open(io.BytesIO(data))
    fmt = img.format or "unknown"
    frames = getattr(img, "n_frames", 1)
    facts = f"{fmt}, {img.width} x {img.height} pixels, {img.mode}"
    if frames > 1:
        facts += f", {frames} frames (the first is shown)"
    img.load()
    return facts, ImageOps.exif_transpose(img) or img, img.format


def _vision_payload(data: bytes, image: "PILImage.Image", fmt: str | None) -> tuple[bytes, str]:
    if fmt in _VISION_FORMATS and max(image.size) <= VISION_MAX_SIDE and len(data) <= 8 * 1024 * 1024:
        return data, _VISION_FORMATS[fmt]
    small = image.convert("RGB")
    small.thumbnail((VISION_MAX_SIDE, VISION_MAX_SIDE))
    buf = io.BytesIO()
    small.save(buf, format="JPEG", quality=88)
    return buf.getvalue(), "image/jpeg"


async def _inspect_image(data: bytes, display: str, question: str | None, env: Mapping[str, str]) -> Inspection:
    try:
        facts, image, fmt = await asyncio.to_thread(_image_facts, data)
    except Exception as exc:  # not decodable after all
        return Inspection(kind="image", text=f"Image {display} could not be opened ({type(exc).__name__}).")
    head = f"Image {display}: {facts}."
    provider = configured_provider("vision", env)
    note = NO_VISION
    if provider is not None:
        payload, payload_mime = await asyncio.to_thread(_vision_payload, data, image, fmt)
        prompt = question or "Describe this image in detail, including any text it contains."
        try:
            answer = await _ask_vision(provider, payload, payload_mime, prompt, _timeout(env))
            label = f"Answer from the vision model ({provider.name}/{provider.models[0]})"
            return Inspection(kind="image", text=f"{head}\n{label}:\n{answer or '(empty answer)'}")
        except ProviderError as exc:
            note = f"The vision model failed ({exc}), so the image was read by OCR only."
    words = await asyncio.to_thread(_ocr, image)
    body = f"Text found by OCR:\n{words}" if words else "OCR found no text in the image."
    return Inspection(kind="image", text=f"{head}\n{note}\n{body}")


# -- audio and video ----------------------------------------------------------------------


class MediaFacts(BaseModel):
    container: str
    duration: float | None = None
    video: str | None = None
    audio: str | None = None
    width: int = 0
    height: int = 0
    has_audio: bool = False
    has_video: bool = False


def _video_stream(container: Any) -> Any:
    # Cover art in an MP3 or M4A shows up as a one-picture video stream; that is audio.
    from av.stream import Disposition

    for stream in container.streams.video:
        if not (stream.disposition & Disposition.attached_pic):
            return stream
    return None


def _duration(container: Any, stream: Any | None) -> float | None:
    if container.duration:
        return container.duration / 1_000_000
    if stream is not None and stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    return None


def _media_facts(data: bytes) -> MediaFacts:
    import av

    with av.open(io.BytesIO(data)) as container:
        video = _video_stream(container)
        audio = container.streams.audio[0] if container.streams.audio else None
        # FFmpeg names the MP4 family "mov,mp4,m4a,..."; people know it as mp4.
        names = container.format.name.split(",")
        facts = MediaFacts(container="mp4" if "mp4" in names else names[0],
                           duration=_duration(container, video or audio))
        if video is not None:
            rate = video.average_rate or video.guessed_rate
            fps = f", {float(rate):.3g} fps" if rate else ""
            facts.video = f"{video.codec_context.name}, {video.codec_context.width} x {video.codec_context.height} px{fps}"
            facts.width, facts.height = video.codec_context.width, video.codec_context.height
            facts.has_video = True
        if audio is not None:
            layout = audio.codec_context.layout
            channels = {1: "mono", 2: "stereo"}.get(layout.nb_channels, f"{layout.nb_channels} channels")
            facts.audio = f"{audio.codec_context.name}, {audio.codec_context.sample_rate} Hz, {channels}"
            facts.has_audio = True
    return facts


def _clock(seconds: float, long: bool = False) -> str:
    # Round first so 59.97 s reads 1:00.0, not 0:60.0.
    if long:
        minutes, secs = divmod(round(max(seconds, 0.0)), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}:{minutes:02d}:{secs:02d}"
    minutes, secs = divmod(round(max(seconds, 0.0), 1), 60)
    return f"{int(minutes)}:{secs:04.1f}"


def _length(seconds: float | None) -> str:
    return "unknown length" if seconds is None else f"{seconds:.1f} s ({_clock(seconds, seconds >= 3600)})"


def _to_wav(data: bytes, max_seconds: int = MAX_TRANSCRIBE_SECONDS) -> tuple[bytes, bool]:
    """The first audio stream as 16 kHz mono WAV, and whether it was cut at ``max_seconds``."""
    import av

    out = io.BytesIO()
    cut = False
    with av.open(io.BytesIO(data)) as source, av.open(out, "w", format="wav") as sink:
        stream = source.streams.audio[0]
        target = sink.add_stream("pcm_s16le", rate=16_000, layout="mono")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16_000)
        written = 0
        for frame in source.decode(stream):
            for chunk in resampler.resample(frame):
                sink.mux(target.encode(chunk))
                written += chunk.samples
            if written >= max_seconds * 16_000:
                cut = True
                break
        if not cut:
            for chunk in resampler.resample(None):
                sink.mux(target.encode(chunk))
        sink.mux(target.encode(None))
    return out.getvalue(), cut


async def _soundtrack_text(
    data: bytes, mime: str, display: str, env: Mapping[str, str], *, is_video: bool
) -> str:
    provider = configured_provider("speech", env)
    if provider is None:
        return NO_SPEECH
    ext = PurePath(display).suffix.lower().lstrip(".")
    cut = False
    if not is_video and ext in _STT_FORMATS and len(data) <= MAX_UPLOAD_BYTES:
        audio, filename, audio_mime = data, display, (mime or "application/octet-stream")
    else:
        # Videos and unusual formats go as plain WAV, which every endpoint understands.
        try:
            audio, cut = await asyncio.to_thread(_to_wav, data)
        except Exception as exc:  # FFmpeg could not decode the audio
            return f"The audio could not be decoded for transcription ({type(exc).__name__})."
        filename, audio_mime = PurePath(display).stem + ".wav", "audio/wav"
    try:
        transcript = await _transcribe(provider, audio, filename, audio_mime, _timeout(env))
    except ProviderError as exc:
        return f"Speech-to-text failed: {exc}."
    label = f"Transcript ({provider.name}/{provider.models[0]}"
    label += f", first {MAX_TRANSCRIBE_SECONDS // 60} minutes only)" if cut else ")"
    return f"{label}:\n{transcript or '(no speech recognised)'}"


async def _inspect_audio(data: bytes, mime: str, display: str, env: Mapping[str, str]) -> Inspection:
    try:
        facts = await asyncio.to_thread(_media_facts, data)
    except Exception as exc:  # not decodable
        return Inspection(kind="audio", text=f"Audio {display} could not be opened ({type(exc).__name__}).")
    if not facts.has_audio:
        return Inspection(kind="audio", text=f"{display} ({facts.container}) holds no audio stream.")
    head = f"Audio {display}: {_length(facts.duration)}, {facts.container} container, {facts.audio}."
    words = await _soundtrack_text(data, mime, display, env, is_video=False)
    return Inspection(kind="audio", text=f"{head}\n{words}")


def _spread(count: int, wanted: int) -> list[int]:
    """``wanted`` indices spread evenly over ``count`` items, always the first and last."""
    if count <= wanted:
        return list(range(count))
    return sorted({round(i * (count - 1) / (wanted - 1)) for i in range(wanted)})


def _frames_wanted(duration: float | None) -> int:
    # Six tiles show a short clip well; longer clips get nine so no scene is skipped over.
    return 6 if duration is not None and duration < 30 else 9


def _grab_frames(data: bytes, wanted: int) -> list[tuple[float, "PILImage.Image"]]:
    """(seconds from the start, thumbnail) for frames spread across the clip, the last included.

    A pass over the packets (no decoding) finds every frame's timestamp, so the last frame
    is known exactly; then only the chosen frames are decoded, seeking across long gaps.
    """
    import av

    with av.open(io.BytesIO(data)) as container:
        stream = _video_stream(container)
        pts = sorted({p.pts for p in container.demux(stream) if p.pts is not None and p.size})
    with av.open(io.BytesIO(data)) as container:
        stream = _video_stream(container)
        stream.thread_type = "AUTO"
        tb = stream.time_base
        width, height = _tile_size(stream.codec_context.width, stream.codec_context.height)
        if not pts:
            return _grab_sequential(container, stream, wanted, width, height)
        start = pts[0]
        targets = [pts[i] for i in _spread(len(pts), wanted)]
        grabbed: list[tuple[float, Any]] = []
        decoder: Any = None
        position: int | None = None
        for target in targets:
            if decoder is None or position is None or float((target - position) * tb) > SEEK_GAP_S:
                container.seek(target, stream=stream, backward=True, any_frame=False)
                decoder = container.decode(stream)
            chosen = None
            last = None
            for frame in decoder:
                last = frame
                if frame.pts is None:
                    continue
                position = frame.pts
                if frame.pts >= target:
                    chosen = frame
                    break
            if chosen is None:
                decoder = None  # ran off the end; the next target must seek again
                chosen = last
            if chosen is not None:
                when = float(((chosen.pts if chosen.pts is not None else target) - start) * tb)
                grabbed.append((when, chosen.reformat(width=width, height=height, format="rgb24").to_image()))
        return grabbed


def _grab_sequential(container: Any, stream: Any, wanted: int, width: int, height: int) -> list[tuple[float, Any]]:
    # Streams without timestamps: count frames, then decode again and keep the chosen ones.
    total = sum(1 for _ in container.decode(stream))
    picks = set(_spread(total, wanted))
    rate = float(stream.average_rate or stream.guessed_rate or 25)
    container.seek(0)
    out: list[tuple[float, Any]] = []
    for index, frame in enumerate(container.decode(stream)):
        if index in picks:
            out.append((index / rate, frame.reformat(width=width, height=height, format="rgb24").to_image()))
    return out


def _tile_size(width: int, height: int) -> tuple[int, int]:
    if width <= 0 or height <= 0:
        return TILE_WIDTH, TILE_WIDTH * 9 // 16
    tile_w = TILE_WIDTH
    tile_h = round(tile_w * height / width)
    if tile_h > TILE_MAX_HEIGHT:  # portrait video: narrower tiles, not giant ones
        tile_h = TILE_MAX_HEIGHT
        tile_w = round(tile_h * width / height)
    return max(tile_w - tile_w % 2, 2), max(tile_h - tile_h % 2, 2)


def _label_font(size: int) -> Any:
    from PIL import ImageFont

    try:
        import matplotlib

        return ImageFont.truetype(f"{matplotlib.get_data_path()}/fonts/ttf/DejaVuSans-Bold.ttf", size)
    except Exception:  # no matplotlib or no FreeType: Pillow's own font still draws digits
        return ImageFont.load_default()


def contact_sheet(frames: list[tuple[float, "PILImage.Image"]], total: float | None) -> tuple[bytes, list[Tile]]:
    """Frames in a grid, each stamped with its time; returns the PNG and where each tile sits."""
    from PIL import Image, ImageDraw

    tile_w = max(img.width for _, img in frames)
    tile_h = max(img.height for _, img in frames)
    columns = min(SHEET_COLUMNS, len(frames))
    rows = math.ceil(len(frames) / columns)
    sheet = Image.new("RGB", (columns * tile_w + (columns + 1) * TILE_GAP, rows * tile_h + (rows + 1) * TILE_GAP),
                      (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    font = _label_font(max(12, tile_h // 12))
    long = (total or 0) >= 3600
    tiles: list[Tile] = []
    for i, (when, img) in enumerate(frames):
        x = TILE_GAP + (i % columns) * (tile_w + TILE_GAP)
        y = TILE_GAP + (i // columns) * (tile_h + TILE_GAP)
        sheet.paste(img, (x, y))
        label = _clock(when, long) + (" end" if i == len(frames) - 1 else "")
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        pad = 3
        box = (x + pad, y + img.height - (bottom - top) - 3 * pad, x + 3 * pad + (right - left), y + img.height - pad)
        draw.rectangle(box, fill=(0, 0, 0))
        draw.text((box[0] + pad - left, box[1] + pad - top), label, fill=(255, 255, 255), font=font)
        tiles.append(Tile(time=round(when, 3), x=x, y=y, width=img.width, height=img.height))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG", optimize=True)
    return buf.getvalue(), tiles


def _make_sheet(data: bytes, duration: float | None) -> tuple[bytes, list[Tile]] | None:
    frames = _grab_frames(data, _frames_wanted(duration))
    return contact_sheet(frames, duration) if frames else None


async def _inspect_video(
    data: bytes, mime: str, display: str, question: str | None, save: SaveFile | None, env: Mapping[str, str]
) -> Inspection:
    try:
        facts = await asyncio.to_thread(_media_facts, data)
    except Exception as exc:  # not decodable
        return Inspection(kind="video", text=f"Video {display} could not be opened ({type(exc).__name__}).")
    if not facts.has_video:
        return await _inspect_audio(data, mime, display, env)
    sound = f"soundtrack {facts.audio}" if facts.has_audio else "no soundtrack"
    lines = [f"Video {display}: {_length(facts.duration)}, {facts.video}, {facts.container} container, {sound}."]
    result = Inspection(kind="video", text="")
    try:
        made = await asyncio.to_thread(_make_sheet, data, facts.duration)
    except Exception as exc:  # a damaged stream can fail mid-decode
        made = None
        lines.append(f"No contact sheet: the frames could not be decoded ({type(exc).__name__}).")
    if made is not None:
        png, tiles = made
        result.tiles = tiles
        stamps = ", ".join(_clock(t.time, (facts.duration or 0) >= 3600) for t in tiles)
        grid = f"{min(SHEET_COLUMNS, len(tiles))} x {math.ceil(len(tiles) / SHEET_COLUMNS)}"
        what = f"{len(tiles)} frames in a {grid} grid at {stamps}; the last tile is the final frame"
        if save is not None:
            file_id = await save(PurePath(display).stem + "-contact-sheet.png", "image/png", png)
            result.files.append(file_id)
            lines.append(f"Contact sheet: file {file_id} ({what}).")
        else:
            lines.append(f"Contact sheet made but not stored ({what}).")
        provider = configured_provider("vision", env)
        if provider is not None:
            prompt = (f"These are {len(tiles)} frames from one video, in time order, each stamped with its time. "
                      + (question or "Describe what happens in the video."))
            try:
                answer = await _ask_vision(provider, png, "image/png", prompt, _timeout(env))
                lines.append(f"The vision model ({provider.name}) on the contact sheet:\n{answer}")
            except ProviderError as exc:
                lines.append(f"The vision model failed on the contact sheet ({exc}).")
    if facts.has_audio:
        lines.append(await _soundtrack_text(data, mime, display, env, is_video=True))
    result.text = "\n".join(lines)
    return result
