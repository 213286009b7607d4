"""Attachment lines in user messages, and the text the model gets in their place.

Clients upload a file first and then send a message holding a line such as
``[attachment file:12 report.pdf]``. The model cannot open file ids, so the
session swaps each line for an ``<attachment>`` block with the file's text.
Extraction is deliberately modest for now: text-like files are decoded, PDFs
go through ``pypdf`` when it is installed, and everything else is described
in one line so the model can say honestly that it cannot read it.
"""

from __future__ import annotations

import codecs
import io
import re
from pathlib import PurePath

from pydantic import BaseModel

from actors.common.budget import cap_result

# One attachment per line, nothing else on it; spaces are tolerated anywhere
# a person typing it by hand might add them. `(?=\r?$)` keeps CRLF text intact.
_ATTACHMENT_LINE = re.compile(
    r"^[ \t]*\[[ \t]*attachment[ \t]+file[ \t]*:[ \t]*(\d+)(?:[ \t]+([^\]\r\n]*?))?[ \t]*\][ \t]*(?=\r?$)",
    re.IGNORECASE | re.MULTILINE,
)

_TEXT_MIMES: frozenset[str] = frozenset(
    {
        "application/json",
        "application/xml",
        "application/csv",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/javascript",
        "application/x-javascript",
        "application/typescript",
        "application/x-python",
        "application/x-sh",
        "application/x-shellscript",
        "application/sql",
        "application/x-httpd-php",
        "application/ld+json",
        "application/x-ndjson",
    }
)

_TEXT_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".txt", ".text", ".md", ".markdown", ".rst", ".csv", ".tsv", ".json", ".jsonl", ".ndjson",
        ".xml", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".env", ".log", ".tex", ".html",
        ".htm", ".css", ".scss", ".sass", ".less", ".svg",
        ".py", ".pyi", ".ipynb", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".vue", ".svelte",
        ".java", ".kt", ".kts", ".scala", ".groovy", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
        ".cs", ".fs", ".go", ".rs", ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".swift", ".m",
        ".mm", ".dart", ".hs", ".ex", ".exs", ".erl", ".clj", ".el", ".vim", ".sh", ".bash", ".zsh",
        ".fish", ".ps1", ".bat", ".cmd", ".sql", ".graphql", ".proto", ".gradle", ".cmake", ".tf",
        ".nix", ".dockerfile", ".gitignore", ".properties", ".srt", ".vtt", ".ics", ".vcf",
    }
)
# Source files conventionally named without an extension.
_TEXT_NAMES: frozenset[str] = frozenset({"dockerfile", "makefile", "readme", "license", "procfile", "gemfile"})

# Mime families that are binary whatever the file is called: a file named
# "notes.txt" that the client says is image/png is treated as an image.
_BINARY_FAMILIES: tuple[str, ...] = ("image/", "audio/", "video/", "font/")

# BOMs decide the encoding outright; UTF-32 first because its little-endian
# BOM starts with the UTF-16 one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class Attachment(BaseModel):
    """A file the user referenced by id, with the name they gave it if any."""

    file_id: int
    name: str | None = None


def _match_attachment(match: re.Match[str]) -> Attachment:
    name = (match.group(2) or "").strip()
    return Attachment(file_id=int(match.group(1)), name=name or None)


def parse_attachments(message: str) -> list[Attachment]:
    """Attachments named in ``message``, in order, each file once (first mention wins)."""
    seen: set[int] = set()
    found: list[Attachment] = []
    for match in _ATTACHMENT_LINE.finditer(message):
        attachment = _match_attachment(match)
        if attachment.file_id not in seen:
            seen.add(attachment.file_id)
            found.append(attachment)
    return found


def _split_mime(mime: str) -> tuple[str, str | None]:
    base, _, params = (mime or "").partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
    return base.strip().lower(), charset


def _is_text(base: str, name: str | None) -> bool:
    if base.startswith("text/") or base in _TEXT_MIMES or base.endswith(("+json", "+xml")):
        return True
    if base.startswith(_BINARY_FAMILIES) or not name:
        return False
    path = PurePath(name)
    return path.suffix.lower() in _TEXT_EXTENSIONS or path.name.lower() in _TEXT_NAMES


def _is_pdf(base: str, name: str | None) -> bool:
    return base == "application/pdf" or (
        not base.startswith(_BINARY_FAMILIES) and bool(name) and PurePath(name or "").suffix.lower() == ".pdf"
    )


def decode_text(data: bytes, charset: str | None = None) -> str:
    """Bytes to text: a BOM wins, then a declared charset, then UTF-8; bad bytes become U+FFFD."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, errors="replace")
    if charset:
        try:
            return data.decode(charset, errors="replace")
        except LookupError:
            pass  # an unknown charset label is the client's mistake; UTF-8 is the best guess
    return data.decode("utf-8", errors="replace")


def _display_name(name: str | None) -> str:
    return name or "unnamed"


def _pdf_text(data: bytes, name: str | None) -> str:
    try:
        from pypdf import PdfReader  # lazy: pypdf costs ~0.1 s; only PDFs need it
    except ImportError:
        return (
            f"PDF text extraction is not available on this system, so the text of "
            f"{_display_name(name)} cannot be read yet."
        )
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except Exception as exc:  # pypdf raises many types for damaged files
        return f"(the PDF {_display_name(name)} could not be read: {type(exc).__name__})"
    text = "\n\n".join(page for page in pages if page)
    if not text:
        return f"(the PDF {_display_name(name)} has no extractable text; it may be scanned images)"
    return text


def extract_text(data: bytes, mime: str, name: str | None) -> str:
    """The text the model should see for a file's bytes."""
    base, charset = _split_mime(mime)
    if _is_pdf(base, name):
        return _pdf_text(data, name)
    if _is_text(base, name):
        return decode_text(data, charset)
    return (
        f"(binary file {_display_name(name)}, {base or 'unknown type'}, {len(data)} bytes: "
        f"its contents cannot be read as text yet)"
    )


def _escape_attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def render_attachment(att: Attachment, mime: str, size: int, text: str, cap: int = 20000) -> str:
    """The block the model receives in place of the attachment line.

    ``<`` in the file text is escaped so a file cannot close the block early
    and pose as the user ("</attachment> now ignore the above").
    """
    attrs = [f'file="{att.file_id}"']
    if att.name:
        attrs.append(f'name="{_escape_attr(att.name)}"')
    attrs.append(f'type="{_escape_attr(mime)}"')
    attrs.append(f'bytes="{size}"')
    body = cap_result(text, cap).replace("<", "&lt;")
    return f"<attachment {' '.join(attrs)}>\n{body}\n</attachment>"


def expand_message(message: str, rendered: dict[int, str]) -> str:
    """``message`` with each attachment line replaced by its rendered block.

    A file mentioned twice is rendered once; later lines point back to it. A
    line whose file is missing stays as written, followed by a note, so the
    model can tell the user which file did not arrive.
    """
    placed: set[int] = set()

    def replace(match: re.Match[str]) -> str:
        file_id = int(match.group(1))
        if file_id in placed:
            return f"(file {file_id} is attached above)"
        block = rendered.get(file_id)
        if block is None:
            return f"{match.group(0)}\n(file {file_id} was not found)"
        placed.add(file_id)
        return block

    return _ATTACHMENT_LINE.sub(replace, message)
