"""`iriis relay serve` and `iriis relay connect TOKEN`.

serve: one process runs the host's plain listener on localhost (the only place sessions are
created), the TLS listener peers dial, and the sweeper; it creates a session and prints its
pairing token as the only line on stdout. connect: if a relay on this machine answers for the
token's session, print its URL and key and exit; otherwise carry a local port over pinned TLS to
the host, print the same two lines, and stay running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

from actors.common.ids import ascii_int
from actors.relay.pairing import Blob, TokenError, decode
from actors.relay.settings import RelaySettings
from actors.relay.tunnel import Forwarder, TunnelError, candidate_addresses, dial, ensure_certificate
from actors.settings import SettingsError, load_settings
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url

log = logging.getLogger("iriis.relay")
# Asking a relay on this machine: a dead port refuses at once, but a live relay may need a while
# to wake a session's actor on a busy machine, and a slow answer must not be taken for none.
LOCAL_TIMEOUT = httpx.Timeout(30, connect=3)


def _split_addr(addr: str, flag: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    number = ascii_int(port, 65535)
    if not sep or number is None:
        raise SystemExit(f"iriis relay: {flag} must be host:port, got {addr!r}")
    return host.strip("[]") or "127.0.0.1", number


def _logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.setblocking(False)
    return sock


def _existing_relay(host: str, port: int) -> str | None:
    """A relay already on -addr: ask it for a new session instead of failing (one host, many
    sessions). Returns its token, or None when whatever holds the port is not a relay."""
    try:
        reply = httpx.post(f"http://{host}:{port}/sessions", timeout=LOCAL_TIMEOUT)
        if reply.status_code == 201 and reply.json().get("token"):
            return str(reply.json()["token"])
    except (httpx.HTTPError, ValueError):
        return None
    return None


def serve_command(args: argparse.Namespace) -> int:
    _logging(args.v)
    try:
        settings = load_settings()
        relay = RelaySettings()
    except (SettingsError, ValueError) as exc:
        print(f"iriis relay: configuration error: {exc}", file=sys.stderr)
        return 2
    host, port = _split_addr(args.addr, "-addr")
    tls_host, tls_port = _split_addr(relay.tls_addr, "IRIIS_RELAY_TLS_ADDR")
    try:
        local_sock = _bind(host, port)
    except OSError:
        token = _existing_relay(host, port)
        if token is None:
            print(f"iriis relay: {host}:{port} is in use by something that is not a relay", file=sys.stderr)
            return 2
        print(token, flush=True)
        return 0
    try:
        tls_sock = _bind(tls_host, tls_port)
    except OSError as exc:
        print(f"iriis relay: cannot listen for peers on {relay.tls_addr}: {exc.strerror}; "
              "set IRIIS_RELAY_TLS_ADDR", file=sys.stderr)
        return 2
    data = Path(args.data).expanduser() if args.data else settings.iriis_home / "relay"
    data.mkdir(parents=True, exist_ok=True)
    database_url = settings.database_url or f"sqlite:///{data / 'relay.sqlite3'}"
    return asyncio.run(_serve(args, settings, relay, data, database_url, local_sock, tls_sock))


async def _serve(args: argparse.Namespace, settings: object, relay: RelaySettings, data: Path,
                 database_url: str, local_sock: socket.socket, tls_sock: socket.socket) -> int:
    import ray  # lazy: imports Ray; keeps `iriis --help` fast

    from actors.common.names import NAMESPACE  # lazy: imports Ray; keeps `iriis --help` fast
    from actors.relay.actor import RelayConfig  # lazy: imports Ray; keeps `iriis --help` fast
    from actors.relay.service import RelayService  # lazy: imports Ray; keeps `iriis --help` fast
    from serve_apps.http.relay_app import build_relay_app  # lazy: imports Ray; keeps `iriis --help` fast

    url = resolve_url(database_url, data)
    store = Store.open(url)
    await migrate(store)
    cert, key, fp = ensure_certificate(data)
    tls_port = tls_sock.getsockname()[1]
    local_host, local_port = local_sock.getsockname()[:2]
    blob = Blob(addrs=candidate_addresses(tls_sock.getsockname()[0], tls_port, relay.advertise), fp=fp,
                local=local_port)
    ray_address = os.environ.get("RAY_ADDRESS") or None
    ray.init(address=ray_address, namespace=NAMESPACE, include_dashboard=False,
             log_to_driver=args.v, configure_logging=False)
    service = RelayService(store, RelayConfig(database_url=url, data_dir=str(data),
                                              idle_seconds=relay.actor_idle_seconds,
                                              prefer_resource=relay.prefer_resource),
                           relay.limits(), blob=blob, sweep_seconds=relay.sweep_seconds)
    level = "info" if args.v else "warning"
    servers = [
        _Server(uvicorn.Config(build_relay_app(service, admin=relay.test_clock), lifespan="off",
                               log_level=level, timeout_keep_alive=65)),
        _Server(uvicorn.Config(build_relay_app(service, peer=True), lifespan="off", log_level=level,
                               ssl_certfile=str(cert), ssl_keyfile=str(key), timeout_keep_alive=65)),
    ]
    tasks = [asyncio.create_task(servers[0].serve(sockets=[local_sock])),
             asyncio.create_task(servers[1].serve(sockets=[tls_sock]))]
    while not all(s.started for s in servers):
        if any(t.done() for t in tasks):
            print("iriis relay: a listener failed to start", file=sys.stderr)
            return 1
        await asyncio.sleep(0.05)
    service.start_sweeper()
    created = await service.create("127.0.0.1", f"http://{local_host}:{local_port}")
    print(created.token, flush=True)
    log.info("relay on http://%s:%s, peers via TLS at %s (fingerprint %s)", local_host, local_port,
             ", ".join(blob.addrs), fp)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    service.release_polls()  # a parked long poll would otherwise hold the stop for up to 55 s
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks, return_exceptions=True)
    await service.stop()
    await store.close()
    if not ray_address:
        ray.shutdown()
    return 0


class _Server(uvicorn.Server):
    """Two servers share one loop; signals are ours to handle, not each server's."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


