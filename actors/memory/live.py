"""Every active memory item, kept current in this process with one small read per prompt (issue 20).

A prompt ranks all active memory. Reading 100,000 rows and indexing them before every model call
would cost most of a second, so each process keeps the items it last read and their
`MemoryIndex`, and before each prompt asks the store only:

- which rows changed since the last look (`mind.changed`, stamped by every insert and update made
  through SQLAlchemy; see the 0013 migration), re-read with a margin for clocks that disagree
  between processes; and
- how many active rows there are and the highest id. When those disagree with what the process
  holds after applying the changes (a row deleted, or written by something that does not stamp
  `changed`), everything is read again. So a missed stamp costs time, never a stale answer about
  which items exist.

The index is patched for the changed rows (`MemoryIndex.patched`), so a prompt after
`mark_used` touched a dozen rows costs a dozen rows of work. When too many rows of the index are
switched off (items deleted or deactivated), it is rebuilt.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from actors.memory.index import MemoryIndex, index_for
from actors.memory.model import MindItem
from actors.store import schema
from actors.store.store import Store

# Rows stamped up to this many seconds before the last look are read again: a writer in another
# process (or node) whose clock is a little behind, or whose transaction committed a little after
# it stamped its rows, still gets seen. The cost: for this long after a bulk import every prompt
# re-reads the imported rows (and finds them unchanged).
CLOCK_MARGIN = 5.0
# Rebuild the index once this share of its rows is switched off.
MAX_DEAD_SHARE = 0.25


@dataclass
class _Pool:
    items: dict[int, MindItem] = field(default_factory=dict)
    index: MemoryIndex | None = None
    seen: float = 0.0       # the highest `changed` stamp read so far
    top: int = 0            # the highest active id held
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


# One pool per engine (per database, per process); gone with the engine.
_pools: weakref.WeakKeyDictionary[object, _Pool] = weakref.WeakKeyDictionary()


def reset() -> None:
    """Forget every pool (tests)."""
    _pools.clear()


async def active_items(store: Store, conn: AsyncConnection | None = None) -> tuple[list[MindItem], MemoryIndex]:
    """Every active item of `store` and their index, current as of this call. The list is the
    index's rows (`index.items`) and may hold a few rows switched off since the last rebuild
    (`index.active` is False for them): pass the index to `select.select`, which masks them."""
    pool = _pools.get(store.engine)
    if pool is None:
        pool = _pools[store.engine] = _Pool()
    async with pool.lock:
        mind = schema.mind
        async with store.reading(conn) as conn:
            if pool.index is None:
                return await _reload(conn, pool)
            since = pool.seen - CLOCK_MARGIN
            rows = (await conn.execute(sa.select(mind).where(mind.c.changed >= since))).mappings().all()
            count, top = (await conn.execute(
                sa.select(sa.func.count(), sa.func.max(mind.c.id)).where(mind.c.active == sa.true()))).one()
            changed = [MindItem(**r) for r in rows if _differs(pool.items.get(r["id"]), r)]
            removed = [item.id for item in changed if not item.active and item.id in pool.items]
            for item in changed:
                if item.active:
                    pool.items[item.id] = item
                    pool.top = max(pool.top, item.id)
                else:
                    pool.items.pop(item.id, None)
                    if item.id == pool.top:
                        pool.top = max(pool.items, default=0)
            if count != len(pool.items) or (top or 0) != pool.top:
                return await _reload(conn, pool)
            pool.seen = max([pool.seen, *(r["changed"] for r in rows if r["changed"] is not None)])
            if changed:
                pool.index = pool.index.patched([i for i in changed if i.active], removed)
                if (~pool.index.active).sum() > MAX_DEAD_SHARE * len(pool.index):
                    pool.index = MemoryIndex(list(pool.items.values()))
            return pool.index.items, pool.index


def _differs(item: MindItem | None, row: sa.RowMapping) -> bool:
    if item is None:
        return bool(row["active"])
    return (item.text != row["text"] or item.importance != row["importance"] or item.active != bool(row["active"])
            or item.last_used != row["last_used"] or item.kind != row["kind"] or item.uses != row["uses"]
            or item.provenance != row["provenance"])


async def _reload(conn: sa.ext.asyncio.AsyncConnection, pool: _Pool) -> tuple[list[MindItem], MemoryIndex]:
    mind = schema.mind
    started = time.time()
    rows = (await conn.execute(sa.select(mind).where(mind.c.active == sa.true()).order_by(mind.c.id.desc()))).mappings().all()
    items = [MindItem(**r) for r in rows]
    pool.items = {item.id: item for item in items}
    pool.top = items[0].id if items else 0
    stamps = [r["changed"] for r in rows if r["changed"] is not None]
    # Rows stamped while we read are picked up by the next look (the margin covers them).
    pool.seen = max(stamps) if stamps else started
    pool.index = index_for(items)
    return items, pool.index
