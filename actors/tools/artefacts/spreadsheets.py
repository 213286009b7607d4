"""Spreadsheets (.xlsx) from rows of cells, one sheet per name, with openpyxl (imported on use)."""

from __future__ import annotations

import io
import re
from typing import Any

from actors.tools.artefacts.shared import ArtefactError

Cell = str | int | float | bool | None

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
    from openpyxl import Workbook  # lazy: openpyxl costs ~0.2 s; only a spreadsheet needs it
    from openpyxl.styles import Font  # lazy: openpyxl costs ~0.2 s; only a spreadsheet needs it
    from openpyxl.utils import get_column_letter  # lazy: openpyxl costs ~0.2 s; only a spreadsheet needs it

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