# -- connect ----------------------------------------------------------------------------------

def _print_session(url: str, key: str) -> None:
    print(f"session  {url}", flush=True)
    print(f"key      {key}", flush=True)


async def _answers(base: str, uid: str, key: str) -> int | None:
    try:
        async with httpx.AsyncClient(timeout=LOCAL_TIMEOUT) as client:
            reply = await client.get(f"{base}/s/{uid}", params={"since": 0, "limit": 1},
                                     headers={"Authorization": f"Bearer {key}"})
        return reply.status_code
    except httpx.HTTPError:
        return None


def connect_command(args: argparse.Namespace) -> int:
    _logging(args.v)
    try:
        token = decode(args.token)
    except TokenError as exc:
        print(f"iriis relay: {exc}", file=sys.stderr)
        return 2
    host, port = _split_addr(args.addr, "-addr")
    return asyncio.run(_connect(token.blob, token.uid, token.key, host, port))


async def _connect(blob: Blob, uid: str, key: str, host: str, port: int) -> int:
    local = os.environ.get("IRIIS_RELAY_URL", "").strip().rstrip("/") or (
        f"http://127.0.0.1:{blob.local}" if blob.local else "")
    if local and await _answers(local, uid, key) == 200:
        _print_session(f"{local}/s/{uid}", key)
        return 0
    try:
        _reader, writer, addr = await dial(blob.addrs, blob.fp)
        writer.close()
    except TunnelError as exc:
        print(f"iriis relay: {exc}", file=sys.stderr)
        return 1
    forwarder = Forwarder([addr] + [a for a in blob.addrs if a != addr], blob.fp)
    bound = await forwarder.start(host, port)
    base = f"http://{host}:{bound}"
    status = await _answers(base, uid, key)
    if status != 200:
        await forwarder.close()
        why = {401: "the key was refused", 404: "the host has no such session",
               410: "the session was purged"}.get(status or 0, f"the host answered {status}")
        print(f"iriis relay: {why}", file=sys.stderr)
        return 1
    _print_session(f"{base}/s/{uid}", key)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await forwarder.close()
    return 0


def add_relay_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    relay = sub.add_parser("relay", help="agent-to-agent relay sessions (the iris protocol)")
    relay_sub = relay.add_subparsers(dest="relay_command", required=True)
    serve = relay_sub.add_parser("serve", help="host relay sessions; prints a new session's pairing token")
    serve.add_argument("-addr", "--addr", default="127.0.0.1:7433", help="localhost listener (default 127.0.0.1:7433)")
    serve.add_argument("-data", "--data", default=None, help="data folder (default $IRIIS_HOME/relay)")
    serve.add_argument("-v", "--verbose", dest="v", action="store_true", help="log listener and tunnel details")
    serve.set_defaults(func=serve_command)
    connect = relay_sub.add_parser("connect", help="join a session from its pairing token")
    connect.add_argument("token")
    connect.add_argument("-addr", "--addr", default="127.0.0.1:0", help="local port (default: any free one)")
    connect.add_argument("-v", "--verbose", dest="v", action="store_true", help="log tunnel details")
    connect.set_defaults(func=connect_command)
