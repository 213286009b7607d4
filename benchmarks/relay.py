"""Relay speed: long-poll wake latency and append throughput, beside a bare baseline.

The relay is the real app (HTTP -> RelayActor -> SQLite store) under uvicorn; the baseline is a
bare Starlette app on the same machine whose POST appends to an in-memory list and wakes an
asyncio.Condition. Both are driven over real HTTP by the same client.

    .venv/bin/python benchmarks/relay.py [--wakes 500] [--writers 10] [--per-writer 50]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.server_proc import free_port  # noqa: E402  (ports outside the ephemeral range)

MESSAGE = {"message": {"role": "assistant", "name": "bench", "content": "ping"}}


def baseline_app() -> tuple[Starlette, Callable[[], int]]:
    log: list[dict[str, Any]] = []
    cond: asyncio.Condition | None = None
    waiting = 0

    async def post(request: Request) -> Response:
        nonlocal cond
        body = await request.json()
        cond = cond or asyncio.Condition()
        async with cond:
            log.append({"seq": len(log) + 1, "message": body["message"]})
            cond.notify_all()
        return JSONResponse(log[-1], status_code=201)

    async def wait(request: Request) -> Response:
        nonlocal cond, waiting
        since = int(request.query_params["since"])
        cond = cond or asyncio.Condition()
        waiting += 1
        try:
            async with cond:
                await asyncio.wait_for(cond.wait_for(lambda: len(log) > since), 30)
        finally:
            waiting -= 1
        return JSONResponse({"messages": log[since:], "last_seq": len(log)})

    app = Starlette(routes=[Route("/s/b", post, methods=["POST"]), Route("/s/b/wait", wait)])
    return app, lambda: waiting


def serve_in_thread(app: Any, port: int) -> uvicorn.Server:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    return server


async def measure(url: str, headers: dict[str, str], parked: Callable[[], Awaitable[bool]],
                  wakes: int, writers: int, per_writer: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as client:
        head = (await client.post(url, json=MESSAGE, headers=headers)).json()["seq"]
        latencies: list[float] = []
        for _ in range(wakes):
            waiter = asyncio.create_task(client.get(f"{url}/wait", params={"since": head, "timeout": 30},
                                                    headers=headers))
            deadline = time.monotonic() + 10
            while not await parked():
                if time.monotonic() > deadline:
                    raise RuntimeError("the waiter never parked")
                await asyncio.sleep(0.001)
            start = time.perf_counter()
            posted = await client.post(url, json=MESSAGE, headers=headers)
            reply = await waiter
            latencies.append((time.perf_counter() - start) * 1000)
            assert reply.status_code == 200, reply.status_code
            head = posted.json()["seq"]

        async def writer() -> None:
            for _ in range(per_writer):
                r = await client.post(url, json=MESSAGE, headers=headers)
                assert r.status_code == 201, r.text

        start = time.perf_counter()
        await asyncio.gather(*(writer() for _ in range(writers)))
        elapsed = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=20)
    return {"wake_p50_ms": round(statistics.median(latencies), 2), "wake_p95_ms": round(cuts[18], 2),
            "appends_per_s": round(writers * per_writer / elapsed, 1)}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wakes", type=int, default=500)
    parser.add_argument("--writers", type=int, default=10)
    parser.add_argument("--per-writer", type=int, default=50)
    args = parser.parse_args()

    import ray

    from actors.common.names import NAMESPACE
    from actors.relay.actor import RelayConfig
    from actors.relay.limits import RelayLimits
    from actors.relay.service import RelayService
    from actors.store.migrate import migrate
    from actors.store.store import Store
    from serve_apps.http.relay_app import build_relay_app

    app, waiting = baseline_app()
    base_port = free_port()
    serve_in_thread(app, base_port)

    async def base_parked() -> bool:
        return waiting() > 0

    baseline = await measure(f"http://127.0.0.1:{base_port}/s/b", {}, base_parked,
                             args.wakes, args.writers, args.per_writer)

    ray.init(num_cpus=2, include_dashboard=False, namespace=NAMESPACE, log_to_driver=False,
             configure_logging=False)
    data = Path(tempfile.mkdtemp(prefix="relay-bench-"))
    url = f"sqlite+aiosqlite:///{data / 'relay.sqlite3'}"
    setup = Store.open(url)
    await migrate(setup)
    await setup.close()
    # Caps raised so the benchmark measures the path, not the rate limit.
    service = RelayService(Store.open(url), RelayConfig(database_url=url, data_dir=str(data)),
                           RelayLimits(messages_per_minute=10**9, max_messages=10**9))
    relay_port = free_port()
    serve_in_thread(build_relay_app(service), relay_port)
    async with httpx.AsyncClient() as client:
        created = (await client.post(f"http://127.0.0.1:{relay_port}/sessions")).json()
    actor = None

    async def relay_parked() -> bool:
        nonlocal actor
        if actor is None:
            actor = ray.get_actor(f"relay:{created['uid']}", namespace=NAMESPACE)
        return await actor.waiting.remote() > 0

    relay = await measure(created["url"], {"Authorization": f"Bearer {created['key']}"}, relay_parked,
                          args.wakes, args.writers, args.per_writer)
    print(json.dumps({
        "benchmark": "relay", "wakes": args.wakes, "writers": args.writers,
        "appends": args.writers * args.per_writer, "store": "sqlite",
        "relay": relay, "baseline": baseline,
        "ratio": {"wake_p50": round(relay["wake_p50_ms"] / baseline["wake_p50_ms"], 2),
                  "wake_p95": round(relay["wake_p95_ms"] / baseline["wake_p95_ms"], 2),
                  "throughput": round(relay["appends_per_s"] / baseline["appends_per_s"], 3)},
    }))
    ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
