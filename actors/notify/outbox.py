"""The outbox drainer: every queued row is delivered over every configured channel, retried
with backoff, and never lost. A row ends `sent` (some channel took it; any channel that gave up
is named in `reason`), `failed` (none did, with the reason), or stays `queued` with `next_try`
(still due: a channel is being retried, or none is configured yet).

Rows are written by whoever has something to say (a background turn, a finished task, a
reminder, relay attention, the agent's notify_owner, the autonomy loop); the scheduler runs
`drain` on its notify loop. `feed_device_events` turns the owner's device events into rows for
Telegram (devices.md: events reach their person's Telegram chat).
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa

from actors.notify import backoff
from actors.notify.channels import Notice
from actors.notify.config import NotifyConfig
from actors.notify.notifier import Notifier, Outcome
from actors.store import schema
from actors.store.models import OutboxItem
from actors.store.store import Store

log = logging.getLogger(__name__)
O = schema.outbox
BATCH = 50
# A pass that found no channel to use looks again this much later.
IDLE_RETRY = 60.0
NO_CHANNEL = "no channel is configured (Web Push, ntfy, Telegram or a connected desktop device)"
DEVICE_CURSOR_KV = "notify.device_events_cursor"
OWNER_ID = 1


def _done(state: str | None) -> bool:
    return state is not None and not state.startswith("retry")


def _state(outcome: Outcome) -> str:
    if outcome.state in ("sent", "gone"):
        return outcome.state
    return f"{outcome.state}: {outcome.error or 'no reason given'}"


async def notice_for(store: Store, config: NotifyConfig, row: dict[str, Any]) -> Notice:
    """How an outbox row reads on the channels. A finished task's whole report goes to Telegram."""
    data = dict(row.get("data") or {})
    url = data.get("url")
    if not url and data.get("call_id"):
        url = config.call_url(int(data["call_id"]))
    elif not url and row.get("session_id"):
        url = f"{config.app_url}/?session={row['session_id']}"
    full = None
    if row["kind"] == "task_done" and data.get("task_id"):
        async with store.engine.connect() as conn:
            full = (await conn.execute(sa.select(schema.tasks.c.result)
                                       .where(schema.tasks.c.id == int(data["task_id"])))).scalar_one_or_none()
    priority = data.get("priority")
    return Notice(kind=row["kind"], title=row["title"], body=row["body"], full=full or None, url=url,
                  priority=priority if isinstance(priority, int) and 1 <= priority <= 5 else 3,
                  data={k: v for k, v in data.items() if k != "channels"} | {"outbox_id": row["id"]},
                  tags=["warning"] if priority == 5 else [])


async def _save(store: Store, row_id: int, **values: Any) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(O).where(O.c.id == row_id).values(**values))


async def deliver_row(store: Store, notifier: Notifier, row: dict[str, Any], now: float) -> str:
    """One pass over one row; returns its status afterwards."""
    state: dict[str, str] = dict(row.get("channels") or {})
    data = row.get("data") or {}
    only = data.get("channels") if isinstance(data.get("channels"), list) else None
    targets = await notifier.targets(only)
    pending = [t for t in targets if not _done(state.get(t))]
    stale = now - float(row["ts"]) > backoff.STALE_SECONDS
    attempts = int(row.get("attempts") or 0)
    outcomes: dict[str, Outcome] = {}
    if pending and not stale:
        notice = await notice_for(store, notifier.config, row)
        outcomes = await notifier.send(notice, pending, outbox_id=row["id"])
        for target, outcome in outcomes.items():
            state[target] = _state(outcome)
        if any(o.state != "skipped" for o in outcomes.values()):
            attempts += 1
    retrying = [t for t in targets if t in state and not _done(state[t])]
    hints = [outcomes[t].hint for t in retrying if t in outcomes and outcomes[t].hint]
    if retrying and not stale and not backoff.exhausted(attempts):
        reason = "retrying " + "; ".join(f"{t}: {state[t].removeprefix('retry: ')}" for t in retrying)
        await _save(store, row["id"], channels=state, attempts=attempts, reason=reason[:1000],
                    next_try=now + backoff.delay(attempts, max(hints, default=None)))
        return "queued"
    for target in retrying:
        state[target] = "failed: " + state[target].removeprefix("retry: ")
    failures = [f"{t}: {v.removeprefix('failed: ')}" for t, v in state.items() if v.startswith("failed")]
    if any(v == "sent" for v in state.values()):
        await _save(store, row["id"], channels=state, attempts=attempts, status="sent", delivered_at=now,
                    next_try=None, reason="; ".join(failures)[:1000] or None)
        return "sent"
    if failures or stale:
        reason = "; ".join(failures) or "expired: no channel took it within 7 days"
        await _save(store, row["id"], channels=state, attempts=attempts, status="failed", next_try=None,
                    reason=reason[:1000])
        return "failed"
    skipped = "; ".join(f"{t}: {v.removeprefix('skipped: ')}" for t, v in state.items() if v.startswith("skipped"))
    await _save(store, row["id"], channels=state, attempts=attempts, next_try=now + IDLE_RETRY,
                reason=(skipped or NO_CHANNEL)[:1000] if targets else NO_CHANNEL)
    return "queued"


async def due_rows(store: Store, now: float, limit: int = BATCH) -> list[dict[str, Any]]:
    query = (sa.select(O).where(O.c.status == "queued", sa.or_(O.c.next_try.is_(None), O.c.next_try <= now))
             .order_by(O.c.id).limit(limit))
    async with store.engine.connect() as conn:
        return [dict(r) for r in (await conn.execute(query)).mappings().all()]


async def drain(store: Store, notifier: Notifier, now: float) -> dict[str, int]:
    """Deliver what is due; counts by the status each row ended in."""
    counts: dict[str, int] = {}
    for row in await due_rows(store, now):
        try:
            status = await deliver_row(store, notifier, row, now)
        except Exception:  # noqa: BLE001 - one bad row must not hold back the rest
            log.exception("notify: outbox row %s could not be delivered this pass", row["id"])
            await _save(store, row["id"], next_try=now + IDLE_RETRY, reason="delivery raised; see the error log")
            status = "error"
        counts[status] = counts.get(status, 0) + 1
    return counts


async def feed_device_events(store: Store, config: NotifyConfig) -> int:
    """Queue the owner's new device events for Telegram; the first call only marks where to
    start (events from before are not replayed). Returns how many were queued."""
    if not config.telegram_on:
        return 0
    E = schema.device_events
    cursor = await store.get_kv(DEVICE_CURSOR_KV)
    async with store.engine.connect() as conn:
        if cursor is None:
            top = (await conn.execute(sa.select(sa.func.max(E.c.id)))).scalar_one_or_none() or 0
            await store.set_kv(DEVICE_CURSOR_KV, int(top))
            return 0
        rows = (await conn.execute(sa.select(E).where(E.c.person_id == OWNER_ID, E.c.id > int(cursor))
                                   .order_by(E.c.id).limit(BATCH))).mappings().all()
    for row in rows:
        await store.add_outbox(OutboxItem(kind="device_event", title=row["title"], body=row["text"], ts=row["ts"],
                                          data={"channels": ["telegram"], "event": row["event"],
                                                "device_id": row["device_id"]}))
    if rows:
        await store.set_kv(DEVICE_CURSOR_KV, int(rows[-1]["id"]))
    return len(rows)
