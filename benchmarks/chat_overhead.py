"""Overhead of POST /v1/chat through Serve and the actors, to the first `sentence` event.

The scripted provider waits a fixed 200 ms before its first token; what we report is the time
to the first sentence minus those 200 ms, over 50 turns (after 3 warm-up turns).

With --trace, every process marks when the turn reaches it (actors/common/trace.py) and the
line adds the p50 of each hop in milliseconds: client to gateway (the Serve proxy), FastAPI
there (middleware, auth, the body), the gateway's session lookup, the call into the session actor,
the turn's set-up there (its store reads: whose conversation, memory; then attachments), the
call into the AgentLoop, its tool catalogue, until the provider request, the provider (its 200 ms included), the first sentence cut in the loop, and the way back
through the session actor and the gateway to the client. Tracing writes a line per mark, so
its total runs a little above the untraced figure.

Prints one JSON line. Usage:
    python benchmarks/chat_overhead.py [--turns 50] [--trace] [--database-url postgresql://...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import scripted_openai as so  # noqa: E402
from tests.server_proc import ServerProcess  # noqa: E402
from tests.sse import iter_events  # noqa: E402

TTFT = 0.200
KEY = "bench-owner-key"
REPLY = "This is the first sentence. And here is a second one to follow it."


STAGES = ("gateway.asgi", "gateway.in", "gateway.session", "session.in", "session.begun", "session.read",
          "session.rendered", "session.prepared", "loop.in", "loop.tools", "provider.request", "provider.first", "loop.sentence", "session.sentence", "gateway.sentence")
WINDOWS: list[tuple[float, float]] = []  # each measured turn's wall-clock start and first sentence


def first_sentence_seconds(client: httpx.Client, session_id: str | None) -> tuple[float, str]:
    body = {"message": "benchmark turn"} | ({"session_id": session_id} if session_id else {})
    started = time.perf_counter()
    wall = time.time()
    first = None
    with client.stream("POST", "/v1/chat", json=body, headers={"Authorization": f"Bearer {KEY}"}) as resp:
        for event, data in iter_events(resp):
            if event == "session":
                session_id = data["session_id"]
            if event == "sentence" and first is None:
                first = time.perf_counter() - started
                WINDOWS.append((wall, time.time()))
    assert first is not None and session_id
    return first, session_id


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def breakdown(trace: Path, windows: list[tuple[float, float]]) -> dict[str, float]:
    """The p50 of each hop, from the first mark of each stage inside each turn's window."""
    marks = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    hops: dict[str, list[float]] = {}
    for start, end in windows:
        seen: dict[str, float] = {}
        for m in marks:
            if start <= m["t"] <= end and m["stage"] not in seen:
                seen[m["stage"]] = m["t"]
        points = [("client", start), *[(s, seen[s]) for s in STAGES if s in seen], ("client.sentence", end)]
        for (a, ta), (b, tb) in zip(points, points[1:]):
            hops.setdefault(f"{a} -> {b}", []).append((tb - ta) * 1000)
    return {hop: round(statistics.median(v), 2) for hop, v in hops.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--trace", action="store_true", help="add the p50 of each hop (IRIIS_TRACE)")
    parser.add_argument("--gap", type=float, default=0.0,
                        help="seconds between a reply's end and the next turn (0: at once, as before)")
    parser.add_argument("--database-url", default="",
                        help="an empty PostgreSQL database to run on (default: SQLite in a temporary home)")
    args = parser.parse_args()
    provider = so.ScriptedOpenAI().start()
    provider.default_reply = so.text(REPLY, ttft=TTFT)
    with tempfile.TemporaryDirectory() as home:
        trace = Path(home) / "trace.jsonl"
        server = ServerProcess(Path(home), {
            "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "bench", "IRIIS_CHAT_MODEL": "scripted-model",
            "IRIIS_OWNER_KEYS": KEY, "DATABASE_URL": args.database_url, "IRIIS_TRACE": str(trace) if args.trace else "",
        }).start()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                sid = None
                for _ in range(3):
                    _, sid = first_sentence_seconds(client, sid)
                overhead_ms = []
                WINDOWS.clear()
                for _ in range(args.turns):
                    time.sleep(args.gap)
                    seconds, sid = first_sentence_seconds(client, sid)
                    overhead_ms.append((seconds - TTFT) * 1000)
            hops = breakdown(trace, WINDOWS) if args.trace else None
        finally:
            server.stop()
            provider.stop()
    print(json.dumps({**({"hops_p50_ms": hops} if hops else {}),
        "benchmark": "chat_overhead", "turns": args.turns, "provider_ttft_ms": TTFT * 1000,
        "overhead_p50_ms": round(statistics.median(overhead_ms), 1),
        "overhead_p95_ms": round(percentile(overhead_ms, 0.95), 1),
        "overhead_min_ms": round(min(overhead_ms), 1), "store": "postgresql" if args.database_url else "sqlite",
        "goal_p50_ms": 20, "baseline": "scripted provider's 200 ms time to first token",
    }))


if __name__ == "__main__":
    main()
