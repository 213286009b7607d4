"""The named actors on a real (session-wide) Ray: the provider router and the error log."""

from __future__ import annotations

import pytest

from actors.providers.router_actor import RemoteRouter, router_actor
from actors.recent_errors import ErrorEntry, error_log, make_entry, report
from actors.settings import ProviderConfig
from tests import scripted_openai as so

pytestmark = pytest.mark.usefixtures("ray_session")


async def test_router_discovers_backups_and_shares_health(model: so.ScriptedOpenAI) -> None:
    import ray

    model.models = ["gem-pro-1", "gem-flash-2", "other"]
    provider = ProviderConfig(name="gem", base_url=model.base_url, models=["gem-pro-0"],
                              backup_patterns=["flash"], api_key="k")
    handle = router_actor("test-chat", [provider])
    found = await handle.discover.remote()
    assert found == {"gem": ["gem-pro-1", "gem-flash-2", "other"]}
    # A second lookup by name reaches the same actor and the same state.
    same = RemoteRouter(router_actor("test-chat", [provider]))
    assert [e.key for e in await same.candidates()] == ["gem/gem-pro-0", "gem/gem-flash-2"]
    await same.record("gem/gem-pro-0", "not_found")
    assert [e.key for e in await RemoteRouter(handle).candidates()] == ["gem/gem-flash-2"]
    ray.kill(handle)


async def test_error_log_keeps_recent_errors_newest_first() -> None:
    try:
        raise ValueError("token=abcdef1234567890 went wrong")
    except ValueError as exc:
        entry = make_entry("test", exc, path="/v1/x", request={"content_type": "image/jpeg"})
    assert "abcdef1234567890" not in entry.error and "test_actors.py" in entry.trace
    log = error_log()
    await log.record.remote(entry)
    report("test", RuntimeError("second"))
    recent: list[ErrorEntry] = await log.recent.remote(10)
    assert recent[0].error == "RuntimeError: second"
    assert recent[1].path == "/v1/x" and recent[1].request == {"content_type": "image/jpeg"}


async def test_each_caller_orders_from_a_mirror_that_follows_the_others_reports(model: so.ScriptedOpenAI) -> None:
    """Two AgentLoop replicas' clients: one reports a failure, the other's local order (no actor
    call) drops that model a moment later; a router restart does not leave the mirror stale."""
    import asyncio

    import ray

    provider = ProviderConfig(name="p", base_url=model.base_url, models=["one", "two"], api_key="k")
    handle = router_actor("test-mirror", [provider])
    first, second = RemoteRouter(handle), RemoteRouter(handle)

    async def order(router: RemoteRouter, want: list[str]) -> None:
        for _ in range(100):
            got = [e.key for e in await router.candidates()]   # starts the mirror's watch
            if router._mirror is not None and got == want:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"mirror never showed {want}: {router._mirror and router._mirror.entries}")

    await order(first, ["p/one", "p/two"])
    await second.record("p/one", "timeout")
    # The reporter's own mirror knows at once; the other one's follows.
    assert [e.key for e in await second.candidates()] == ["p/two"]
    await order(first, ["p/two"])
    # The actor loses its state (health is rebuilt by use): the mirror follows the new epoch.
    ray.kill(handle, no_restart=False)
    await order(first, ["p/one", "p/two"])
    ray.kill(handle)
