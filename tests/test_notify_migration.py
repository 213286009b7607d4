"""Migration 0012 on both databases: rows queued before it keep their place in the outbox
(nothing lost on upgrade), and it downgrades and upgrades again cleanly."""

from __future__ import annotations

from alembic import command
from sqlalchemy.engine import Connection

from actors.notify import call_store, outbox
from actors.store.migrate import _alembic_config, current_revision, head_revision, migrate
from actors.store.models import OutboxItem
from actors.store.store import Store


async def _downgrade(store: Store, revision: str) -> None:
    def down(connection: Connection) -> None:
        command.downgrade(_alembic_config(connection), revision)

    async with store.engine.begin() as conn:
        await conn.run_sync(down)


async def test_queued_rows_survive_the_upgrade_and_it_downgrades(store: Store) -> None:
    await _downgrade(store, "0011")
    assert await current_revision(store) == "0011"
    from sqlalchemy import text

    async with store.engine.begin() as conn:
        await conn.execute(text("INSERT INTO outbox (ts, kind, title, body, status) "
                                "VALUES (1.0, 'reminder', 'Reminder: tea', 'Make tea', 'queued')"))
    await migrate(store)
    assert await current_revision(store) == head_revision()
    [row] = await outbox.due_rows(store, now=2.0)
    assert (row["title"], row["status"], row["attempts"], row["next_try"], row["channels"]) == (
        "Reminder: tea", "queued", 0, None, None)
    await call_store.create_call(store, 5.0, "Tea time", 1.0)
    await store.add_outbox(OutboxItem(kind="test", title="t", body="b"))
    assert len(await store.list_outbox(status="queued")) == 2
