"""`iriis serve`: check the tool configuration and the port, migrate the store and make the first
key, then hand over to `serve_apps/cli/running.py`, which starts Ray, deploys the Serve apps, and
on Ctrl-C closes the devices and flushes every live conversation before Serve stops."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import time
from typing import Any

from actors.logmask import install_log_masking
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url
from actors.tools.config import McpConfigError, load_mcp_config
from serve_apps.cli.common import settings_or_exit
from serve_apps.http.auth import create_key, hash_key, load_key_records, new_owner_key

log = logging.getLogger("iriis")

async def prepare_store(database_url: str, env_keys: list[str], generate: bool = True) -> tuple[list[str], str | None]:
    """Migrate, then return the fixed key hashes (IRIIS_OWNER_KEYS) and a newly generated key
    (first run only). Stored keys are not among them: the gateway reloads those itself, so a
    new or revoked one needs no restart."""
    store = Store.open(database_url)
    try:
        await migrate(store)
        new_key = None
        if not env_keys and not await load_key_records(store) and generate:
            new_key, _record = await create_key(store, "first key (printed by iriis serve)", time.time())
        return sorted({hash_key(k) for k in env_keys}), new_key
    finally:
        await store.close()


def quiet_logs(verbose: bool) -> None:
    """Our own lines at INFO; Ray, Serve, Alembic and the rest only when something is wrong."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("iriis").setLevel(logging.INFO)
    if not verbose:
        for name in ("ray", "ray.serve", "alembic", "filelock", "asyncio"):
            logging.getLogger(name).setLevel(logging.ERROR)


# Serve runs a replica's own code, and a handle's router, on a second event loop in a thread of
# their own by default. Every request then crosses threads (and the GIL) twice more: on a turn's
# path (proxy, gateway, session actor, AgentLoop) that costs milliseconds (benchmarks/MEASURED.md).
# One loop per process is what Serve's own throughput mode sets; our deployments keep blocking
# work off the loop (to_thread).
# Set before Ray starts, so the raylet passes them to every worker; serve.yaml and cluster.yaml
# set the same on a cluster.
SERVE_ONE_LOOP = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0"}
# Serve's controller kills an HTTP proxy that is not ready within 5 s of its start, and
# `serve.start` then fails on the dead proxy: a start on a busy machine (two CPU hogs beside it
# took longer) ended in a traceback. Up to 60 s, as long as `serve.start` itself waits. Read by
# the controller, so it too is set before Ray starts (cluster.yaml's nodes set it the same way).
SERVE_PATIENCE = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60"}
# Everything `iriis serve` sets in the environment before it starts Ray.
RAY_START_ENV = {**SERVE_ONE_LOOP, **SERVE_PATIENCE}


def port_is_free(host: str, port: int) -> bool:
    """Serve's proxy binds with SO_REUSEPORT, so a second server would silently share the port
    with the first; a plain bind tells us first."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.bind((host, port))
        return True
    except OSError:
        return False


def serve_command(args: argparse.Namespace) -> int:
    settings = settings_or_exit()
    host = args.host or settings.iriis_host
    port = args.port or settings.iriis_port
    quiet_logs(args.verbose)
    install_log_masking()

    try:
        mcp = load_mcp_config(settings.iriis_mcp_config)
    except McpConfigError as exc:
        print(f"iriis: {exc}", file=sys.stderr)
        return 2
    if not port_is_free(host, port):
        print(f"iriis: {host}:{port} is already in use (another iriis serve?). Stop it, or set "
              "IRIIS_PORT to another port.", file=sys.stderr)
        return 2
    settings.iriis_home.mkdir(parents=True, exist_ok=True)
    database_url = resolve_url(settings.database_url, settings.iriis_home)
    print("iriis: preparing the database (" + ("PostgreSQL" if database_url.startswith("postgresql")
                                               else f"SQLite in {settings.iriis_home}") + ")", flush=True)
    hashes, new_key = asyncio.run(prepare_store(database_url, settings.iriis_owner_keys))
    # A key for this run only, so the `self` tool server can read the owner API.
    internal_key = new_owner_key()
    hashes = sorted(set(hashes) | {hash_key(internal_key)})

    # Ray is imported only now: the other commands (`iriis key`, `pin`, ...) never need it, and
    # the environment it starts with is set first.
    for name, value in RAY_START_ENV.items():
        os.environ.setdefault(name, value)
    from serve_apps.cli.running import Start, run  # lazy: Ray and Serve; RAY_START_ENV must be set first

    run(Start(settings=settings, verbose=args.verbose, host=host, port=port,
              database_url=database_url, key_hashes=hashes, new_key=new_key, internal_key=internal_key,
              mcp=mcp))
    print("iriis: stopped", flush=True)
    return 0


def add_serve_parser(sub: Any) -> None:
    serve_p = sub.add_parser("serve", help="start Ray and serve the API and the chat page")
    serve_p.add_argument("--host", help="listen address (default IRIIS_HOST or 127.0.0.1)")
    serve_p.add_argument("--port", type=int, help="listen port (default IRIIS_PORT or 8000)")
    serve_p.add_argument("--verbose", action="store_true", help="show actor logs in this terminal")
    serve_p.set_defaults(func=serve_command)
