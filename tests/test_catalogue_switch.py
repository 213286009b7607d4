"""The catalogue's bookkeeping per tool server (the last good call, the last error) and the
owner's switch (off: out of the offer at once, its process ended; on: started again), in-process
against the echo MCP server of test_catalogue over stdio. Every wait is on a state with a deadline."""

from __future__ import annotations

import asyncio

import psutil
import pytest

from actors.common.toolspec import ToolError, ToolSpec
from actors.tools.catalogue import MAX_LAST_ERROR_CHARS
from actors.tools.config import ServerConfig
from actors.tools.mcp.supervisor import OWNER_OFF
from tests.test_catalogue import (  # noqa: F401 (make_catalogue is a fixture, found by name)
    ECHO_TOOLS,
    WAIT,
    FakeDevice,
    MakeCatalogue,
    echo_server,
    make_catalogue,
    status_of,
)

OTHER_TOOLS = {f"other__{name}" for name in ECHO_TOOLS}


class Clock:
    """The catalogue's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_each_server_keeps_its_last_good_call_and_its_last_error(make_catalogue: MakeCatalogue) -> None:
    clock = Clock()
    cat = make_catalogue({"echo": echo_server(), "other": echo_server("other")}, clock=clock)
    await cat.start()
    fresh = status_of(cat, "echo")
    assert (fresh.last_ok, fresh.last_error, fresh.enabled) == (None, None, True)

    await cat.call("echo", {"text": "hi"})
    assert (status_of(cat, "echo").last_ok, status_of(cat, "echo").last_error) == (1_000.0, None)
    clock.now = 1_060.0
    with pytest.raises(ToolError):
        await cat.call("fail", {"reason": "the mailbox is full"})
    failed = status_of(cat, "echo")
    # The error is the call's own; the last good call stays what it was.
    assert "the mailbox is full" in failed.last_error and failed.last_ok == 1_000.0
    # Only the server the call went to.
    assert (status_of(cat, "other").last_ok, status_of(cat, "other").last_error) == (None, None)

    with pytest.raises(ToolError):
        await cat.call("fail", {"reason": "x" * 5_000})
    long = status_of(cat, "echo").last_error
    assert len(long) <= MAX_LAST_ERROR_CHARS + 2 and long.endswith(" …")
    with pytest.raises(ToolError):
        await cat.call("slow", {"seconds": 5}, timeout=0.2)
    assert "did not answer within 0.2 s" in status_of(cat, "echo").last_error

    # A good call clears the error.
    await cat.call("other__add", {"a": 1, "b": 2})
    await cat.call("echo", {"text": "again"})
    assert (status_of(cat, "echo").last_ok, status_of(cat, "echo").last_error) == (1_060.0, None)
    assert status_of(cat, "other").last_ok == 1_060.0
    # A name no server has belongs to none of them.
    with pytest.raises(ToolError, match="no tool named"):
        await cat.call("nonexistent", {})
    assert status_of(cat, "echo").last_error is None


async def test_a_device_servers_calls_are_kept_under_its_name(make_catalogue: MakeCatalogue) -> None:
    clock = Clock()
    cat = make_catalogue({}, clock=clock)
    await cat.start()
    snap = ToolSpec(name="snap", description="Take a photo.", parameters={"type": "object"}, tier=2)
    phone = FakeDevice("phone", {"camera": [snap]})
    cat.add_provider(phone)
    await cat.call("snap", {})
    assert (status_of(cat, "camera").last_ok, status_of(cat, "camera").last_error) == (1_000.0, None)
    phone.broken = True
    with pytest.raises(ToolError):
        await cat.call("snap", {})
    assert "unavailable right now" in status_of(cat, "camera").last_error


async def test_switched_off_a_server_leaves_the_offer_at_once_and_its_process_ends_then_on_it_comes_back(
        make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server(), "other": echo_server("other")})
    await cat.start()
    pid = int((await cat.call("pid", {})).text)
    seen = cat.stamp.version

    switching = asyncio.ensure_future(cat.switch("echo", False))
    await asyncio.sleep(0)
    # Out of the offer before its process has even been told to stop; the other server's
    # names stay as they were, and whoever watches the listing is woken.
    assert not switching.done()
    assert set(cat.specs()) == OTHER_TOOLS and cat.stamp.version != seen
    off = await asyncio.wait_for(switching, WAIT)
    assert (off.state, off.reason, off.enabled, off.tools) == ("off", OWNER_OFF, False, 0)
    assert ended(pid)
    # A call made from a listing taken before the switch says what happened.
    with pytest.raises(ToolError, match=r"switched its server \(echo\) off"):
        await cat.call("echo", {"text": "anyone?"})
    assert status_of(cat, "echo").state == "off"  # not restarted, as a server that died would be
    assert (await cat.switch("echo", False)).state == "off"  # twice is the same

    on = await cat.switch("echo", True)
    assert on.enabled and on.state in ("starting", "on")
    await cat.wait_for(lambda: status_of(cat, "echo").state == "on", WAIT)
    assert set(cat.specs()) == ECHO_TOOLS | OTHER_TOOLS
    assert int((await cat.call("pid", {})).text) != pid
    back = status_of(cat, "echo")
    assert (back.enabled, back.reason, back.restarts) == (True, "", 0)
    assert (await cat.switch("echo", True)).state == "on"  # on again changes nothing


async def test_a_server_switched_off_before_the_start_is_not_started(make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"echo": echo_server(), "other": echo_server("other"), "third": echo_server("third")})
    await cat.switch("other", False)
    await cat.switch("third", False)
    await cat.switch("third", True)  # changed its mind before the start: starts as usual
    await cat.start()
    assert (status_of(cat, "other").state, status_of(cat, "other").reason) == ("off", OWNER_OFF)
    assert status_of(cat, "third").state == "on" and set(cat.specs()) == ECHO_TOOLS | {
        f"third__{name}" for name in ECHO_TOOLS}
    await cat.switch("other", True)
    await cat.wait_for(lambda: status_of(cat, "other").state == "on", WAIT)
    assert (await cat.call("other__echo", {"text": "here"})).text == "here"


async def test_a_server_missing_its_variable_stays_off_and_an_unknown_name_is_refused(
        make_catalogue: MakeCatalogue) -> None:
    cat = make_catalogue({"needs": ServerConfig(command="/nonexistent/never-started", requires_env=["A_TOKEN"])})
    await cat.start()
    assert cat.servers() == ["needs"]
    off = await cat.switch("needs", False)
    assert (off.state, off.enabled) == ("off", False) and "A_TOKEN" in off.reason
    on = await cat.switch("needs", True)
    assert (on.state, on.enabled) == ("off", True) and "A_TOKEN" in on.reason
    with pytest.raises(KeyError):
        await cat.switch("nonexistent", False)
