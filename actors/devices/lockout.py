"""The pairing lock-out: five wrong codes from one address within the window (15 minutes by
default) and that address waits the whole window, counted from the last miss.

No Ray here. The misses live in the store's `pair_failures` table (so every gateway replica
sees them); a block is recorded as a row for "block:<address>". The clock is injected so the
window can be tested without waiting.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import sqlalchemy as sa

from actors.store import schema
from actors.store.store import Store

BLOCK_PREFIX = "block:"


class PairLockout:
    def __init__(self, store: Store, failures: int = 5, window_seconds: float = 900.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.failures = failures
        self.window = window_seconds
        self.clock = clock

    async def _recent(self, address: str, now: float) -> tuple[int, float | None]:
        table = schema.pair_failures
        async with self.store.engine.connect() as conn:
            row = (await conn.execute(sa.select(sa.func.count(), sa.func.max(table.c.ts)).where(
                (table.c.address == address) & (table.c.ts > now - self.window)))).first()
        return (int(row[0]), row[1]) if row else (0, None)

    async def _add(self, address: str, now: float) -> None:
        table = schema.pair_failures
        async with self.store.engine.begin() as conn:
            await conn.execute(sa.delete(table).where(table.c.ts < now - 2 * self.window))
            await conn.execute(sa.insert(table).values(address=address, ts=now))

    async def retry_after(self, address: str) -> int | None:
        """Seconds this address must still wait before trying a code, or None if it may."""
        now = self.clock()
        blocked, last = await self._recent(BLOCK_PREFIX + address, now)
        if not blocked:
            return None
        return max(1, math.floor(self.window - (now - (last or 0))))

    async def missed(self, address: str) -> bool:
        """Count a wrong code from `address`; True when this miss locked it out."""
        now = self.clock()
        await self._add(address, now)
        count, _ = await self._recent(address, now)
        if count >= self.failures:
            await self._add(BLOCK_PREFIX + address, now)
            return True
        return False
