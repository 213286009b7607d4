"""Load on loopback: N concurrent conversations, each sending several turns to the scripted
model (which answers at once), with paired devices connected and relay writers appending beside
them. For each N: throughput, p50/p95 time to the first sentence of new and of continued
conversations, memory per live conversation, errors; then the same server after its idle
session actors exited (memory should fall back to the baseline).

Memory is the unique set size (private pages, what a process really costs) summed over the
server's processes, and per SessionActor process. Bounded: a deadline for the whole run and
a timeout on every request. A 503 with Retry-After (a burst past IRIIS_SESSION_START_WAIT) is
waited out and asked again, as a client should; those waits count in the first-sentence
time and are reported (`busy_503s`), and only what never succeeded is an error. Prints one
JSON line.

With `--max-live N` the server caps its conversation processes at N: each level then reports
the most conversation actors alive at once and their memory (sampled every 0.5 s) against the
cap's budget (N x 200 MB), and how many conversations lost a finished turn (reads each one's
stored messages back).

Usage: python benchmarks/load.py [--levels 10,50,100] [--turns 4] [--devices 5] [--relay-writers 5]
                                 [--max-live N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.session.admission import PER_CONVERSATION_BYTES  # noqa: E402
from tests import scripted_openai as so  # noqa: E402
from tests.server_proc import IRIIS, ServerProcess  # noqa: E402

KEY = "load-owner-key"
PIN = "1357"
REPLY = "Here is the first sentence. And a second one after it."
# What the default cap allows each conversation process.
CONVERSATION_BUDGET_MB = PER_CONVERSATION_BYTES // (1024 * 1024)
PG_ADMIN = os.environ.get("IRIIS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


# -- memory ------------------------------------------------------------------------------------

def _uss_kb(pid: int) -> int:
    try:
        total = 0
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
        return total
    except OSError:
        return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _tree(root: int) -> list[int]:
    """The server process and everything it started (Ray's processes and workers included)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _role(cmdline: str) -> str:
    """What a process is: a Ray actor's class (`ray::SessionActor`), else its program."""
    first = cmdline.split(" ", 1)[0]
    if first.startswith("ray::"):
        return first.split(".", 1)[0]
    words = cmdline.split()
    script = next((w for w in words[1:] if w.endswith(".py")), "")
    return (Path(first).name + (" " + Path(script).name if script else ""))[:60]


def memory(root: int) -> dict[str, Any]:
    pids = _tree(root)
    sessions = [p for p in pids if "SessionActor" in _cmdline(p)]
    per = sorted(_uss_kb(p) for p in sessions)
    roles: dict[str, float] = {}
    for pid in pids:
        role = _role(_cmdline(pid))
        roles[role] = roles.get(role, 0.0) + _uss_kb(pid) / 1024
    return {"total_mb": round(sum(_uss_kb(p) for p in pids) / 1024, 1), "processes": len(pids),
            "session_actors": len(sessions),
            "session_actor_uss_mb": round(statistics.median(per) / 1024, 1) if per else None,
            "by_role_mb": {k: round(v, 1) for k, v in sorted(roles.items())}}


def brief(measured: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in measured.items() if k != "by_role_mb"}


def grown(before: dict[str, Any], after: dict[str, Any], top: int = 6) -> dict[str, float]:
    """Which kinds of process hold more memory than before (MB), largest first."""
    roles = set(before["by_role_mb"]) | set(after["by_role_mb"])
    delta = {r: after["by_role_mb"].get(r, 0.0) - before["by_role_mb"].get(r, 0.0) for r in roles}
    return {r: round(d, 1) for r, d in sorted(delta.items(), key=lambda kv: -abs(kv[1]))[:top] if abs(d) >= 1}


# -- one conversation --------------------------------------------------------------------------

ACCEPTED: list[tuple[bool, float]] = []  # (new?, ms to the `session` event: the turn accepted)


class Busy(Exception):
    """503 with Retry-After (a burst past the session start wait): come back then."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


# A client told to come back tries again this many times at most.
BUSY_RETRIES = 20


async def turn(client: httpx.AsyncClient, session_id: str | None) -> tuple[float, str]:
    body: dict[str, Any] = {"message": "load turn"} | ({"session_id": session_id} if session_id else {})
    new = session_id is None
    started = time.perf_counter()
    first = None
    failed = None
    async with client.stream("POST", "/v1/chat", json=body) as resp:
        if resp.status_code == 503 and "retry-after" in resp.headers:
            raise Busy(float(resp.headers["retry-after"]))
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}")
        event = ""
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:])
                if event == "session":
                    session_id = data["session_id"]
                    ACCEPTED.append((new, (time.perf_counter() - started) * 1000))
                elif event == "sentence" and first is None:
                    first = time.perf_counter() - started
                elif event == "error":
                    failed = data.get("error", {}).get("code", "error")
    if failed or first is None or not session_id:
        raise RuntimeError(failed or "no sentence")
    return first, session_id


async def conversation(client: httpx.AsyncClient, turns: int, new: list[float], cont: list[float],
                       errors: list[str], busy: list[float], done: dict[str, int] | None = None) -> None:
    """`turns` turns of one conversation. A 503 with Retry-After is waited out and asked again
    (as a client should), and the time to the first sentence counts from the first try.
    `done` counts the turns each conversation finished (to check that none was lost)."""
    sid = None
    for i in range(turns):
        began = time.perf_counter()
        try:
            for attempt in range(BUSY_RETRIES + 1):
                tried = time.perf_counter()
                try:
                    seconds, sid = await turn(client, sid)
                    break
                except Busy as told:
                    if attempt == BUSY_RETRIES:
                        raise
                    busy.append(told.retry_after)
                    await asyncio.sleep(told.retry_after)
            (new if i == 0 else cont).append((tried - began + seconds) * 1000)
            if done is not None:
                done[sid] = done.get(sid, 0) + 1
        except Exception as exc:  # noqa: BLE001 - counted, the run goes on
            errors.append(f"{type(exc).__name__}: {exc}"[:120])
            if sid is None:
                return


async def peaks(root: int, stop: asyncio.Event, seen: dict[str, float]) -> None:
    """The most conversation actors alive at once, and the most memory they and the server
    held, sampled every half second until `stop`."""
    while not stop.is_set():
        now = await asyncio.to_thread(memory, root)
        per = [_uss_kb(p) for p in _tree(root) if "SessionActor" in _cmdline(p)]
        seen["session_actors"] = max(seen.get("session_actors", 0), now["session_actors"])
        seen["total_mb"] = max(seen.get("total_mb", 0.0), now["total_mb"])
        seen["session_actors_mb"] = max(seen.get("session_actors_mb", 0.0), round(sum(per) / 1024, 1))
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except asyncio.TimeoutError:
            pass


async def kept(client: httpx.AsyncClient, done: dict[str, int]) -> int:
    """Conversations whose stored messages are fewer than their finished turns' (two a turn)."""
    lost = 0
    for sid, turns in done.items():
        got = await client.get(f"/v1/sessions/{sid}/messages")
        if got.status_code != 200 or len(got.json()["data"]) < 2 * turns:
            lost += 1
    return lost


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 1)


