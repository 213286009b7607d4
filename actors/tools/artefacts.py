"""Generated artefacts as bytes: charts, PDF, Word, slides and spreadsheets.

Pure functions, no I/O: the studio server stores what they return in the files table.
The office and plotting libraries are imported inside each function so a process that
only needs one kind (or none, like the files server) does not pay for all of them at start.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

ChartKind = Literal["line", "bar", "scatter", "pie"]
Cell = str | int | float | bool | None

# Enough for any chart a person can read; more is a runaway tool call, not a chart.
MAX_SERIES = 50
MAX_POINTS = 10_000
CHART_SIZE_IN = (8.0, 5.0)
CHART_DPI = 100


class ArtefactError(ValueError):
    """The request cannot become an artefact; the message says why in one line."""


# -- charts -----------------------------------------------------------------------------


class ChartSpec(BaseModel):
    kind: ChartKind
    title: str = ""
    series: dict[str, list[float]] = Field(default_factory=dict, max_length=MAX_SERIES)
    x: list[float] | None = Field(default=None, max_length=MAX_POINTS)
    y: list[float] | None = Field(default=None, max_length=MAX_POINTS)
    x_labels: list[str] | None = Field(default=None, max_length=MAX_POINTS)
    x_label: str | None = None
    y_label: str | None = None

    @model_validator(mode="after")
    def _has_data(self) -> "ChartSpec":
        if self.y is not None:
            if self.x is not None and len(self.x) != len(self.y):
                raise ValueError(f"x has {len(self.x)} values but y has {len(self.y)}")
            # x/y lists are one unnamed series; folding them in keeps one drawing path.
            self.series = {**self.series, (self.y_label or "y"): list(self.y)}
        if not self.series or not any(self.series.values()):
            raise ValueError("a chart needs data: give series {label: [numbers]} or x and y lists")
        for label, values in self.series.items():
            if len(values) > MAX_POINTS:
                raise ValueError(f"series {label!r} has more than {MAX_POINTS} points")
        return self


def chart(
    kind: ChartKind,
    title: str = "",
    series: dict[str, list[float]] | None = None,
    x: list[float] | None = None,
    y: list[float] | None = None,
    x_labels: list[str] | None = None,
    x_label: str | None = None,
    y_label: str | None = None,
) -> bytes:
    """A PNG chart (800 x 500 px)."""
    try:
        spec = ChartSpec(kind=kind, title=title, series=series or {}, x=x, y=y, x_labels=x_labels,
                         x_label=x_label, y_label=y_label)
    except ValueError as exc:
        raise ArtefactError(_first_error(exc)) from None

    # The object API with an Agg canvas, not pyplot: pyplot keeps global state that is
    # unsafe when the server renders in worker threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=CHART_SIZE_IN, dpi=CHART_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if spec.kind == "pie":
        _draw_pie(ax, spec)
    else:
        _draw_xy(ax, spec)
    if spec.title:
        ax.set_title(spec.title)
    if spec.kind != "pie":
        if spec.x_label:
            ax.set_xlabel(spec.x_label)
        if spec.y_label:
            ax.set_ylabel(spec.y_label)
        if len(spec.series) > 1:
            ax.legend()
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _draw_xy(ax: Any, spec: ChartSpec) -> None:
    longest = max(len(v) for v in spec.series.values())
    xs: list[float] = list(spec.x) if spec.x is not None else list(range(longest))
    if spec.kind == "bar":
        width = 0.8 / len(spec.series)
        for i, (label, values) in enumerate(spec.series.items()):
            offset = (i - (len(spec.series) - 1) / 2) * width
            positions = [p + offset for p in range(len(values))]
            ax.bar(positions, values, width=width, label=label)
        ax.set_xticks(range(longest))
        ax.set_xticklabels(_tick_labels(spec.x_labels, spec.x, longest))
        return
    for label, values in spec.series.items():
        points = xs[: len(values)] if len(xs) >= len(values) else list(range(len(values)))
        if spec.kind == "line":
            ax.plot(points, values, marker="o" if len(values) <= 30 else None, label=label)
        else:
            ax.scatter(points, values, label=label)
    if spec.x_labels:
        ax.set_xticks(xs[: len(spec.x_labels)])
        ax.set_xticklabels(spec.x_labels[: len(xs)])


def _tick_labels(labels: list[str] | None, x: list[float] | None, count: int) -> list[str]:
    if labels:
        return (list(labels) + [""] * count)[:count]
    if x:
        return [f"{v:g}" for v in (list(x) + [float("nan")] * count)[:count]]
    return [str(i) for i in range(count)]


def _draw_pie(ax: Any, spec: ChartSpec) -> None:
    # Either one value per series label ({"rent": [900], "food": [300]}) or one series
    # whose slices are named by x_labels.
    if all(len(v) == 1 for v in spec.series.values()) and len(spec.series) > 1:
        labels = list(spec.series)
        values = [v[0] for v in spec.series.values()]
    else:
        if len(spec.series) > 1:
            raise ArtefactError("a pie chart takes one series (or one value per label)")
        values = next(iter(spec.series.values()))
        labels = _tick_labels(spec.x_labels, None, len(values))
    if any(v < 0 for v in values):
        raise ArtefactError("a pie chart cannot show negative values")
    if not sum(values):
        raise ArtefactError("a pie chart needs at least one positive value")
    ax.pie(values, labels=labels, autopct="%1.0f%%", startangle=90, counterclock=False)
    ax.axis("equal")


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", exc)).removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    return str(exc)


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
        import matplotlib
    except ImportError:
        return None
    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return folder if (folder / "DejaVuSans.ttf").exists() else None


_HEADING_SIZES = {1: 18, 2: 15, 3: 13, 4: 12, 5: 11, 6: 11}


def pdf_document(title: str, text: str) -> bytes:
    """An A4 PDF from a title and markdown-ish text; Unicode through DejaVu when available."""
    from fpdf import FPDF

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
    from docx import Document
    from docx.shared import Pt

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
    from pptx import Presentation

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


# -- spreadsheets -------------------------------------------------------------------------

_BAD_SHEET_CHARS = re.compile(r"[\[\]:*?/\\]")


def _sheet_title(name: str, taken: set[str]) -> str:
    # Excel refuses these characters and names over 31 characters, and names are unique
    # case-insensitively.
    base = _BAD_SHEET_CHARS.sub("_", name).strip("'").strip() or "Sheet"
    base = base[:31]
    title, n = base, 2
    while title.lower() in taken:
        suffix = f" ({n})"
        title = base[: 31 - len(suffix)] + suffix
        n += 1
    taken.add(title.lower())
    return title


_ILLEGAL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _cell(value: Any) -> Any:
    # openpyxl refuses control characters and unknown types; a model's stray byte should
    # cost one character, not the whole workbook.
    if isinstance(value, str):
        return _ILLEGAL_XML.sub("", value)
    if value is None or isinstance(value, (int, float, bool)) or hasattr(value, "isoformat"):
        return value
    return str(value)


def spreadsheet(sheets: dict[str, list[list[Cell]]], header: bool = True) -> bytes:
    """An .xlsx with one sheet per entry; the first row is bold and frozen when ``header``.

    Strings beginning with "=" are kept as formulas, which is what a person asking for a
    total row wants.
    """
    from openpyxl import Workbook
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    if not sheets:
        raise ArtefactError("a spreadsheet needs at least one sheet")
    wb = Workbook()
    wb.remove(wb.active)
    taken: set[str] = set()
    for name, rows in sheets.items():
        ws = wb.create_sheet(_sheet_title(name, taken))
        widths: dict[int, int] = {}
        for row in rows:
            ws.append([_cell(v) for v in row])
            for col, value in enumerate(row, start=1):
                widths[col] = max(widths.get(col, 0), len(str(value)) if value is not None else 0)
        if header and rows:
            for cell in ws[1]:
                cell.font = Font(bold=True)
            ws.freeze_panes = "A2"
        for col, width in widths.items():
            ws.column_dimensions[get_column_letter(col)].width = min(max(width + 2, 8), 60)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


MIME = {
    "png": "image/png",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def file_name(title: str, ext: str, fallback: str) -> str:
    """A safe file name from a title: "Q3 Sales / EU" -> "q3-sales-eu.png"."""
    stem = re.sub(r"[^\w]+", "-", title.lower(), flags=re.UNICODE).strip("-_")[:60].strip("-_")
    return f"{stem or fallback}.{ext}"
