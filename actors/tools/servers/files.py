"""MCP server "files": read what is in the stored files (`python -m actors.tools.servers.files`).

Runs as a stdio subprocess and opens the store itself from IRIIS_DATABASE_URL (an async
SQLAlchemy URL), falling back to DATABASE_URL / IRIIS_HOME the way the main process does.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import sqlalchemy as sa
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from actors.common.provenance import Provenance
from actors.store import schema
from actors.store.store import Store, resolve_url
from actors.tools.inspect import Tile, inspect_file as inspect_data


def database_url_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The async database URL a tool server should use."""
    env = os.environ if environ is None else environ
    url = (env.get("IRIIS_DATABASE_URL") or "").strip()
    if url:
        return url
    home = Path((env.get("IRIIS_HOME") or "~/.iriis").strip()).expanduser()
    return resolve_url((env.get("DATABASE_URL") or "").strip() or None, home)


@asynccontextmanager
async def store_lifespan(_server: MCPServer[Store]) -> AsyncIterator[Store]:
    """One store for the server's life; the engine connects on first use, so start-up stays quick."""
    store = Store.open(database_url_from_env())
    try:
        yield store
    finally:
        await store.close()


mcp: MCPServer[Store] = MCPServer(
    "files",
    instructions="Read stored files (documents, images, audio, video) by their file number.",
    lifespan=store_lifespan,
)


class InspectedFile(BaseModel):
    file_id: int
    name: str
    mime: str
    size: int
    kind: str
    # Files made while inspecting, such as a video's contact sheet.
    made_files: list[int] = Field(default_factory=list)
    tiles: list[Tile] = Field(default_factory=list)
    # The file's provenance, named with its name (`file:12 notes.txt`): the confirmation that
    # follows a read tells the owner which document the turn read.
    sources: list[str] = Field(default_factory=list)


class FileEntry(BaseModel):
    file_id: int
    name: str
    mime: str
    size: int
    created: float


class FileList(BaseModel):
    files: list[FileEntry]


def _store(ctx: Context) -> Store:
    return ctx.request_context.lifespan_context


@mcp.tool(
    description=(
        "Look inside stored file N and report what it holds: the text of PDF, Word, Excel, "
        "PowerPoint and text files; for images a description (vision model) or the OCR text; "
        "for audio a transcript; for video a contact sheet image (saved as a new file) plus "
        "the soundtrack transcript. Pass a question to focus image and video answers."
    ),
    # The only write is a video's contact sheet, a new file; nothing stored is changed.
    annotations=ToolAnnotations(title="Inspect a file", read_only_hint=True, open_world_hint=False),
)
async def inspect_file(
    ctx: Context,
    file_id: Annotated[int, Field(description="The file number, as in 'file 12'.", ge=1)],
    question: Annotated[str | None, Field(description="What you want to know about the file.")] = None,
) -> Annotated[CallToolResult, InspectedFile]:
    store = _store(ctx)
    found = await store.get_file(file_id)
    if found is None:
        raise ToolError(f"file {file_id} was not found")
    record, data = found

    async def save(name: str, mime: str, content: bytes) -> int:
        return (await store.add_file(name, mime, content, conversation_id=record.conversation_id)).id

    result = await inspect_data(data, record.mime, record.name, question, save=save)
    text = f"file {file_id} ({record.name}):\n{result.text}"
    meta = InspectedFile(file_id=file_id, name=record.name, mime=record.mime, size=record.size,
                         kind=result.kind, made_files=result.files, tiles=result.tiles,
                         sources=[str(Provenance.file(file_id, record.name))])
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=meta.model_dump(mode="json"))


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


@mcp.tool(
    description="List the most recently stored files, newest first: number, name, type and size.",
    annotations=ToolAnnotations(title="List files", read_only_hint=True, open_world_hint=False),
)
async def list_files(
    ctx: Context,
    limit: Annotated[int, Field(description="How many files to list.", ge=1, le=200)] = 20,
) -> Annotated[CallToolResult, FileList]:
    cols = schema.files.c
    # Only the metadata columns: the data column holds every file's bytes.
    query = (sa.select(cols.id, cols.name, cols.mime, cols.size, cols.created)
             .order_by(cols.id.desc()).limit(limit))
    async with _store(ctx).engine.connect() as conn:
        rows: list[Any] = (await conn.execute(query)).all()
    entries = [FileEntry(file_id=r.id, name=r.name, mime=r.mime, size=r.size, created=r.created) for r in rows]
    if entries:
        text = "\n".join(f"file {e.file_id}: {e.name} ({e.mime}, {e.size} bytes, {_when(e.created)})"
                         for e in entries)
    else:
        text = "No files are stored yet."
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=FileList(files=entries).model_dump(mode="json"))


def main() -> None:
    mcp.run("stdio")


if __name__ == "__main__":
    main()
