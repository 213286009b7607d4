"""Run the Alembic migrations at start-up, on whichever backend the Store points at."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from actors.store.store import Store

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    return cfg


async def migrate(store: Store, revision: str = "head") -> None:
    def upgrade(connection: Connection) -> None:
        command.upgrade(_alembic_config(connection), revision)

    async with store.engine.begin() as conn:
        await conn.run_sync(upgrade)


async def current_revision(store: Store) -> str | None:
    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    async with store.engine.connect() as conn:
        return await conn.run_sync(read)


def head_revision() -> str | None:
    """The newest revision the migrations folder defines."""
    return ScriptDirectory.from_config(_alembic_config()).get_current_head()
