"""Generated artefacts as bytes: charts, PDF, Word, slides and spreadsheets.

Pure functions, no I/O: the studio server stores what they return in the files table.
The office and plotting libraries are imported inside each function so a process that
only needs one kind (or none, like the files server) does not pay for all of them at start.

- `charts`: `chart` (PNG), with the limits a readable chart keeps to;
- `documents`: `pdf_document`, `word_document` and `slide_deck`, from markdown-ish text;
- `spreadsheets`: `spreadsheet` (.xlsx) from rows of cells;
- `shared`: `ArtefactError`, `MIME` by extension and `file_name` from a title.
"""

from actors.tools.artefacts.charts import MAX_POINTS, MAX_SERIES, ChartKind, ChartSpec, chart
from actors.tools.artefacts.documents import Slide, pdf_document, slide_deck, word_document
from actors.tools.artefacts.shared import MIME, ArtefactError, file_name
from actors.tools.artefacts.spreadsheets import Cell, spreadsheet

__all__ = [
    "MAX_POINTS", "MAX_SERIES", "MIME", "ArtefactError", "Cell", "ChartKind", "ChartSpec", "Slide",
    "chart", "file_name", "pdf_document", "slide_deck", "spreadsheet", "word_document",
]
