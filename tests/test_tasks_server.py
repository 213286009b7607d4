"""The `tasks` MCP server as a real stdio subprocess on a SQLite store: "remind me at 5 to call
the dentist" becomes a row, and list / cancel see it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from actors.scheduler import tasks
from actors.store.migrate import migrate
from actors.store.store import Store

ROOT = Path(__file__).resolve().parent.parent


async def test_remind_create_list_cancel(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'iriis.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    params = StdioServerParameters(command=sys.executable, args=["-m", "actors.scheduler.server"],
                                   env={"IRIIS_DATABASE_URL": url, "IRIIS_TIMEZONE": "Europe/Paris"}, cwd=str(ROOT))
    try:
        async with Client(params, read_timeout_seconds=60) as server:
            listed = {t.name: t for t in (await server.list_tools()).tools}
            assert set(listed) == {"remind", "create_task", "schedule_call", "list_tasks", "cancel_task"}
            assert listed["list_tasks"].annotations.read_only_hint is True

            reminded = await server.call_tool("remind", {"text": "call the dentist", "at": "2027-01-15T17:00"})
            assert not reminded.is_error, reminded.content
            assert reminded.content[0].text == "reminder #1 set for 2027-01-15 17:00 Europe/Paris"
            [row] = await tasks.list_tasks(store)
            assert (row.kind, row.goal, row.status) == ("reminder", "call the dentist", "scheduled")
            assert row.next_run == tasks.parse_when("2027-01-15T16:00Z", 0)

            before = time.time()
            made = await server.call_tool("create_task", {"title": "Flights", "goal": "Find the cheapest flight",
                                                          "repeat": "0 9 * * 1-5"})
            assert not made.is_error and made.content[0].text.startswith("task #2 scheduled for ")
            assert (await tasks.get_task(store, 2)).next_run > before

            bad = await server.call_tool("create_task", {"title": "x", "goal": "y", "repeat": "61 * * * *"})
            assert bad.is_error and "cron" in bad.content[0].text
            when = await server.call_tool("remind", {"text": "x", "at": "at teatime"})
            assert when.is_error

            shown = await server.call_tool("list_tasks", {})
            assert not shown.is_error and "Flights" in shown.content[0].text

            gone = await server.call_tool("cancel_task", {"task_id": 1})
            assert not gone.is_error and gone.content[0].text == "cancelled #1 (call the dentist)"
            again = await server.call_tool("cancel_task", {"task_id": 1})
            assert again.is_error and "already cancelled" in again.content[0].text
            missing = await server.call_tool("cancel_task", {"task_id": 99})
            assert missing.is_error
    finally:
        await store.close()
