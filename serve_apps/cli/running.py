"""The running `iriis serve`: Ray and Serve started, the shared actors and the deployments up,
the wait for Ctrl-C, and the shutdown in order (devices closed, every conversation's buffer
written, the pool, the tool servers and Serve ended). `serve_apps/cli/serve.py` checks what it
can first and imports this module only then, with Ray's environment set."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import ray
from ray import serve
from ray.actor import ActorHandle

from actors.common.names import NAMESPACE
from actors.providers.local.terminal import watch as watch_local_model
from actors.providers.router_actor import router_actor
from actors.recent_errors import error_log
from actors.scheduler.actor import SchedulerConfig, scheduler
from actors.session.actor import live_sessions
from actors.session.pool import close_pool, start_pool
from actors.settings import Settings
from actors.tools.builtin import builtin_toolbox
from actors.tools.config import McpConfig
from actors.tools.hub import tool_hub
from serve_apps.cli.people import close_devices_for_shutdown
from serve_apps.deployments.app import AppArgs, build_app, session_config

log = logging.getLogger("iriis")

APP_NAME = "iriis"


@dataclass(frozen=True)
class Start:
    """What `iriis serve` checked and prepared before Ray starts."""

    settings: Settings
    verbose: bool
    host: str
    port: int
    database_url: str
    key_hashes: list[str]       # the fixed owner keys' hashes, this run's internal key included
    new_key: str | None         # a first key made now, printed once
    internal_key: str           # for the `self` tool server
    mcp: McpConfig


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
    flushed = 0
    for ref in [actor.flush.remote() for actor in live_sessions().values()]:
        try:
            flushed += ray.get(ref, timeout=30)
        except Exception:  # noqa: BLE001 - shutdown boundary: report and keep flushing the others
            log.exception("a session failed to flush at shutdown")
    return flushed


def start_scheduler(settings: Any, database_url: str) -> Any:
    """The singleton scheduler, given the gateway's session settings and the AgentLoop's handle."""
    agent = serve.get_deployment_handle("AgentLoop", app_name=APP_NAME)
    handle = scheduler(SchedulerConfig(database_url=database_url, session=session_config(settings, database_url)),
                       agent)
    ray.get(handle.start.remote(), timeout=60)
    print("iriis: scheduler running (background tasks and reminders)", flush=True)
    return handle


def start_session_pool(settings: Any, database_url: str) -> None:
    """Warm spare SessionActors, so a new conversation does not wait for a process start."""
    start_pool(session_config(settings, database_url), serve.get_deployment_handle("AgentLoop", app_name=APP_NAME))


SCHEDULER_WATCH_SECONDS = 10.0


def watch_scheduler(handle: ActorHandle, stop: threading.Event) -> None:
    """Every few seconds, ask the scheduler to start whatever loop is not running: a restarted
    scheduler starts its own, and this covers a restart whose own start was lost, or a loop
    that ended on an error (it is reported, then started again)."""
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
    try:
        ray.get(handle.stop.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - shutdown boundary: keep stopping the rest
        log.exception("the scheduler did not stop cleanly")
    ray.kill(handle, no_restart=True)


def start_ray(settings: Any, verbose: bool, host: str, port: int) -> None:
    """Ray (or the cluster at RAY_ADDRESS), Serve's HTTP proxy on `host:port`, the error log."""
    hush_ray(verbose)
    print("iriis: starting Ray" + (f" (joining {settings.ray_address})" if settings.ray_address else ""),
          flush=True)
    ray.init(address=settings.ray_address, namespace=NAMESPACE, include_dashboard=False,
             log_to_driver=verbose, configure_logging=False, logging_level=logging.INFO if verbose else logging.ERROR)
    print("iriis: starting Serve and the actors", flush=True)
    serve.start(http_options={"host": host, "port": port}, logging_config={"log_level": "WARNING"},
                proxy_location=settings.iriis_proxy_location)
    hush_ray(verbose)
    error_log()


def tools_and_models(hub: ActorHandle, settings: Any, mcp: Any, providers: list[Any], vision: list[Any]) -> None:
    """Wait for the tool servers and list each provider's models, saying how each went."""
    if any(name != "builtin" for name in mcp.servers):
        print("iriis: starting the tool servers from " + str(settings.iriis_mcp_config), flush=True)
        for server in ray.get(hub.ready.remote(), timeout=180):
            detail = f" ({server['reason']})" if server["reason"] else ""
            print(f"iriis: tools {server['name']}: {server['state']}, {server['tools']} tools{detail}", flush=True)
    for kind, label, configured in (("chat", "provider", providers), ("vision", "vision provider", vision)):
        if configured:
            found = ray.get(router_actor(kind, configured).discover.remote(), timeout=60)
            for name, models in found.items():
                print(f"iriis: {label} {name}: {len(models)} models listed", flush=True)


def shut_down(settings: Any, hub: ActorHandle, tasks_scheduler: ActorHandle) -> None:
    """Close the devices, stop the scheduler, write every buffered conversation, end the pool,
    the tool servers and Serve (and Ray, when it is ours)."""
    print(f"iriis: closed {close_devices_for_shutdown()} device connections", flush=True)
    print("iriis: shutting down; writing buffered conversations", flush=True)
    stop_scheduler(tasks_scheduler)
    flushed = _flush_sessions()
    print(f"iriis: flushed {flushed} buffered writes", flush=True)
    close_pool()  # the warm spare session actors and their registry (a cluster outlives us)
    try:
        ray.get(hub.close.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - shutdown boundary: keep stopping the rest
        log.exception("the tool servers did not stop cleanly")
    serve.shutdown()
    if not settings.ray_address:
        ray.shutdown()


def run(start: Start) -> None:
    """Everything from Ray's start to a clean stop: the tool servers, the providers' models, the
    deployments, the scheduler and the session pool; then wait for Ctrl-C (or SIGTERM) and shut
    down in order."""
    settings, host, port, mcp = start.settings, start.host, start.port, start.mcp
    database_url, internal_key, new_key = start.database_url, start.internal_key, start.new_key
    providers = settings.chat_providers(dict(os.environ))
    vision = settings.vision_providers(dict(os.environ))
    started = time.monotonic()
    start_ray(settings, start.verbose, host, port)
    environ = {**os.environ, "IRIIS_PYTHON": sys.executable, "IRIIS_DATABASE_URL": database_url,
               "IRIIS_API_URL": f"http://127.0.0.1:{port}", "IRIIS_API_KEY": internal_key,
               "IRIIS_HOME": str(settings.iriis_home)}
    # Built-in names stay as they are; a catalogue tool with the same name gets a prefix.
    reserved = sorted(set(builtin_toolbox().specs) - mcp.builtin_exclude())
    # The hub exists even with no MCP server: paired devices offer their tools through it.
    hub = tool_hub(mcp, environ, reserved)
    tools_and_models(hub, settings, mcp, providers, vision)
    # Perception replicas take a GPU each where the cluster has one; CPU threads otherwise.
    gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    print("iriis: deploying the gateway, perception and the agent loop", flush=True)
    app_args = AppArgs(settings=settings, database_url=database_url, key_hashes=start.key_hashes,
                       providers=providers, mcp=mcp, port=port, vision=vision, gpus=gpus,
                       learning=settings.learning_providers(dict(os.environ)) or [])
    serve.run(build_app(app_args), name=APP_NAME, route_prefix="/", blocking=False)
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
    watch_local_model(stop)
    watch_scheduler(tasks_scheduler, stop)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    shut_down(settings, hub, tasks_scheduler)
