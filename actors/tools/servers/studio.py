"""MCP server "studio": make charts, PDFs, Word files, slides and spreadsheets
(`python -m actors.tools.servers.studio`).

Every artefact is stored in the files table and the tool answers with its handle,
"saved as file 12 (chart.png)", which the owner's clients can open and other tools can
inspect. The store comes from IRIIS_DATABASE_URL, as for the files server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema

from actors.store.store import Store
from actors.tools import artefacts
from actors.tools.artefacts import MAX_POINTS, MAX_SERIES, ArtefactError, Cell, ChartKind, Slide
from actors.tools.artefacts.coerce import chart_data, labels, split_numbers
from actors.tools.servers.files import store_lifespan

mcp: MCPServer[Store] = MCPServer(
    "studio",
    instructions=("Make charts, PDF and Word documents, slide decks and spreadsheets. Each is saved "
                  "as a file and the answer names it ('saved as file 12 (chart.png)'); mention that "
                  "file to the user."),
    lifespan=store_lifespan,
)

# Creating files changes nothing that existed, and a repeat makes a second file.
_MAKES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                         open_world_hint=False)


class SavedFile(BaseModel):
    file_id: int
    name: str
    mime: str
    size: int


async def _make_and_save(ctx: Context, build: Callable[[], bytes], ext: str, title: str,
                         fallback: str) -> CallToolResult:
    """Build the artefact off the event loop and store it as `<title as a file name>.<ext>`."""
    name = artefacts.file_name(title, ext, fallback)
    try:
        # Rendering is CPU-bound (matplotlib, fpdf2); a thread keeps the server answering.
        data = await asyncio.to_thread(build)
    except ArtefactError as exc:
        raise ToolError(str(exc)) from None
    store: Store = ctx.request_context.lifespan_context
    record = await store.add_file(name, artefacts.MIME[ext], data)
    saved = SavedFile(file_id=record.id, name=record.name, mime=record.mime, size=record.size)
    return CallToolResult(
        content=[TextContent(type="text", text=f"saved as file {record.id} ({record.name})")],
        structured_content=saved.model_dump(mode="json"),
    )


MarkdownText = Annotated[str, Field(
    description="Body in simple Markdown: '# Heading', '## Subheading', '- bullet', '1. item', "
                "**bold**, ``` code fences; blank lines separate paragraphs.",
    max_length=500_000,
)]
FileName = Annotated[str | None, Field(description="File name without extension; defaults to the title.",
                                       max_length=100)]


# What the model is shown for `series`: the preferred shape first, then the others it may send
# (label/number pairs as an object, records, or text); `coerce.chart_data` reads them all and
# refuses an ambiguous one saying what to send, so no shape is refused by validation first.
_SERIES_SCHEMA = {
    "anyOf": [
        {"type": "object", "maxProperties": MAX_SERIES,
         "additionalProperties": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "number"}]}},
        {"type": "array", "items": {"anyOf": [{"type": "object"}, {"type": "array"}, {"type": "number"}]}},
        {"type": "string"},
        {"type": "null"},
    ],
    "description": ('Named series {name: [numbers]}, e.g. {"Sales": [40, 32, 55]} with x_labels '
                    '["Jan", "Feb", "Mar"]. Label/number pairs also work: {"Jan": 40, "Feb": 32}, '
                    '[{"label": "Jan", "value": 40}] or "Jan 40, Feb 32". For a pie, one series with '
                    "x_labels, or one number per label."),
}
ChartSeries = Annotated[Any, WithJsonSchema(_SERIES_SCHEMA)]
# Lists the model may send as text ("40, 32, 55", "Jan, Feb, Mar") are split before validation.
Numbers = Annotated[list[float] | None, BeforeValidator(split_numbers)]
Labels = Annotated[list[str] | None, BeforeValidator(labels)]


@mcp.tool(description="Draw a line, bar, scatter or pie chart and save it as a PNG file.", annotations=_MAKES)
async def make_chart(
    ctx: Context,
    kind: ChartKind,
    title: str = "",
    series: ChartSeries = None,
    x: Annotated[Numbers, Field(description="X positions (line/scatter), or with y "
                                            "for a single series.", max_length=MAX_POINTS)] = None,
    y: Annotated[Numbers, Field(description="Y values of a single series.", max_length=MAX_POINTS)] = None,
    x_labels: Annotated[Labels, Field(description="Category names along the x axis, "
                                                  "or pie slice names.", max_length=MAX_POINTS)] = None,
    x_label: str | None = None,
    y_label: str | None = None,
    name: FileName = None,
) -> Annotated[CallToolResult, SavedFile]:
    try:
        data = chart_data(series, x_labels, name=y_label or "value")
    except ArtefactError as exc:
        raise ToolError(str(exc)) from None
    points = data.series if data else None
    names = data.x_labels if data else x_labels
    where = data.x if data and data.x is not None else x

    def build() -> bytes:
        return artefacts.chart(kind, title, points, x=where, y=y, x_labels=names, x_label=x_label, y_label=y_label)

    return await _make_and_save(ctx, build, "png", name or title, "chart")


@mcp.tool(description="Write a PDF document from a title and Markdown-style text.", annotations=_MAKES)
async def make_pdf(ctx: Context, title: str, text: MarkdownText, name: FileName = None,
                   ) -> Annotated[CallToolResult, SavedFile]:
    return await _make_and_save(ctx, lambda: artefacts.pdf_document(title, text), "pdf", name or title, "document")


@mcp.tool(description="Write a Word (.docx) document from a title and Markdown-style text.", annotations=_MAKES)
async def make_word(ctx: Context, title: str, text: MarkdownText, name: FileName = None,
                    ) -> Annotated[CallToolResult, SavedFile]:
    return await _make_and_save(ctx, lambda: artefacts.word_document(title, text), "docx", name or title,
                                "document")


@mcp.tool(
    description="Make a PowerPoint (.pptx) deck: a title slide, then one slide per entry with a "
                "title and bullets (indent a bullet by two spaces per level for sub-points).",
    annotations=_MAKES,
)
async def make_slides(
    ctx: Context,
    title: str,
    slides: Annotated[list[Slide], Field(min_length=1, max_length=200)],
    subtitle: str | None = None,
    name: FileName = None,
) -> Annotated[CallToolResult, SavedFile]:
    return await _make_and_save(ctx, lambda: artefacts.slide_deck(title, slides, subtitle), "pptx",
                                name or title, "slides")


@mcp.tool(
    description="Make an Excel (.xlsx) workbook: {sheet name: rows}, each row a list of cells. "
                "The first row is the header (bold, frozen); text starting with '=' is a formula.",
    annotations=_MAKES,
)
async def make_spreadsheet(
    ctx: Context,
    sheets: Annotated[dict[str, list[list[Cell]]], Field(min_length=1, max_length=50)],
    header: bool = True,
    name: FileName = None,
) -> Annotated[CallToolResult, SavedFile]:
    first: Any = next(iter(sheets), "spreadsheet")
    return await _make_and_save(ctx, lambda: artefacts.spreadsheet(sheets, header), "xlsx",
                                name or str(first), "spreadsheet")


def main() -> None:
    mcp.run("stdio")


if __name__ == "__main__":
    main()
