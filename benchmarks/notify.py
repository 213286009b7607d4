"""What delivery costs on this machine: the outbox drainer sending 200 rows over Web Push
(encrypted and signed per subscription), ntfy and Telegram, and a call ringing on all of them,
against local servers, on SQLite.

    .venv/bin/python benchmarks/notify.py

Prints one JSON line: rows per second through the drainer, and the milliseconds from a due
call's tick to every channel having answered (median of 20). Goal: a ring well under a second
of the watcher's 10 s tick.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.notify import call_store, outbox, webpush  # noqa: E402
from actors.notify.config import NotifyConfig  # noqa: E402
from actors.notify.notifier import Notifier  # noqa: E402
from actors.notify.watcher import CallWatcher  # noqa: E402
from actors.scheduler.calls_loop import repeat_after  # noqa: E402
from actors.store.migrate import migrate  # noqa: E402
from actors.store.models import OutboxItem  # noqa: E402
from actors.store.store import Store  # noqa: E402
from tests.notify_fakes import Browser, Recorder  # noqa: E402

ROWS, RINGS = 200, 20


async def main() -> dict:
    fake = Recorder()
    with tempfile.TemporaryDirectory() as home:
        store = Store.open(f"sqlite+aiosqlite:///{Path(home) / 'b.sqlite3'}")
        await migrate(store)
        browser = Browser(f"{fake.url}/push/b")
        await webpush.add_subscription(store, browser.endpoint,
                                       webpush.SubscriptionKeys(**browser.subscription()["keys"]))
        config = NotifyConfig(ntfy_url=fake.url, ntfy_topic="bench", telegram_api=fake.url, telegram_token="1:b",
                              telegram_chat_id="1")
        notifier = Notifier(store, config)
        for i in range(ROWS):
            await store.add_outbox(OutboxItem(kind="turn_done", title="Iriis finished", body=f"Row {i} is done."))
        start = time.perf_counter()
        sent = 0
        while True:
            counts = await outbox.drain(store, notifier, time.time())
            if not counts:
                break
            sent += counts.get("sent", 0)
        drain_s = time.perf_counter() - start
        watcher = CallWatcher(store, notifier, repeat_after, time.time)
        rings = []
        for i in range(RINGS):
            await call_store.create_call(store, time.time(), f"Ring {i}", time.time(), source="agent")
            t = time.perf_counter()
            await watcher.tick()
            rings.append((time.perf_counter() - t) * 1000)
        await notifier.close()
        await store.close()
    fake.stop()
    return {"benchmark": "notify", "rows": ROWS, "sent": sent, "rows_per_s": round(ROWS / drain_s, 1),
            "channels_per_row": 3, "ring_ms_median": round(statistics.median(rings), 1),
            "ring_ms_max": round(max(rings), 1)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
