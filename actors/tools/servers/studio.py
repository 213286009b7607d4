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
from pydantic import BaseModel, Field

from actors.store.store import Store
from actors.tools import artefacts
from actors.tools.artefacts import MAX_POINTS, MAX_SERIES, ArtefactError, Cell, ChartKind, Slide
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


@mcp.tool(description="Draw a line, bar, scatter or pie chart and save it as a PNG file.", annotations=_MAKES)
async def make_chart(
    ctx: Context,
    kind: ChartKind,
    title: str = "",
    series: Annotated[dict[str, list[float]] | None, Field(
        description="Named series, {label: [numbers]}. For a pie, one series (with x_labels) "
                    "or one number per label.", max_length=MAX_SERIES)] = None,
    x: Annotated[list[float] | None, Field(description="X positions (line/scatter), or with y "
                                                      "for a single series.", max_length=MAX_POINTS)] = None,
    y: Annotated[list[float] | None, Field(description="Y values of a single series.",
                                           max_length=MAX_POINTS)] = None,
    x_labels: Annotated[list[str] | None, Field(description="Category names along the x axis, "
                                                             "or pie slice names.", max_length=MAX_POINTS)] = None,
    x_label: str | None = None,
    y_label: str | None = None,
    name: FileName = None,
) -> Annotated[CallToolResult, SavedFile]:
    def build() -> bytes:
        return artefacts.chart(kind, title, series, x=x, y=y, x_labels=x_labels, x_label=x_label, y_label=y_label)

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