# -- devices and relay writers -----------------------------------------------------------------

async def hold_devices(base: str, count: int, stop: asyncio.Event, errors: list[str]) -> int:
    from tests.device_client import connected, hello, pair

    held = []
    for i in range(count):
        try:
            paired = await asyncio.to_thread(pair, base, KEY, PIN, "linux", ["files"], f"load box {i}")
            device, _ = await connected(base, paired["token"], hello(label=f"load box {i}"))
            held.append(device)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"device: {exc}"[:120])

    async def answer(device: Any) -> None:
        while not stop.is_set():
            try:
                await device.recv(timeout=1.0)
            except asyncio.TimeoutError:
                continue
            except Exception as exc:  # noqa: BLE001 - a dropped socket is an error
                errors.append(f"device socket: {exc}"[:120])
                return

    readers = [asyncio.create_task(answer(d)) for d in held]
    await stop.wait()
    for task in readers:
        task.cancel()
    for device in held:
        await device.close()
    return len(held)


throttled = [0]


async def relay_writers(url: str, key: str, writers: int, stop: asyncio.Event, errors: list[str]) -> int:
    sent = 0
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        async def writer(n: int) -> None:
            nonlocal sent
            while not stop.is_set():
                r = await client.post(url, json={"message": {"role": "assistant", "name": f"writer{n}",
                                                                "content": "load"}})
                if r.status_code == 429:  # the relay's write-rate limit: wait as it says
                    throttled[0] += 1
                    await asyncio.sleep(float(r.headers.get("retry-after", "1")))
                elif r.status_code != 201:
                    errors.append(f"relay HTTP {r.status_code}")
                    await asyncio.sleep(0.5)
                else:
                    sent += 1
                await asyncio.sleep(0.2)

        await asyncio.gather(*(writer(n) for n in range(writers)))
    return sent


