"""Shared fixtures: the scripted model server, both database backends, one Ray per session."""

from __future__ import annotations

import json

import os
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from actors.store.migrate import migrate
from actors.store.store import Store
from tests.scripted_openai import ScriptedOpenAI
from tests.server_proc import FAST, STARTS_LOG, count_start

def pytest_configure(config: pytest.Config) -> None:
    """One file for the whole run (parallel workers inherit the variable) that counts server starts."""
    if not os.environ.get(STARTS_LOG):
        fd, path = tempfile.mkstemp(prefix="iriis-starts-", suffix=".log")
        os.close(fd)
        os.environ[STARTS_LOG] = path
        config._iriis_starts_log = path  # type: ignore[attr-defined]
    if os.environ.get(FAST):
        import ray

        def refuse(*_args: object, **_kwargs: object) -> None:
            count_start("Ray in the test process")

        ray.init = refuse  # type: ignore[assignment]


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """The suite's cost beside its verdict: how many real server processes and Ray instances it started."""
    path = getattr(config, "_iriis_starts_log", None)
    if not path or not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        kinds = Counter(line.strip() for line in f if line.strip())
    os.unlink(path)
    detail = ", ".join(f"{kind}: {n}" for kind, n in kinds.most_common())
    terminalreporter.write_line(f"server starts: {sum(kinds.values())} ({detail or 'none'})")


# Every test belongs to a group: the tests that share a session-wide server form one group per
# server, those on the in-process Ray one group, and every other module is a group of its own. A
# group runs as one block, heaviest first, and what it holds open is closed when it ends.
# (pytest-xdist's `--dist loadgroup` cannot carry these groups under pytest 9: it renames node ids
# through an attribute pytest 9 no longer reads, so `make test-fast` splits by file instead.)
SHARED_SERVERS = ("server", "device_server", "ray_session")
# Seconds each heavy group took on 2 cores (2026-12-06): the heaviest run first, so the run's tail
# is light tests; a group missing here runs after these, in the order it was collected.
GROUP_COST = {
    "server": 480, "device_server": 200, "tests/test_local_model_qwen.py": 120, "tests/test_voice_e2e.py": 117,
    "tests/test_e2e_offline.py": 112, "tests/test_backpressure.py": 105, "tests/test_multinode.py": 102,
    "tests/test_relay_e2e.py": 91, "tests/test_local_model_e2e.py": 89, "ray_session": 80,
    "tests/test_serve_deploy.py": 72, "tests/test_e2e_calls.py": 46, "tests/test_fault_relay.py": 24,
    "tests/test_local_model_llama.py": 23,
}


def test_group(item: pytest.Item) -> str:
    """The group `item` runs in: a shared server's name, or its own module."""
    names = getattr(item, "fixturenames", ())
    return next((f for f in SHARED_SERVERS if f in names), item.nodeid.split("::", 1)[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    for item in items:
        group = groups[item.nodeid] = test_group(item)
        first_seen.setdefault(group, len(first_seen))
        if group in ("server", "device_server"):
            item.add_marker(pytest.mark.e2e)
        elif group == "ray_session":
            item.add_marker(pytest.mark.ray)
    # Each group's tests in one block (the closers below rely on it), heaviest group first; the
    # sort is stable, so a group keeps its own order (the device restart test stays last).
    items.sort(key=lambda item: (-GROUP_COST.get(g := groups[item.nodeid], 0), first_seen[g]))


# What a shared group holds open (a server, Ray), closed as soon as the group's last test is done
# rather than at the end of the run: an idle server's Ray keeps a good part of a core busy.
_closers: dict[str, Callable[[], object]] = {}


def close_with_group(group: str, closer: Callable[[], object]) -> None:
    _closers[group] = closer


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    yield
    group = test_group(item)
    if group in _closers and (nextitem is None or test_group(nextitem) != group):
        _closers.pop(group)()


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
async def server(scripted: ScriptedOpenAI, pg_url: str, tmp_path_factory: pytest.TempPathFactory):
    """The real `iriis serve` on PostgreSQL, talking to the scripted model over HTTP."""
    from tests.server_proc import ServerProcess, set_pin

    home = tmp_path_factory.mktemp("home-pg")
    mcp = home / "mcp.yaml"
    mcp.write_text(TEST_MCP_YAML)
    proc = ServerProcess(home, {
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
        # This server lives through the whole run and its tests open hundreds of conversations:
        # with the default ten minutes, 60-70 idle actors (~105 MB and ~1% of a core each, Ray's
        # own upkeep) pile up on 2 cores. An exited one is rebuilt from the store on next use.
        "IRIIS_SESSION_IDLE_SECONDS": "60",
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


# The device servers' timers, short so their limits are reached in seconds.
HELLO_S, CALL_S, EVENT_S, SILENCE_S, PING_S = 3.0, 3.0, 4.0, 6.0, 1.5
# No MCP server at all: a paired device's tools must reach the agent without one.
DEVICE_MCP_YAML = """
servers:
  builtin:
    tools: {save_note: confirm}
"""


@pytest.fixture(scope="session")
def device_server(scripted, tmp_path_factory) -> Iterator:
    """One server, with short device timers, for the device modules (test_devices_agent, _desktop,
    _protocol; the last of them stops it with its restart test)."""
    from tests.server_proc import ServerProcess, scripted_env, set_pin

    home = tmp_path_factory.mktemp("home-devices")
    proc = ServerProcess(home, scripted_env(
        home, scripted.base_url, OWNER_KEY, DEVICE_MCP_YAML,
        IRIIS_DEVICE_HELLO_SECONDS=str(HELLO_S), IRIIS_DEVICE_CALL_SECONDS=str(CALL_S),
        IRIIS_DEVICE_EVENT_SECONDS=str(EVENT_S), IRIIS_DEVICE_SILENCE_SECONDS=str(SILENCE_S),
        IRIIS_DEVICE_PING_SECONDS=str(PING_S))).start()
    set_pin(proc, OWNER_PIN)
    close_with_group("device_server", proc.kill)
    yield proc
    proc.kill()
