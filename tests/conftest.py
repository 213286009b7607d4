"""Shared fixtures: the scripted model server, both database backends, one Ray per session."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from actors.store.migrate import migrate
from actors.store.store import Store
from tests.grouping import (  # noqa: F401 (the two hooks are found by name)
    close_with_group,
    forget_groups_file,
    make_scheduler,
    name_groups_file,
    pytest_collection_modifyitems,
    pytest_runtest_teardown,
)
from tests.accounts import OwnerAccounts, shipped_entries
from tests.scripted_openai import ScriptedOpenAI
from tests.server_proc import FAST, STARTS_LOG, count_start


def pytest_configure(config: pytest.Config) -> None:
    """One file for the whole run (parallel workers inherit the variable) that counts server starts."""
    if not os.environ.get(STARTS_LOG):
        fd, path = tempfile.mkstemp(prefix="iriis-starts-", suffix=".log")
        os.close(fd)
        os.environ[STARTS_LOG] = path
        config._iriis_starts_log = path  # type: ignore[attr-defined]
    name_groups_file(config)
    if os.environ.get(FAST):
        import ray

        def refuse(*_args: object, **_kwargs: object) -> None:
            count_start("Ray in the test process")

        ray.init = refuse  # type: ignore[assignment]


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """The suite's cost beside its verdict: how many real server processes and Ray instances it started."""
    forget_groups_file(config)
    path = getattr(config, "_iriis_starts_log", None)
    if not path or not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        kinds = Counter(line.strip() for line in f if line.strip())
    os.unlink(path)
    detail = ", ".join(f"{kind}: {n}" for kind, n in kinds.most_common())
    terminalreporter.write_line(f"server starts: {sum(kinds.values())} ({detail or 'none'})")


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """`make test` on two workers: each shared server's tests, and each module, on one worker."""
    if config.getvalue("dist") == "loadgroup":
        return make_scheduler(config, log)
    return None