# -- the run -----------------------------------------------------------------------------------

async def level(server: ServerProcess, n: int, turns: int, devices: int, relay: tuple[str, str] | None,
                writers: int, idle_wait: float) -> dict[str, Any]:
    assert server.proc
    before = memory(server.proc.pid)
    new: list[float] = []
    cont: list[float] = []
    errors: list[str] = []
    busy: list[float] = []      # the Retry-After of each 503 a conversation waited out
    stop = asyncio.Event()
    side = [asyncio.create_task(hold_devices(server.url, devices, stop, errors))]
    if relay and writers:
        side.append(asyncio.create_task(relay_writers(relay[0], relay[1], writers, stop, errors)))
    await asyncio.sleep(1.0)
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    seen: dict[str, float] = {}
    done_turns: dict[str, int] = {}
    sampling = asyncio.create_task(peaks(server.proc.pid, stop, seen))
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits,
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        started = time.perf_counter()
        await asyncio.gather(*(conversation(client, turns, new, cont, errors, busy, done_turns) for _ in range(n)))
        elapsed = time.perf_counter() - started
        lost = await kept(client, done_turns)
    live = memory(server.proc.pid)
    stop.set()
    await sampling
    held, *rest = await asyncio.gather(*side)
    # Idle actors exit; wait for that (bounded), then look again.
    deadline = time.monotonic() + idle_wait
    after = memory(server.proc.pid)
    while after["session_actors"] > before["session_actors"] and time.monotonic() < deadline:
        await asyncio.sleep(5)
        after = memory(server.proc.pid)
    done = len(new) + len(cont)
    return {
        "conversations": n, "turns_each": turns, "turns_done": done,
        "turns_per_s": round(done / elapsed, 1),
        "new_first_sentence_ms": {"p50": pct(new, 0.5), "p95": pct(new, 0.95)},
        "continued_first_sentence_ms": {"p50": pct(cont, 0.5), "p95": pct(cont, 0.95)},
        "errors": len(errors), "error_samples": sorted(set(errors))[:5],
        "busy_503s": len(busy), "busy_retry_after_max_s": max(busy, default=None),
        "conversations_with_turns_lost": lost,
        "peak_session_actors": seen.get("session_actors"), "peak_session_actors_mb": seen.get("session_actors_mb"),
        "peak_total_mb": seen.get("total_mb"),
        "devices_connected": held, "relay_appends": rest[0] if rest else 0, "relay_throttled": throttled[0],
        "memory_before": brief(before), "memory_live": brief(live),
        # Per conversation actor alive when measured: with several turns each, the first
        # conversations' actors may have exited idle before the last ones started.
        "mb_per_live_conversation": round((live["total_mb"] - before["total_mb"])
                                          / max(1, live["session_actors"] - before["session_actors"]), 1),
        "memory_after_idle": brief(after),
        "after_idle_minus_before_mb": round(after["total_mb"] - before["total_mb"], 1),
        "after_idle_grew_mb": grown(before, after),
    }


async def probe(server: ServerProcess, count: int, pause: float, reply_gap: float) -> dict[str, Any]:
    """New conversations one at a time (the pool refills between them), each followed by one
    continued turn `reply_gap` seconds later (a person reading the reply; the pool starts its
    next spare as the first turn ends, and that start takes a core for about two seconds): the
    like-for-like comparison of a new and a continued first sentence."""
    new: list[float] = []
    cont: list[float] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=120, headers={"Authorization": f"Bearer {KEY}"}) as client:
        await turn(client, None)  # warm the gateway and the agent loop
        await asyncio.sleep(pause)
        ACCEPTED.clear()
        for _ in range(count):
            seconds, sid = await turn(client, None)
            new.append(seconds * 1000)
            await asyncio.sleep(reply_gap)
            seconds, _ = await turn(client, sid)
            cont.append(seconds * 1000)
            await asyncio.sleep(pause)
    return {"conversations": count, "reply_gap_s": reply_gap,
            "new_p50_ms": pct(new, 0.5), "new_max_ms": round(max(new), 1),
            "continued_p50_ms": pct(cont, 0.5),
            "accepted_p50_ms": {"new": pct([ms for n, ms in ACCEPTED if n], 0.5),
                                "continued": pct([ms for n, ms in ACCEPTED if not n], 0.5)},
            "new_minus_continued_p50_ms": round(statistics.median(new) - statistics.median(cont), 1)}


