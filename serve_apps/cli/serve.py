"""`iriis serve`: start Ray, run migrations, deploy the Serve apps, and on Ctrl-C close the
devices and flush every live conversation before Serve stops."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, TYPE_CHECKING

from actors.logmask import install_log_masking
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url
from actors.tools.config import McpConfigError, load_mcp_config
from serve_apps.cli.common import settings_or_exit
from serve_apps.http.auth import create_key, hash_key, load_key_records, new_owner_key

if TYPE_CHECKING:
    from ray.actor import ActorHandle

log = logging.getLogger("iriis")

APP_NAME = "iriis"


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
# path (proxy, gateway, session actor, AgentLoop) that cost 5-10 ms. One loop per process is what
# Serve's own throughput mode sets; our deployments keep blocking work off the loop (to_thread).
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


def hush_ray(verbose: bool) -> None:
    """Ray and Serve set their own loggers' levels when imported and started: quiet them again."""
    if verbose:
        return
    # Loggers made during ray.init (the token-auth notice) are named here before they exist.
    for name in ["ray._private.authentication.authentication_token_setup", "ray.serve", *logging.root.manager.loggerDict]:
        if name == "ray" or name.startswith(("ray.", "ray._")):
            logging.getLogger(name).setLevel(logging.ERROR)


def ready_block(url: str, new_key: str | None, chat_model: str, seconds: float) -> list[str]:
    """The lines that end start-up: easy to find, with the URL, the sign-in link and the key."""
    rule = "iriis: " + "-" * 60
    lines = [rule, f"iriis: ready: {url}", f"iriis: chat model: {chat_model}"]
    if new_key:
        lines += ["iriis: open this link to sign the page in:", f"    {url}#key={new_key}",
                  "iriis: owner key (shown once, stored hashed; keep it safe):", f"    {new_key}"]
    else:
        lines += ["iriis: sign in with an owner key (`iriis key list` shows them; `iriis key new` adds one)"]
    lines += [rule, f"iriis: serving on {url} ({seconds:.1f}s); Ctrl-C stops"]
    return lines


def _flush_sessions() -> int:
    """Ask every live SessionActor to write its buffer; run before Serve goes down."""
    import ray

    from actors.session.actor import live_sessions

    flushed = 0
    for ref in [actor.flush.remote() for actor in live_sessions().values()]:
        try:
            flushed += ray.get(ref, timeout=30)
        except Exception:  # noqa: BLE001 - shutdown boundary: report and keep flushing the others
            log.exception("a session failed to flush at shutdown")
    return flushed


def start_scheduler(settings: Any, database_url: str) -> Any:
    """The singleton scheduler, given the gateway's session settings and the AgentLoop's handle."""
    import ray
    from ray import serve

    from actors.scheduler.actor import SchedulerConfig, scheduler
    from serve_apps.deployments.app import session_config

    agent = serve.get_deployment_handle("AgentLoop", app_name=APP_NAME)
    handle = scheduler(SchedulerConfig(database_url=database_url, session=session_config(settings, database_url)),
                       agent)
    ray.get(handle.start.remote(), timeout=60)
    print("iriis: scheduler running (background tasks and reminders)", flush=True)
    return handle


def start_session_pool(settings: Any, database_url: str) -> None:
    """Warm spare SessionActors, so a new conversation does not wait for a process start."""
    from ray import serve

    from actors.session.pool import start_pool
    from serve_apps.deployments.app import session_config

    start_pool(session_config(settings, database_url), serve.get_deployment_handle("AgentLoop", app_name=APP_NAME))


SCHEDULER_WATCH_SECONDS = 10.0


def watch_scheduler(handle: ActorHandle, stop: threading.Event) -> None:
    """Every few seconds, ask the scheduler to start whatever loop is not running: a restarted
    scheduler starts its own, and this covers a restart whose own start was lost, or a loop
    that ended on an error (it is reported, then started again)."""
    import ray

    def run() -> None:
        while not stop.wait(SCHEDULER_WATCH_SECONDS):
            try:
                ray.get(handle.start.remote(), timeout=30)
            except Exception as exc:  # noqa: BLE001 - restarting or gone: look again later
                log.debug("scheduler watch: %s", exc)

    threading.Thread(target=run, name="iriis-scheduler-watch", daemon=True).start()


