"""The MCP catalogue against real servers: stdio subprocesses and a streamable-HTTP server behind a
bearer check, plus a fake device provider. Every wait is on an event or state with a deadline."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.tools.builtin import builtin_toolbox
from actors.tools.catalogue import Catalogue, ServerStatus
from actors.tools.config import McpConfig, RestartPolicy, ServerConfig, load_mcp_config
from actors.tools.mcp.outcomes import describe_error, root_cause
from actors.tools.mcp.resolve import Scrubber, expand_vars, mcp_url, normalise_header, resolve_server
from actors.common.toolspec import ToolError, ToolOutput, ToolSpec
from tests.server_proc import free_port

SERVERS = Path(__file__).parent / "mcp_servers"
ECHO = SERVERS / "echo_server.py"
HTTP = SERVERS / "http_server.py"
HTTP_TOKEN = "remote-test-token-5f2a9c"
WAIT = 30.0  # generous: a cold Python with the SDK takes a second or two to start
ECHO_TOOLS = {"echo", "add", "fail", "run", "slow", "pid", "saved", "exit_now"}

MakeCatalogue = Callable[..., Catalogue]


def echo_server(name: str = "echo", **fields: Any) -> ServerConfig:
    return ServerConfig(command=sys.executable, args=[str(ECHO), name], **fields)


def status_of(cat: Catalogue, name: str) -> ServerStatus:
    return next(s for s in cat.status() if s.name == name)


@pytest.fixture
async def make_catalogue() -> AsyncIterator[MakeCatalogue]:
    made: list[Catalogue] = []

    def make(servers: dict[str, ServerConfig], environ: dict[str, str] | None = None,
             **kw: Any) -> Catalogue:
        cat = Catalogue(McpConfig(servers=servers), environ or {}, **kw)
        made.append(cat)
        return cat

    yield make
    for cat in made:
        await cat.close()


@pytest.fixture(scope="module")
def http_port() -> Iterator[int]:
    """The HTTP test server in its own process; its first stdout line is the listening port."""
    env = {**os.environ, "MCP_TEST_TOKEN": HTTP_TOKEN}
    proc = subprocess.Popen([sys.executable, str(HTTP)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], WAIT)
        assert ready, "the HTTP test server did not report its port in time"
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT)
        if proc.stdout is not None:
            proc.stdout.close()


# -- configuration helpers --------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("Bearer ${TOKEN}", "Bearer abc"),
    ("${MISSING:-fallback}", "fallback"),
    ("${EMPTY:-fallback}", "fallback"),
    ("${TOKEN:-fallback}", "abc"),
    ("${MISSING}", ""),
    ("$TOKEN stays", "$TOKEN stays"),
])
def test_expand_vars(text: str, expected: str) -> None:
    assert expand_vars(text, {"TOKEN": "abc", "EMPTY": ""}) == expected


@pytest.mark.parametrize(("url", "expected"), [
    ("https://tools.example.com", "https://tools.example.com/mcp"),
    ("https://tools.example.com/", "https://tools.example.com/mcp"),
    ("https://tools.example.com/mcp", "https://tools.example.com/mcp"),
    ("https://tools.example.com/v1/stream", "https://tools.example.com/v1/stream"),
    ("http://127.0.0.1:8000?key=1", "http://127.0.0.1:8000/mcp?key=1"),
])
def test_mcp_url_rule(url: str, expected: str) -> None:
    assert mcp_url(url) == expected


def test_headers_are_expanded_and_normalised() -> None:
    config = ServerConfig(transport="http", url="https://h.example.com",
                          headers={"Authorization": "Bearer ${TOKEN}", "X-Note": "a\tb\n c\n"})
    resolved = resolve_server("h", config, {"TOKEN": "tok-123456\r\n"})
    assert resolved.headers == {"Authorization": "Bearer tok-123456", "X-Note": "a b c"}
    assert resolved.url == "https://h.example.com/mcp"
    assert normalise_header("  Bearer\t abc\n") == "Bearer abc"


def test_errors_unwrap_from_groups_and_secrets_are_masked() -> None:
    leaf = PermissionError("rejected Authorization: Bearer abc.def.ghi for sk-ABCDEFGHIJKLMNOPQRSTUV")
    group = BaseExceptionGroup("outer", [asyncio.CancelledError(), ExceptionGroup("inner", [leaf])])
    assert root_cause(group) is leaf
    text = Scrubber(["my-own-secret-value"])(describe_error(group) + " and my-own-secret-value")
    assert text.startswith("PermissionError: rejected")
    assert "abc.def.ghi" not in text and "ABCDEFGHIJKLMNOP" not in text and "my-own-secret-value" not in text
    assert "TaskGroup" not in text and "outer" not in text


def test_config_reads_trusted_and_restart(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text("restart: {initial_s: 2, max_s: 30}\nservers:\n"
                    "  notes: {command: notes-server, trusted: true}\n")
    config = load_mcp_config(path)
    assert config.restart == RestartPolicy(initial_s=2, max_s=30)
    assert config.servers["notes"].trusted and not ServerConfig(command="x").trusted


# -- stdio ------------------------------------------------------------------------------------


async def test_stdio_tools_are_listed_and_called(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server(env={"ECHO_PREFIX": "${PREFIX:-> }"})})
    await cat.start()
    specs = cat.specs()
    assert set(specs) == ECHO_TOOLS
    assert specs["echo"].source == "echo" and specs["echo"].untrusted_output
    assert specs["add"].parameters["required"] == ["a", "b"]
    assert (await cat.call("echo", {"text": "hi"})).text == "> hi"  # env default reached the process
    assert (await cat.call("add", {"a": 2, "b": 3})).text == "5"
    assert status_of(cat, "echo").model_dump(exclude={"last_ok"}) == ServerStatus(
        name="echo", state="on", tools=len(ECHO_TOOLS)).model_dump(exclude={"last_ok"})
    assert cat.server_of("add") == "echo"
    assert cat.keywords() == {"echo": []}


async def test_file_ids_are_taken_only_from_a_trusted_server_or_one_that_saves_its_own(
        make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"stranger": echo_server("stranger"), "mail": echo_server("mail", reports_files=True),
                          "studio": echo_server("studio", trusted=True)})
    await cat.start()
    # A server of someone else's cannot make one of the owner's files appear as its result.
    assert (await cat.call("saved", {"file_id": 7})).files == []
    assert (await cat.call("mail__saved", {"file_id": 7})).files == [7]
    assert (await cat.call("studio__saved", {"file_id": 7})).files == [7]


async def test_tool_errors_timeouts_and_unknown_tools(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server()})
    await cat.start()
    with pytest.raises(ToolError, match="nope"):
        await cat.call("fail", {"reason": "nope"})
    with pytest.raises(ToolError, match=r"did not answer within 0.3 s"):
        await cat.call("slow", {"seconds": 5}, timeout=0.3)
    with pytest.raises(ToolError, match="no tool named"):
        await cat.call("nonexistent", {})
    # None of those took the server down.
    assert status_of(cat, "echo").state == "on"
    assert (await cat.call("echo", {"text": "still here"})).text == "still here"


async def test_tiers_exclusions_collisions_and_trust(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({
        "echo": echo_server("echo", tools={"add": "pin"}, exclude=["slow"], keywords=["echo", "repeat"]),
        "other": echo_server("other", tier="confirm", tools={"fail": "auto"}, trusted=True),
    }, reserved={"run"})
    await cat.start()
    specs = cat.specs()
    # Override > server tier > readOnlyHint > 1.
    assert specs["add"].tier == 3
    assert specs["echo"].tier == 0
    assert specs["fail"].tier == 1
    assert specs["other__echo"].tier == 2
    assert specs["other__fail"].tier == 1
    # echo's `slow` is excluded, so it reserves no name and other's keeps the plain one.
    assert specs["slow"].source == "other" and "other__slow" not in specs
    # The later server's clashing names are prefixed; so is a clash with a reserved (built-in) name.
    assert "echo__run" in specs and "run" not in specs and "other__run" in specs
    assert specs["echo__run"].purpose_required and not specs["add"].purpose_required
    assert specs["other__echo"].untrusted_output is False and specs["echo"].untrusted_output is True
    assert cat.server_of("other__echo") == "other"
    assert (await cat.call("other__echo", {"text": "from other"})).text == "from other"
    assert cat.keywords() == {"echo": ["echo", "repeat"], "other": []}


async def test_requires_env_keeps_a_server_off(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"needs": ServerConfig(command="/nonexistent/never-started",
                                                requires_env=["A_TOKEN", "B_KEY", "C_SET"])},
                         {"A_TOKEN": "  ", "C_SET": "yes"})
    await cat.start()
    status = status_of(cat, "needs")
    assert status.state == "off" and status.tools == 0
    assert "A_TOKEN" in status.reason and "B_KEY" in status.reason and "C_SET" not in status.reason
    assert cat.specs() == {}


# -- HTTP -------------------------------------------------------------------------------------


async def test_http_server_with_bearer_from_env(make_catalogue: MakeCatalogue, http_port: int) -> None:
    cat = make_catalogue({
        # No path: the /mcp rule applies. The token arrives with the trailing newline of a paste.
        "remote": ServerConfig(transport="http", url=f"http://127.0.0.1:{http_port}",
                               headers={"Authorization": "Bearer ${REMOTE_TOKEN}"}),
        "wrong": ServerConfig(transport="http", url=f"http://127.0.0.1:{http_port}/mcp?api_key=${{WRONG}}",
                              headers={"Authorization": "Bearer ${WRONG}"}),
    }, {"REMOTE_TOKEN": HTTP_TOKEN + "\n", "WRONG": "not-the-token-77"},
        restart=RestartPolicy(initial_s=60, max_s=60))
    await cat.start()
    specs = cat.specs()
    assert set(specs) == {"lookup", "shout"}
    assert specs["lookup"].tier == 0 and specs["shout"].tier == 1 and specs["shout"].source == "remote"
    assert (await cat.call("shout", {"text": "hello"})).text == "HELLO"
    wrong = status_of(cat, "wrong")
    assert wrong.state == "down" and wrong.reason
    assert "not-the-token-77" not in wrong.reason and "api_key=***" in wrong.reason


async def test_unreachable_server_error_is_unwrapped_and_masked(make_catalogue: MakeCatalogue) -> None:
    port = free_port()  # nothing listens there
    cat = make_catalogue({
        "gone": ServerConfig(transport="http", url=f"http://127.0.0.1:{port}/mcp?token=${{SECRET}}",
                             headers={"Authorization": "Bearer ${SECRET}"}),
    }, {"SECRET": "s3cr3t-value-xyz"}, restart=RestartPolicy(initial_s=60, max_s=60))
    await cat.start()
    reason = status_of(cat, "gone").reason
    assert reason.startswith("ConnectError")
    assert "TaskGroup" not in reason and "s3cr3t-value-xyz" not in reason and "token=***" in reason


# -- death and restarts -----------------------------------------------------------------------


async def test_dead_server_goes_down_and_comes_back(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server()}, restart=RestartPolicy(initial_s=0.05, max_s=0.2))
    await cat.start()
    with pytest.raises(ToolError, match="unavailable right now"):
        await cat.call("exit_now", {"code": 3})
    # Hidden at once, and a call says so instead of failing the turn.
    assert "echo" not in cat.specs()
    with pytest.raises(ToolError, match="unavailable right now"):
        await cat.call("echo", {"text": "anyone?"})
    reasons: list[str] = []

    def noted_down() -> bool:
        status = status_of(cat, "echo")
        if status.state != "on" and status.reason:
            reasons.append(status.reason)
        return status.state == "on"

    await cat.wait_for(noted_down, WAIT)
    assert any("exited" in r and "echo server exiting with 3" in r for r in reasons), reasons
    assert status_of(cat, "echo").restarts == 1
    assert (await cat.call("echo", {"text": "back"})).text == "back"


async def test_death_while_idle_is_noticed(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server()}, restart=RestartPolicy(initial_s=0.05, max_s=0.2))
    await cat.start()
    first_pid = int((await cat.call("pid", {})).text)
    os.kill(first_pid, signal.SIGKILL)
    # No call is made: the end of the server's output alone takes it down and brings it back.
    await cat.wait_for(lambda: status_of(cat, "echo").restarts == 1 and status_of(cat, "echo").state == "on",
                       WAIT)
    assert int((await cat.call("pid", {})).text) != first_pid


async def test_failed_starts_back_off_doubling_to_the_ceiling(make_catalogue: MakeCatalogue) -> None:
    delays: list[float] = []
    enough = asyncio.Event()

    async def recording_sleep(seconds: float) -> None:
        delays.append(seconds)
        if len(delays) >= 4:
            enough.set()
            await asyncio.Event().wait()  # park here until close() cancels the supervisor

    crash = "import sys; sys.stderr.write('cannot start: no database\\n'); sys.exit(2)"
    cat = make_catalogue({"broken": ServerConfig(command=sys.executable, args=["-c", crash])},
                         restart=RestartPolicy(initial_s=1, max_s=4), sleep=recording_sleep)
    await cat.start()
    await asyncio.wait_for(enough.wait(), WAIT)
    assert delays == [1, 2, 4, 4]
    status = status_of(cat, "broken")
    assert status.state == "down" and status.restarts == 3
    assert "cannot start: no database" in status.reason


# -- the ToolBox view and providers -----------------------------------------------------------


async def test_toolbox_view_runs_through_the_catalogue(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server()})
    await cat.start()
    box = cat.toolbox({"echo", "fail", "calculate"}, extra=builtin_toolbox())
    assert set(box.specs) == {"echo", "fail", "calculate"}
    assert {s["function"]["name"] for s in box.schemas()} == {"echo", "fail", "calculate"}
    result = await box.execute("echo", {"text": "key is sk-ABCDEFGHIJKLMNOPQRSTUVWX"})
    assert result.ok and "ABCDEFGHIJKLMNOP" not in result.content  # redacted like any tool output
    failed = await box.execute("fail", {"reason": "broken"})
    assert not failed.ok and "broken" in failed.content
    assert not (await box.execute("add", {"a": 1, "b": 2})).ok  # outside the view
    assert (await box.execute("calculate", {"expression": "6*7"})).ok


class FakeDevice:
    """A device provider: offers servers, can go offline, records what it ran."""

    def __init__(self, name: str, servers: dict[str, list[ToolSpec]]) -> None:
        self.name = name
        self.online = True
        self._servers = servers
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.broken = False

    def servers(self) -> dict[str, list[ToolSpec]]:
        return self._servers

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        if self.broken:
            raise ConnectionError("link dropped")
        self.calls.append((server, tool, arguments))
        return ToolOutput(text=f"{self.name} ran {tool}")


async def test_device_provider_overrides_cloud_while_online(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server(env={"ECHO_PREFIX": "cloud: "})})
    await cat.start()
    cloud_specs = cat.specs()
    # The device runs the same server; it names its own source, which must not leak through.
    mirrored = [spec.model_copy(update={"source": "phone-internal"}) for spec in cloud_specs.values()]
    snap = ToolSpec(name="snap", description="Take a photo.", parameters={"type": "object"}, tier=2)
    phone = FakeDevice("phone", {"echo": mirrored, "camera": [snap]})
    cat.add_provider(phone)

    assert {k: v for k, v in cat.specs().items() if k != "snap"} == cloud_specs
    assert cat.specs()["snap"].tier == 2 and cat.specs()["snap"].source == "camera"
    assert (await cat.call("echo", {"text": "hi"})).text == "phone ran echo"
    assert phone.calls == [("echo", "echo", {"text": "hi"})]
    assert status_of(cat, "echo").side == "device" and status_of(cat, "camera").state == "on"

    phone.online = False
    assert cat.specs() == cloud_specs  # the cloud copy covers, indistinguishably
    assert (await cat.call("echo", {"text": "hi"})).text == "cloud: hi"
    with pytest.raises(ToolError, match="unavailable right now"):
        await cat.call("snap", {})
    camera = status_of(cat, "camera")
    assert camera.state == "down" and camera.side == "device" and "phone" in camera.reason
    assert status_of(cat, "echo").side == "cloud"

    # Tiers of a device's tools are the device's own declaration.
    phone._servers["echo"] = [s.model_copy(update={"tier": 3}) if s.name == "echo" else s for s in mirrored]
    phone.online = True
    assert cat.specs()["echo"].tier == 3
    phone.broken = True
    with pytest.raises(ToolError, match="unavailable right now"):
        await cat.call("echo", {"text": "hi"})


async def test_changed_answers_when_what_is_on_offer_changes(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({})
    await cat.start()
    seen = cat.stamp.version
    # Nothing changes: the wait ends at its timeout with the same count.
    assert await cat.stamp.newer_than(seen, 0.05) == seen
    snap = ToolSpec(name="snap", description="Take a photo.", parameters={"type": "object"}, tier=2)
    phone = FakeDevice("phone", {"camera": [snap]})
    waiting = asyncio.ensure_future(cat.stamp.newer_than(seen, 5.0))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    cat.add_provider(phone)
    after = await asyncio.wait_for(waiting, 1.0)
    assert after != seen and "snap" in cat.specs()
    # Already behind: answered at once.
    cat.remove_provider(phone)
    assert await asyncio.wait_for(cat.stamp.newer_than(after, 5.0), 1.0) != after