PG_ADMIN = os.environ.get("IRIIS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def scripted() -> Iterator[ScriptedOpenAI]:
    server = ScriptedOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def model(scripted: ScriptedOpenAI) -> Iterator[ScriptedOpenAI]:
    """The scripted server, emptied before each test."""
    scripted.reset()
    yield scripted
    scripted.reset()


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
async def pg_url() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for this test session (dropped afterwards)."""
    name = f"iriis_test_{uuid.uuid4().hex[:10]}"
    await _pg_admin(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    await _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated, empty store on each backend."""
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'test.sqlite3'}"
    else:
        name = f"iriis_t_{uuid.uuid4().hex[:10]}"
        await _pg_admin(f'CREATE DATABASE "{name}"')
        url = "postgresql+asyncpg://" + PG_ADMIN.split("://", 1)[1].rsplit("/", 1)[0] + f"/{name}"
    s = Store.open(url)
    await migrate(s)
    yield s
    await s.close()
    if request.param == "postgresql":
        await _pg_admin(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """Ray started once for the whole test session, as the house rules ask."""
    import ray

    count_start("ray.init (test process)")
    ray.init(num_cpus=2, include_dashboard=False, namespace="iriis", log_to_driver=False)
    close_with_group("ray_session", ray.shutdown)
    yield
    ray.shutdown()


OWNER_KEY = "test-owner-key"
SECOND_KEY = "second-owner-key"
OWNER_PIN = "2468"
UPLOAD_LIMIT = 1_000_000
# How long the shared servers keep an idle conversation's actor (the product's default is 600 s).
IDLE_S = "20"
# The test server's tools: the built-ins with test tiers, two real MCP servers over stdio, and
# one that stays off because its variable is missing.
TEST_MCP_YAML = """
servers:
  builtin:
    tools: {save_note: confirm, run_shell: pin, notify_owner: auto}
  studio:
    command: ${IRIIS_PYTHON}
    args: [-m, actors.tools.servers.studio]
    env: {IRIIS_DATABASE_URL: "${IRIIS_DATABASE_URL}"}
    trusted: true
    tier: auto
    keywords: [chart, plot, graph, pdf, spreadsheet, slides]
  files:
    command: ${IRIIS_PYTHON}
    args: [-m, actors.tools.servers.files]
    env: {IRIIS_DATABASE_URL: "${IRIIS_DATABASE_URL}"}
    tier: read
    keywords: [file, inspect, image, document]
  search:
    transport: http
    url: https://search.invalid
    headers: {Authorization: "Bearer ${IRIIS_TEST_MISSING_KEY}"}
    requires_env: [IRIIS_TEST_MISSING_KEY]
"""


@pytest.fixture(scope="session")
def accounts() -> Iterator[OwnerAccounts]:
    """The owner's mail (Dovecot + an SMTP server) and calendar (Radicale) for the shared server."""
    found = OwnerAccounts()
    try:
        yield found.start()
    finally:
        found.close()


@pytest.fixture(scope="session")
async def server(scripted: ScriptedOpenAI, pg_url: str, accounts: OwnerAccounts,
                 tmp_path_factory: pytest.TempPathFactory):
    """The real `iriis serve` on PostgreSQL, talking to the scripted model over HTTP, with the
    owner's mail and calendar accounts connected."""
    from tests.server_proc import ServerProcess, set_pin

    home = tmp_path_factory.mktemp("home-pg")
    mcp = home / "mcp.yaml"
    mcp.write_text(TEST_MCP_YAML + shipped_entries() + "\n")
    proc = ServerProcess(home, {
        **accounts.env(),
        "IRIIS_MCP_CONFIG": str(mcp),
        "DATABASE_URL": pg_url,
        "OPENAI_BASE_URL": scripted.base_url,
        "OPENAI_API_KEY": "sk-scripted-provider-key\n",
        "IRIIS_CHAT_MODEL": "scripted-model",
        "IRIIS_LEARNING_MODEL": "scripted-learner",
        "IRIIS_VISION_MODEL": "scripted-vision",
        "IRIIS_CAMERA_OCR_EVERY": "1",
        "IRIIS_PROVIDERS": json.dumps([{"name": "stt", "base_url": scripted.base_url, "models": ["scripted-stt"],
                                        "kinds": ["speech"]}]),
        "IRIIS_OWNER_KEYS": f"{OWNER_KEY}, {SECOND_KEY}\n",
        "IRIIS_PROVIDER_TIMEOUT": "5",
        "IRIIS_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
        # Its tests open a new conversation every second or so, and an idle conversation's
        # actor costs ~0.75% of a core (Ray's own upkeep): at the default ten minutes 60-70 pile
        # up, at one minute about 50. An exited one is rebuilt from the store on next use.
        "IRIIS_SESSION_IDLE_SECONDS": IDLE_S,
    }).start()
    set_pin(proc, OWNER_PIN)
    close_with_group("server", proc.kill)
    yield proc
    proc.kill()


@pytest.fixture
def client(server, model):
    """An HTTP client on the real server that sends the owner key (a module may override it)."""
    import httpx

    with httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {OWNER_KEY}"}) as c:
        yield c


# The device servers' timers, short so their limits are reached in seconds; the silence limit
# leaves room for a server slowed by the other worker (6 s closed devices that answered every ping).
HELLO_S, CALL_S, EVENT_S, SILENCE_S, PING_S = 3.0, 3.0, 4.0, 12.0, 2.0
# No MCP server at all: a paired device's tools must reach the agent without one.
DEVICE_MCP_YAML = """
servers:
  builtin:
    tools: {save_note: confirm}
"""


@pytest.fixture(scope="session")
def device_server(scripted, tmp_path_factory) -> Iterator:
    """One server, with short device timers and no hosted speech, for the device modules
    (test_devices_agent, _desktop, _protocol) and the voice pipeline's (test_voice_e2e); the
    restart test, marked `last_in_group`, stops it after all of them."""
    from tests.server_proc import ServerProcess, scripted_env, set_pin

    home = tmp_path_factory.mktemp("home-devices")
    proc = ServerProcess(home, scripted_env(
        home, scripted.base_url, OWNER_KEY, DEVICE_MCP_YAML,
        IRIIS_DEVICE_HELLO_SECONDS=str(HELLO_S), IRIIS_DEVICE_CALL_SECONDS=str(CALL_S),
        IRIIS_DEVICE_EVENT_SECONDS=str(EVENT_S), IRIIS_DEVICE_SILENCE_SECONDS=str(SILENCE_S),
        IRIIS_DEVICE_PING_SECONDS=str(PING_S), IRIIS_SESSION_IDLE_SECONDS=IDLE_S,
        IRIIS_PROVIDERS="", IRIIS_PROVIDER_TIMEOUT="10")).start()
    set_pin(proc, OWNER_PIN)
    close_with_group("device_server", proc.kill)
    yield proc
    proc.kill()
