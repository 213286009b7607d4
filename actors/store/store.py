"""Async access to the database through SQLAlchemy Core, for PostgreSQL (asyncpg) and SQLite.

One Store per process; every actor opens its own (engines do not cross process boundaries).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Iterable

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from actors.store import schema
from actors.store.models import HEALTH_CHANNEL, AuditEntry, ConversationRecord, FileRecord, MessageRecord, OutboxItem


def resolve_url(database_url: str | None, home: Path) -> str:
    """Map the user's DATABASE_URL (or none) to an async SQLAlchemy URL."""
    if not database_url:
        home.mkdir(parents=True, exist_ok=True)
        return f"sqlite+aiosqlite:///{home / 'iriis.sqlite3'}"
    if database_url.startswith("postgres://"):
        database_url = "postgresql://" + database_url[len("postgres://"):]
    if database_url.startswith("postgresql://"):
        return "postgresql+asyncpg://" + database_url[len("postgresql://"):]
    if database_url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + database_url[len("sqlite:///"):]
    return database_url


def tune_sqlite(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets the gateway read while a session actor writes; the busy timeout makes
    # concurrent writers from several actor processes wait instead of failing.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_sqlite = engine.dialect.name == "sqlite"

    @classmethod
    def open(cls, url: str, pool_size: int = 5, max_overflow: int = 5) -> "Store":
        """An engine for `url`. PostgreSQL keeps `pool_size` connections open (more on demand,
        up to `max_overflow`): actors that exist per conversation, device or stream pass small
        numbers, since a server holds many of them and PostgreSQL allows about 100 clients."""
        if url.startswith("sqlite"):
            engine = create_async_engine(url, connect_args={"timeout": 10})
            event.listen(engine.sync_engine, "connect", tune_sqlite)
        else:
            engine = create_async_engine(url, pool_size=pool_size, max_overflow=max_overflow, pool_pre_ping=True)
        return cls(engine)

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def reading(self, conn: AsyncConnection | None = None) -> AsyncIterator[AsyncConnection]:
        """`conn` when a caller lends one (several reads on one checkout: a process that keeps a
        single pooled connection then opens no second one for them), else a connection of its own."""
        if conn is not None:
            yield conn
            return
        async with self.engine.connect() as own:
            yield own

    def _insert(self, table: sa.Table) -> Any:
        return (sqlite.insert if self.is_sqlite else postgresql.insert)(table)

    def upsert(self, table: sa.Table) -> Any:
        """An INSERT with this backend's ON CONFLICT clauses, for callers that write inside
        their own transaction."""
        return self._insert(table)

    # -- conversations and messages -------------------------------------------------------

    async def get_conversation(self, conversation_id: str) -> ConversationRecord | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                sa.select(schema.conversations).where(schema.conversations.c.id == conversation_id)
            )).mappings().first()
        return ConversationRecord(**row) if row else None

    async def write_batch(
        self,
        conversations: Iterable[ConversationRecord],
        messages: Iterable[MessageRecord],
        deleted_ids: Iterable[str] = (),
    ) -> None:
        """Apply one batch atomically: conversation upserts, message upserts (by id), deletions."""
        convs = [c.model_dump() for c in conversations]
        msgs = [m.model_dump() for m in messages]
        gone = list(deleted_ids)
        async with self.engine.begin() as conn:
            for conv in convs:
                stmt = self._insert(schema.conversations).values(**conv)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["id"],
                    set_={k: stmt.excluded[k] for k in ("title", "summary", "summary_upto", "summary_sources",
                                                       "updated")},
                )
                await conn.execute(stmt)
            if msgs:
                # An upsert: a reply written while pending is written again when it is final.
                stmt = self._insert(schema.messages)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["id"], set_={k: stmt.excluded[k] for k in ("content", "meta")})
                await conn.execute(stmt, msgs)
            if gone:
                await conn.execute(sa.delete(schema.messages).where(schema.messages.c.id.in_(gone)))

    async def list_messages(self, conversation_id: str, limit: int | None = None) -> list[MessageRecord]:
        query = (sa.select(schema.messages)
                 .where(schema.messages.c.conversation_id == conversation_id)
                 .order_by(schema.messages.c.seq.desc()))
        if limit is not None:
            query = query.limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [MessageRecord(**r) for r in reversed(rows)]

    async def list_conversations(self, limit: int = 50, include_health: bool = False) -> list[ConversationRecord]:
        query = sa.select(schema.conversations).order_by(schema.conversations.c.updated.desc()).limit(limit)
        if not include_health:
            query = query.where(schema.conversations.c.channel != HEALTH_CHANNEL)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [ConversationRecord(**r) for r in rows]

    # -- key-value settings ---------------------------------------------------------------

    async def get_kv(self, key: str, default: Any = None) -> Any:
        async with self.engine.connect() as conn:
            value = (await conn.execute(
                sa.select(schema.kv.c.value).where(schema.kv.c.key == key)
            )).scalar_one_or_none()
        return default if value is None else value

    async def set_kv(self, key: str, value: Any) -> None:
        stmt = self._insert(schema.kv).values(key=key, value=value, updated=time.time())
        stmt = stmt.on_conflict_do_update(
            index_elements=["key"], set_={"value": stmt.excluded.value, "updated": stmt.excluded.updated}
        )
        async with self.engine.begin() as conn:
            await conn.execute(stmt)

    async def delete_kv(self, key: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(schema.kv).where(schema.kv.c.key == key))

    # -- files ----------------------------------------------------------------------------

    async def add_file(self, name: str, mime: str, data: bytes, conversation_id: str | None = None) -> FileRecord:
        values = {
            "conversation_id": conversation_id, "name": name, "mime": mime, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "data": base64.b64encode(data).decode("ascii"), "created": time.time(),
        }
        async with self.engine.begin() as conn:
            file_id = (await conn.execute(
                sa.insert(schema.files).values(**values).returning(schema.files.c.id)
            )).scalar_one()
        values.pop("data")
        return FileRecord(id=file_id, **values)

    async def get_file(self, file_id: int) -> tuple[FileRecord, bytes] | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(
                sa.select(schema.files).where(schema.files.c.id == file_id)
            )).mappings().first()
        if row is None:
            return None
        data = base64.b64decode(row["data"])
        meta = {k: v for k, v in row.items() if k != "data"}
        return FileRecord(**meta), data

    # -- audit log ------------------------------------------------------------------------

    async def add_audit(self, entry: AuditEntry) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.insert(schema.audit_log).values(**entry.model_dump()))

    async def list_audit(self, limit: int = 100) -> list[AuditEntry]:
        query = sa.select(schema.audit_log).order_by(schema.audit_log.c.id.desc()).limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [AuditEntry(**{k: v for k, v in r.items() if k != "id"}) for r in rows]

    # -- outbox ---------------------------------------------------------------------------

    async def add_outbox(self, item: OutboxItem) -> int:
        values = item.model_dump(exclude={"id"})
        async with self.engine.begin() as conn:
            return (await conn.execute(
                sa.insert(schema.outbox).values(**values).returning(schema.outbox.c.id)
            )).scalar_one()

    async def list_outbox(self, status: str | None = None, limit: int = 100) -> list[OutboxItem]:
        query = sa.select(schema.outbox).order_by(schema.outbox.c.id.desc()).limit(limit)
        if status:
            query = query.where(schema.outbox.c.status == status)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [OutboxItem(**r) for r in rows]

    # -- messages by id -------------------------------------------------------------------

    async def message_conversation(self, message_id: str) -> str | None:
        async with self.engine.connect() as conn:
            return (await conn.execute(
                sa.select(schema.messages.c.conversation_id).where(schema.messages.c.id == message_id)
            )).scalar_one_or_none()