async def _pg(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="10,50,100")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--devices", type=int, default=5)
    parser.add_argument("--relay-writers", type=int, default=5)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--spares", type=int, default=2)
    parser.add_argument("--max-live", type=int, default=0,
                        help="IRIIS_SESSION_MAX_LIVE: the cap on conversation processes (0: from memory)")
    parser.add_argument("--max-seconds", type=float, default=1500.0)
    parser.add_argument("--probe", type=int, default=8, help="new conversations one at a time")
    parser.add_argument("--pause", type=float, default=8.0, help="seconds between them (the pool refills)")
    parser.add_argument("--reply-gap", type=float, default=3.0,
                        help="seconds between a new conversation's first turn and its continued one")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x]

    provider = so.ScriptedOpenAI().start()
    provider.default_reply = so.text(REPLY)
    db = f"iriis_load_{uuid.uuid4().hex[:8]}"
    await _pg(f'CREATE DATABASE "{db}"')
    relay_proc = None
    results: list[dict[str, Any]] = []
    sequential: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="load-") as home:
        (Path(home) / "mcp.yaml").write_text("servers:\n  builtin: {}\n")
        server = ServerProcess(Path(home), {
            "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "bench", "IRIIS_CHAT_MODEL": "scripted-model",
            "IRIIS_OWNER_KEYS": KEY, "DATABASE_URL": PG_ADMIN.rsplit("/", 1)[0] + f"/{db}",
            "IRIIS_MCP_CONFIG": str(Path(home) / "mcp.yaml"),
            "IRIIS_SESSION_IDLE_SECONDS": str(args.idle_seconds), "IRIIS_SESSION_SPARES": str(args.spares),
            "IRIIS_SESSION_MAX_LIVE": str(args.max_live),
        }).start()
        try:
            subprocess.run([str(IRIIS), "pin", "set", "--stdin"], input=f"{PIN}\n", env=server.env, check=True,
                           capture_output=True, text=True, timeout=60)
            relay = None
            if args.relay_writers:
                from tests.relay_proc import relay_serve
                from tests.server_proc import free_port

                relay_proc, port = relay_serve(Path(home) / "relay-home", Path(home) / "relay-data",
                                               {"IRIIS_RELAY_TLS_ADDR": f"127.0.0.1:{free_port()}"})
                relay_proc.wait_lines(1, 120)
                async with httpx.AsyncClient(timeout=30) as client:
                    for _ in range(120):
                        try:
                            made = (await client.post(f"http://127.0.0.1:{port}/sessions")).json()
                            relay = (made["url"], made["key"])
                            break
                        except (httpx.HTTPError, KeyError, ValueError):
                            await asyncio.sleep(1)
            deadline = time.monotonic() + args.max_seconds
            if args.probe:
                sequential = await probe(server, args.probe, args.pause, args.reply_gap)
            for n in levels:
                if time.monotonic() > deadline:
                    results.append({"conversations": n, "skipped": "past --max-seconds"})
                    continue
                results.append(await asyncio.wait_for(
                    level(server, n, args.turns, args.devices, relay, args.relay_writers, args.idle_seconds + 90),
                    max(30.0, deadline - time.monotonic())))
        finally:
            if relay_proc:
                relay_proc.stop()
            server.stop()
            provider.stop()
            await _pg(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    print(json.dumps({"benchmark": "load", "store": "postgresql", "spares": args.spares, "max_live": args.max_live,
                      "cap_budget_mb": args.max_live * CONVERSATION_BUDGET_MB if args.max_live else None,
                      "idle_seconds": args.idle_seconds, "sequential": sequential, "levels": results,
                      "goals": {"new_minus_continued_p50_ms": 50, "mb_per_live_conversation": 60, "errors": 0}}))


if __name__ == "__main__":
    asyncio.run(main())
