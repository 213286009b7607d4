"""The Serve application for `serve deploy serve_apps/serve.yaml` (a cluster run by the Ray cluster
launcher, see cluster.yaml), built from the same environment `iriis serve` reads.

`build(args)` is the config file's `import_path`: it migrates the store, makes sure the shared
actors exist (error log, tool hub, provider routers, the session pool) and returns the same
Gateway -> AgentLoop / Perception graph as `iriis serve`. The config file's per-deployment
settings (autoscaling, `max_ongoing_requests`, `max_queued_requests`, `num_gpus`) override the
decorators'. Owner keys: IRIIS_OWNER_KEYS, plus the stored ones the gateway reloads itself.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from actors.providers.router_actor import router_actor
from actors.recent_errors import error_log
from actors.settings import Settings
from actors.store.migrate import migrate
from actors.store.store import Store, resolve_url
from actors.tools.builtin import builtin_toolbox
from actors.tools.config import load_mcp_config
from actors.tools.hub import tool_hub
from serve_apps.deployments.app import AppArgs, build_app
from serve_apps.http.auth import hash_key


async def _migrate(url: str) -> None:
    store = Store.open(url)
    try:
        await migrate(store)
    finally:
        await store.close()


def build(args: dict[str, Any]) -> Any:
    """`args` (from the config file) may set `gpus` (a fraction per Perception replica)."""
    settings = Settings()
    database_url = resolve_url(settings.database_url, settings.iriis_home)
    asyncio.run(_migrate(database_url))
    mcp = load_mcp_config(settings.iriis_mcp_config)
    environ = dict(os.environ)
    providers = settings.chat_providers(environ)
    learning = settings.learning_providers(environ)
    vision = settings.vision_providers(environ)
    error_log()
    tool_hub(mcp, {**environ, "IRIIS_PYTHON": sys.executable, "IRIIS_DATABASE_URL": database_url,
                   "IRIIS_HOME": str(settings.iriis_home)},
             sorted(set(builtin_toolbox().specs) - mcp.builtin_exclude()))
    if providers:
        router_actor("chat", providers)
    if vision:
        router_actor("vision", vision)
    hashes = sorted({hash_key(k) for k in settings.iriis_owner_keys})
    app = build_app(AppArgs(settings=settings, database_url=database_url, key_hashes=hashes, providers=providers,
                            mcp=mcp, learning=learning or [], vision=vision, gpus=float(args.get("gpus", 0.0))))
    # The session pool and its spares start with the first conversation (no CLI here).
    return app
