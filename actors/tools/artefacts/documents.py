"""Documents from markdown-ish text: PDF, Word and slide decks.

The model writes headings (`#`), bullets (`-`, indented two spaces a level), numbered items,
code fences and **bold**; `parse_blocks` reads that once and each format lays it out in its own
way. The office libraries are imported inside each function, so a process that makes only one
kind does not pay for the others at start.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


# -- markdown-ish text --------------------------------------------------------------------


class Block(BaseModel):
    kind: Literal["heading", "paragraph", "bullet", "number", "code"]
    text: str
    level: int = 0


_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+•]\s+(.*)$")
_NUMBER = re.compile(r"^(\s*)\d+[.)]\s+(.*)$")


def parse_blocks(text: str) -> list[Block]:
    """Headings (#), bullets (- * +), numbered items, ``` code fences and paragraphs.

    Consecutive plain lines join into one paragraph, as in Markdown, so text wrapped by
    the model at 80 columns reflows instead of breaking mid-sentence.
    """
    blocks: list[Block] = []
    para: list[str] = []
    code: list[str] | None = None

    def flush() -> None:
        if para:
            blocks.append(Block(kind="paragraph", text=" ".join(para)))
            para.clear()

    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            if code is None:
                flush()
                code = []
            else:
                blocks.append(Block(kind="code", text="\n".join(code)))
                code = None
            continue
        if code is not None:
            code.append(raw.rstrip("\n"))
            continue
        if not line.strip():
            flush()
            continue
        if m := _HEADING.match(line.strip()):
            flush()
            blocks.append(Block(kind="heading", text=m.group(2).strip(), level=len(m.group(1))))
        elif m := _BULLET.match(line):
            flush()
            blocks.append(Block(kind="bullet", text=m.group(2).strip(), level=_indent_level(m.group(1))))
        elif m := _NUMBER.match(line):
            flush()
            blocks.append(Block(kind="number", text=m.group(2).strip(), level=_indent_level(m.group(1))))
        else:
            para.append(line.strip())
    flush()
    if code is not None:  # an unclosed fence still shows its lines
        blocks.append(Block(kind="code", text="\n".join(code)))
    return blocks


def _indent_level(indent: str) -> int:
    return min(len(indent.replace("\t", "    ")) // 2, 4)


_BOLD = re.compile(r"\*\*(.+?)\*\*")


def bold_runs(text: str) -> list[tuple[str, bool]]:
    """``**bold**`` spans as (text, is_bold) runs; other markup is left as typed."""
    runs: list[tuple[str, bool]] = []
    pos = 0
    for m in _BOLD.finditer(text):
        if m.start() > pos:
            runs.append((text[pos:m.start()], False))
        runs.append((m.group(1), True))
        pos = m.end()
    if pos < len(text):
        runs.append((text[pos:], False))
    return runs or [("", False)]


# -- PDF ----------------------------------------------------------------------------------


def _mpl_fonts() -> Path | None:
    try:
        import matplotlib  # lazy: optional; matplotlib (~0.5 s) only for its fonts
    except ImportError:
        return None
    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return folder if (folder / "DejaVuSans.ttf").exists() else None


_HEADING_SIZES = {1: 18, 2: 15, 3: 13, 4: 12, 5: 11, 6: 11}


def pdf_document(title: str, text: str) -> bytes:
    """An A4 PDF from a title and markdown-ish text; Unicode through DejaVu when available."""
    from fpdf import FPDF  # lazy: fpdf2 costs ~0.3 s; only a PDF needs it

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.set_margins(20, 18, 20)
    fonts = _mpl_fonts()
    if fonts is not None:
        pdf.add_font("body", "", str(fonts / "DejaVuSans.ttf"))
        pdf.add_font("body", "B", str(fonts / "DejaVuSans-Bold.ttf"))
        pdf.add_font("mono", "", str(fonts / "DejaVuSansMono.ttf"))
        body, mono, bullet = "body", "mono", "•"

        def clean(s: str) -> str:
            return s
    else:
        # Core fonts only know latin-1; anything else becomes "?" rather than failing.
        body, mono, bullet = "helvetica", "courier", "-"

        def clean(s: str) -> str:
            return s.encode("latin-1", "replace").decode("latin-1")

    pdf.set_title(clean(title))
    pdf.add_page()
    if title.strip():
        pdf.set_font(body, "B", 20)
        pdf.multi_cell(0, 10, clean(title.strip()), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)

    left = pdf.l_margin
    counters: dict[int, int] = {}
    for block in parse_blocks(text):
        if block.kind != "number":
            counters.clear()
        if block.kind == "heading":
            pdf.ln(2)
            pdf.set_font(body, "B", _HEADING_SIZES[block.level])
            pdf.multi_cell(0, _HEADING_SIZES[block.level] * 0.55, clean(block.text),
                           new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif block.kind == "code":
            pdf.set_font(mono, "", 9)
            pdf.set_fill_color(242, 242, 242)
            pdf.multi_cell(0, 4.6, clean(block.text) or " ", fill=True, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
        else:
            indent = 0.0
            if block.kind in ("bullet", "number"):
                indent = 6.0 * (block.level + 1)
                if block.kind == "number":
                    counters = {k: v for k, v in counters.items() if k <= block.level}
                    counters[block.level] = counters.get(block.level, 0) + 1
                    marker = f"{counters[block.level]}."
                else:
                    marker = bullet
                pdf.set_font(body, "", 11)
                pdf.set_x(left + indent - 5)
                pdf.cell(5, 6, marker)
            # write() flows text with font changes mid-line, which multi_cell cannot;
            # a temporary left margin keeps wrapped bullet lines under their first line.
            pdf.set_left_margin(left + indent)
            pdf.set_x(left + indent)
            for part, is_bold in bold_runs(block.text):
                pdf.set_font(body, "B" if is_bold else "", 11)
                pdf.write(6, clean(part))
            pdf.ln(6)
            pdf.set_left_margin(left)
            if block.kind == "paragraph":
                pdf.ln(2)
    return bytes(pdf.output())


# -- Word ---------------------------------------------------------------------------------


def word_document(title: str, text: str) -> bytes:
    """A .docx from a title and markdown-ish text, using Word's own heading and list styles."""
    from docx import Document  # lazy: python-docx loads only for a Word file
    from docx.shared import Pt  # lazy: python-docx loads only for a Word file

    doc = Document()
    if title.strip():
        doc.add_heading(title.strip(), level=0)
    for block in parse_blocks(text):
        if block.kind == "heading":
            doc.add_heading(block.text, level=min(block.level, 9))
            continue
        if block.kind == "code":
            para = doc.add_paragraph()
            run = para.add_run(block.text)
            run.font.name = "Courier New"
            run.font.size = Pt(9)
            continue
        style = None
        if block.kind in ("bullet", "number"):
            base = "List Bullet" if block.kind == "bullet" else "List Number"
            # The default template has "List Bullet", "List Bullet 2", "List Bullet 3".
            style = base if block.level == 0 else f"{base} {min(block.level + 1, 3)}"
        para = doc.add_paragraph(style=style)
        for part, is_bold in bold_runs(block.text):
            para.add_run(part).bold = is_bold or None
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


# -- slides -------------------------------------------------------------------------------


class Slide(BaseModel):
    title: str = ""
    bullets: list[str] = Field(default_factory=list, max_length=40)
    notes: str | None = None


def slide_deck(title: str, slides: list[Slide] | list[dict[str, Any]], subtitle: str | None = None) -> bytes:
    """A .pptx: a title slide, then one title-and-bullets slide each.

    A bullet indented by two spaces per level ("  - detail") becomes a sub-bullet.
    """
    from pptx import Presentation  # lazy: python-pptx loads only for a deck

    parsed = [s if isinstance(s, Slide) else Slide.model_validate(s) for s in slides]
    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = title
    if subtitle and len(first.placeholders) > 1:
        first.placeholders[1].text = subtitle
    for spec in parsed:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = spec.title
        body = slide.placeholders[1].text_frame
        for i, raw in enumerate(spec.bullets):
            m = _BULLET.match(raw)
            level = _indent_level(m.group(1)) if m else _indent_level(raw[: len(raw) - len(raw.lstrip())])
            text = m.group(2) if m else raw.strip()
            para = body.paragraphs[0] if i == 0 else body.add_paragraph()
            para.text = text
            para.level = level
        if spec.notes:
            slide.notes_slide.notes_text_frame.text = spec.notes
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()
