"""`GET /v1/autonomy` in-process (no Ray): owner only, the budget in force before the loop's
first wake, and the last decisions newest first once the loop has written its state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from actors.scheduler.autonomy.state import KvState
from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.routes import autonomy as routes
from tests.test_tasks_routes import KEY, _Gateway


@pytest.fixture
async def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[httpx.AsyncClient, Store]]:
    monkeypatch.setenv("IRIIS_AUTONOMY_TOKENS_PER_DAY", "12345")
    monkeypatch.setenv("IRIIS_HOME", str(tmp_path))
    routes.configured_budget.cache_clear()
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'a.sqlite3'}")
    await migrate(store)
    app = FastAPI()
    app.include_router(routes.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client, store
    routes.configured_budget.cache_clear()
    await store.close()


async def test_before_the_first_wake_the_configured_budget_is_shown(setup) -> None:
    client, _store = setup
    body = (await client.get("/v1/autonomy")).json()
    assert (body["data"], body["count"], body["tokens_today"], body["budget"]) == ([], 0, 0, 12345)


async def test_without_the_owner_key_it_is_refused(setup) -> None:
    client, _store = setup
    resp = await client.get("/v1/autonomy", headers={"Authorization": "Bearer nope"})
    assert (resp.status_code, resp.json()["error"]["code"]) == (401, "unauthorized")


async def test_the_loops_state_is_shown_newest_decision_first(setup) -> None:
    from actors.scheduler.autonomy.state import DecisionRecord

    client, store = setup
    kv = KvState(store)
    state = await kv.load()
    state.budget, state.spent, state.next_wake = 50_000, 900, 1_800_000_000.0
    state.record(DecisionRecord(ts=1.0, kind="decision", action="none", thought="Quiet morning."))
    state.record(DecisionRecord(ts=2.0, kind="decision", action="message", thought="Remind about the dentist."))
    await kv.save(state)
    body = (await client.get("/v1/autonomy")).json()
    assert (body["budget"], body["tokens_today"], body["next_wake"]) == (50_000, 900, 1_800_000_000.0)
    assert [d["thought"] for d in body["data"]] == ["Remind about the dentist.", "Quiet morning."]
    assert body["count"] == 2