def stop_scheduler(handle: ActorHandle) -> None:
    """Stop the scheduler's loops, handing back the tasks it runs, and end it: the next
    `iriis serve` starts one with its own configuration."""
    import ray

    try:
        ray.get(handle.stop.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - shutdown boundary: keep stopping the rest
        log.exception("the scheduler did not stop cleanly")
    ray.kill(handle, no_restart=True)


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
    providers = settings.chat_providers(dict(os.environ))
    learning = settings.learning_providers(dict(os.environ))
    vision = settings.vision_providers(dict(os.environ))

    for name, value in RAY_START_ENV.items():
        os.environ.setdefault(name, value)
    import ray
    from ray import serve

    from actors.common.names import NAMESPACE
    from actors.recent_errors import error_log
    from actors.providers.router_actor import router_actor
    from actors.tools.builtin import builtin_toolbox
    from actors.tools.hub import tool_hub
    from serve_apps.deployments.app import build_app

    hush_ray(args.verbose)
    started = time.monotonic()
    print("iriis: starting Ray" + (f" (joining {settings.ray_address})" if settings.ray_address else ""),
          flush=True)
    ray.init(address=settings.ray_address, namespace=NAMESPACE, include_dashboard=False,
             log_to_driver=args.verbose, configure_logging=False,
             logging_level=logging.INFO if args.verbose else logging.ERROR)
    print("iriis: starting Serve and the actors", flush=True)
    serve.start(http_options={"host": host, "port": port}, logging_config={"log_level": "WARNING"},
                proxy_location=settings.iriis_proxy_location)
    hush_ray(args.verbose)
    error_log()
    environ = {**os.environ, "IRIIS_PYTHON": sys.executable, "IRIIS_DATABASE_URL": database_url,
               "IRIIS_API_URL": f"http://127.0.0.1:{port}", "IRIIS_API_KEY": internal_key,
               "IRIIS_HOME": str(settings.iriis_home)}
    # Built-in names stay as they are; a catalogue tool with the same name gets a prefix.
    reserved = sorted(set(builtin_toolbox().specs) - mcp.builtin_exclude())
    # The hub exists even with no MCP server: paired devices offer their tools through it.
    hub = tool_hub(mcp, environ, reserved)
    if any(name != "builtin" for name in mcp.servers):
        print("iriis: starting the tool servers from " + str(settings.iriis_mcp_config), flush=True)
        for server in ray.get(hub.ready.remote(), timeout=180):
            detail = f" ({server['reason']})" if server["reason"] else ""
            print(f"iriis: tools {server['name']}: {server['state']}, {server['tools']} tools{detail}", flush=True)
    if providers:
        router = router_actor("chat", providers)
        found = ray.get(router.discover.remote(), timeout=60)
        for name, models in found.items():
            print(f"iriis: provider {name}: {len(models)} models listed", flush=True)
    if vision:
        found = ray.get(router_actor("vision", vision).discover.remote(), timeout=60)
        for name, models in found.items():
            print(f"iriis: vision provider {name}: {len(models)} models listed", flush=True)
    # Perception replicas take a GPU each where the cluster has one; CPU threads otherwise.
    gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    print("iriis: deploying the gateway, perception and the agent loop", flush=True)
    serve.run(build_app(settings, database_url, hashes, providers, mcp, port, learning, vision, gpus), name=APP_NAME, route_prefix="/",
              blocking=False)
    # After Serve is up: the scheduler runs its tasks' turns through the same AgentLoop.
    tasks_scheduler = start_scheduler(settings, database_url)
    start_session_pool(settings, database_url)

    url = f"http://{host}:{port}/"
    chat_model = (", ".join(f"{p.name}/{m}" for p in providers for m in p.models)
                  if providers else "offline default (no model key set; see README)")
    print("iriis: vision model: " + (", ".join(f"{p.name}/{m}" for p in vision for m in p.models)
                                     if vision else "none (camera answers come from perception alone)"), flush=True)
    # Last, so whoever waits for the "serving on" line (a person, a test) has everything above it.
    for line in ready_block(url, new_key, chat_model, time.monotonic() - started):
        print(line, flush=True)

    stop = threading.Event()
    # The local model comes in behind the stand-in; its progress lines show here.
    from actors.providers.local.terminal import watch as watch_local_model
    watch_local_model(stop)
    watch_scheduler(tasks_scheduler, stop)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()

    from serve_apps.cli.people import close_devices_for_shutdown

    print(f"iriis: closed {close_devices_for_shutdown()} device connections", flush=True)
    print("iriis: shutting down; writing buffered conversations", flush=True)
    stop_scheduler(tasks_scheduler)
    flushed = _flush_sessions()
    print(f"iriis: flushed {flushed} buffered writes", flush=True)
    from actors.session.pool import close_pool

    close_pool()  # the warm spare session actors and their registry (a cluster outlives us)
    try:
        ray.get(hub.close.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - shutdown boundary: keep stopping the rest
        log.exception("the tool servers did not stop cleanly")
    serve.shutdown()
    if not settings.ray_address:
        ray.shutdown()
    print("iriis: stopped", flush=True)
    return 0


def add_serve_parser(sub: Any) -> None:
    serve_p = sub.add_parser("serve", help="start Ray and serve the API and the chat page")
    serve_p.add_argument("--host", help="listen address (default IRIIS_HOST or 127.0.0.1)")
    serve_p.add_argument("--port", type=int, help="listen port (default IRIIS_PORT or 8000)")
    serve_p.add_argument("--verbose", action="store_true", help="show actor logs in this terminal")
    serve_p.set_defaults(func=serve_command)
