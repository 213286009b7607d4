"""The agent's `schedule_call` on the `tasks` MCP server (a real stdio subprocess on SQLite) and
the autonomy loop's `call` action: both make a row the call watcher rings."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from actors.notify import call_store
from actors.scheduler import tasks
from actors.scheduler.autonomy.actions import StoreActions, carry_out
from actors.scheduler.autonomy.decision import Decision
from actors.store.migrate import migrate
from actors.store.store import Store

ROOT = Path(__file__).resolve().parent.parent


async def test_schedule_call_makes_a_call_the_watcher_rings(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'iriis.sqlite3'}"
    store = Store.open(url)
    await migrate(store)
    params = StdioServerParameters(command=sys.executable, args=["-m", "actors.scheduler.server"],
                                   env={"IRIIS_DATABASE_URL": url, "IRIIS_TIMEZONE": "Europe/Paris"}, cwd=str(ROOT))
    try:
        async with Client(params, read_timeout_seconds=60) as server:
            made = await server.call_tool("schedule_call", {"reason": "Check the oven", "at": "2027-01-15T17:00",
                                                            "opening": "Did you turn the oven off?",
                                                            "repeat": "0 17 * * *"})
            assert not made.is_error, made.content
            assert made.content[0].text == "call #1 will ring at 2027-01-15 17:00 Europe/Paris, repeating 0 17 * * *"
            [call] = await call_store.list_calls(store)
            assert (call.reason, call.opening, call.source, call.status) == (
                "Check the oven", "Did you turn the oven off?", "agent", "scheduled")
            assert call.at == tasks.parse_when("2027-01-15T16:00Z", 0)
            before = time.time()
            now = await server.call_tool("schedule_call", {"reason": "Talk now"})
            assert not now.is_error and (await call_store.get_call(store, 2)).at >= before - 1
            bad = await server.call_tool("schedule_call", {"reason": "x", "repeat": "every 5s"})
            assert bad.is_error and "shorter than a minute" in bad.content[0].text
            assert len(await call_store.list_calls(store)) == 2
    finally:
        await store.close()


async def test_the_autonomy_call_action_rings_the_owner(store: Store) -> None:
    decision = Decision(thought="They asked to be called about the plan", action="call",
                        reason="the garden plan", message="I have the garden plan ready.")
    done = await carry_out(StoreActions(store), decision, 1_800_000_000.0)
    [call] = await call_store.list_calls(store)
    assert done == f"call {call.id}"
    assert (call.reason, call.opening, call.source, call.at) == (
        "the garden plan", "I have the garden plan ready.", "autonomy", 1_800_000_000.0)
