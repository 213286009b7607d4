"""Documents as text: PDF (with OCR for scans), Word, Excel and PowerPoint; the rest through
actors.common.attachments."""

from __future__ import annotations

import io
from typing import Any

from actors.common.attachments import extract_text
from actors.tools.inspect.images import ocr
from actors.tools.inspect.model import FileKind, size_text

# Spreadsheets can hold a million rows; the model needs their shape, not all of them.
MAX_SHEET_ROWS = 500
MAX_SHEET_COLS = 50

def document_text(kind: FileKind, data: bytes, mime: str, name: str | None) -> str:
    display = name or "unnamed file"
    try:
        if kind == "pdf":
            return _pdf(data, name)
        if kind == "docx":
            return f"Word document {display} ({size_text(len(data))}):\n\n{_docx(data)}"
        if kind == "xlsx":
            return f"Spreadsheet {display} ({size_text(len(data))}):\n\n{_xlsx(data)}"
        if kind == "pptx":
            return f"Slide deck {display} ({size_text(len(data))}):\n\n{_pptx(data)}"
    except Exception as exc:  # damaged office files raise from deep inside the libraries
        return f"({display} could not be read as {kind.upper()}: {type(exc).__name__})"
    return extract_text(data, mime, name)


def _pdf(data: bytes, name: str | None) -> str:
    from pypdf import PdfReader  # lazy: pypdf costs ~0.1 s; only PDFs need it

    display = name or "unnamed file"
    # Detected by its bytes, so the declared type may be generic: say PDF outright.
    text = extract_text(data, "application/pdf", name or "document.pdf")
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = len(reader.pages)
    except Exception:  # extract_text has already said what went wrong
        return text
    header = f"PDF {display}: {pages} page{'s' if pages != 1 else ''}, {size_text(len(data))}."
    if "has no extractable text" in text:
        # A scan: the words are in page images, which OCR can still read.
        scanned = _ocr_pdf_images(reader)
        if scanned:
            return f"{header} It has no text layer; OCR of its page images:\n\n{scanned}"
    return f"{header}\n\n{text}"


def _ocr_pdf_images(reader: Any, max_pages: int = 5) -> str:
    from PIL import Image  # lazy: Pillow loads only when an image is read

    parts: list[str] = []
    for number, page in enumerate(reader.pages[:max_pages], start=1):
        try:
            images = list(page.images)
        except Exception:  # unsupported image filters
            continue
        for img in images:
            try:
                words = ocr(Image.open(io.BytesIO(img.data)))
            except Exception:
                continue
            if words:
                parts.append(f"[page {number}]\n{words}")
    return "\n\n".join(parts)


def _docx(data: bytes) -> str:
    from docx import Document  # lazy: python-docx loads only for a Word file
    from docx.table import Table  # lazy: python-docx loads only for a Word file

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
    from openpyxl import load_workbook  # lazy: openpyxl costs ~0.2 s; only a spreadsheet needs it

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
    from pptx import Presentation  # lazy: python-pptx loads only for a deck

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
