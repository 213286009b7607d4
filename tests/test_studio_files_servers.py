"""The studio and files MCP servers as real stdio subprocesses sharing one SQLite store."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from actors.store.migrate import migrate
from actors.store.store import Store

ROOT = Path(__file__).resolve().parent.parent


def server(name: str, database_url: str) -> StdioServerParameters:
    # The SDK passes only a minimal environment to the child: what it needs is named here,
    # and no provider is configured, so images go through OCR.
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", f"actors.tools.servers.{name}"],
        env={"IRIIS_DATABASE_URL": database_url},
        cwd=str(ROOT),
    )


async def test_make_chart_and_pdf_then_inspect_them(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'iriis.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    await store.close()

    async with Client(server("studio", url), read_timeout_seconds=120) as studio, \
            Client(server("files", url), read_timeout_seconds=120) as files:
        studio_tools = {t.name for t in (await studio.list_tools()).tools}
        assert studio_tools == {"make_chart", "make_pdf", "make_word", "make_slides", "make_spreadsheet"}
        files_tools = {t.name: t for t in (await files.list_tools()).tools}
        assert set(files_tools) == {"inspect_file", "list_files"}
        assert files_tools["inspect_file"].annotations is not None
        assert files_tools["inspect_file"].annotations.read_only_hint is True
        assert "ctx" not in files_tools["inspect_file"].input_schema["properties"]

        chart = await studio.call_tool("make_chart", {
            "kind": "line", "title": "Weekly Visitors",
            "series": {"site": [120, 180, 150, 210]}, "x_labels": ["w1", "w2", "w3", "w4"],
        })
        assert not chart.is_error
        assert chart.structured_content is not None
        chart_id = chart.structured_content["file_id"]
        assert chart.content[0].text == f"saved as file {chart_id} (weekly-visitors.png)"

        pdf = await studio.call_tool("make_pdf", {
            "title": "Trip Notes", "text": "# Day one\nWe walked to the **harbour**.\n\n- ferry at 9\n- lunch",
            "name": "trip",
        })
        assert not pdf.is_error
        assert pdf.structured_content is not None
        pdf_id = pdf.structured_content["file_id"]
        assert pdf.content[0].text == f"saved as file {pdf_id} (trip.pdf)"
        assert pdf.structured_content["mime"] == "application/pdf"

        bad = await studio.call_tool("make_chart", {"kind": "pie", "title": "nothing"})
        assert bad.is_error and "needs data" in bad.content[0].text

        listed = await files.call_tool("list_files", {"limit": 5})
        assert listed.content[0].text.splitlines()[0].startswith(f"file {pdf_id}: trip.pdf (application/pdf")

        seen_pdf = await files.call_tool("inspect_file", {"file_id": pdf_id})
        assert not seen_pdf.is_error
        text = seen_pdf.content[0].text
        assert text.startswith(f"file {pdf_id} (trip.pdf):\nPDF trip.pdf: 1 page")
        for words in ("Trip Notes", "Day one", "We walked to the harbour.", "ferry at 9", "lunch"):
            assert words in text

        seen_chart = await files.call_tool("inspect_file", {"file_id": chart_id, "question": "what trend?"})
        assert not seen_chart.is_error
        assert "PNG, 800 x 500 pixels" in seen_chart.content[0].text
        assert "weekly visitors" in seen_chart.content[0].text.lower()  # the title, read by OCR
        assert seen_chart.structured_content is not None
        assert seen_chart.structured_content["kind"] == "image"

        missing = await files.call_tool("inspect_file", {"file_id": 9999})
        assert missing.is_error and "file 9999 was not found" in missing.content[0].text
