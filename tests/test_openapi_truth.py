"""The OpenAPI document tells the truth (issue 31), in-process (no Ray, no server): the gateway's
own /openapi.json documents every error in the one shape the server answers, each status an
operation can answer (401/403 where a key is needed, 404 where the path names something, 503
where the backpressure may answer), the real media type of each stream and download, and every
header and query input a route reads. Real requests through the routes answer only what the
document says, in the documented shape."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from fastapi import FastAPI

from actors.devices import repository as repo
from actors.devices.people import OWNER_ID
from actors.devices.settings import DeviceLimits
from actors.store.migrate import migrate
from actors.store.store import Store
from serve_apps.deployments.backpressure import overloaded_body
from serve_apps.http import app as http_app
from serve_apps.http.app import API_PREFIX, answer_errors
from serve_apps.routes import events, files, memory
from tests.test_id_bounds import KEY, _EventBus, _Gateway

ERROR = {"$ref": "#/components/schemas/ErrorBody"}
# The operations anyone may call: signing in, pairing, Telegram's webhook (its own secret), the probe.
OPEN = {("post", "/v1/auth/login"), ("post", "/v1/auth/cookie"), ("post", "/v1/auth/logout"),
        ("post", "/v1/devices/pair"), ("post", "/v1/telegram/webhook"), ("get", "/healthz")}
# What each stream or download answers with 200, and nothing else (no JSON where none comes).
MEDIA = {
    ("post", "/v1/chat"): {"text/event-stream"},
    ("get", "/v1/sessions/{session_id}/stream"): {"text/event-stream"},
    ("post", "/v1/ask/stream"): {"text/event-stream"},
    ("get", "/v1/me/events/stream"): {"text/event-stream"},
    ("get", "/v1/memory/export"): {"application/x-ndjson"},
    ("get", "/v1/export/exchanges.jsonl"): {"application/x-ndjson"},
    ("get", "/v1/files/{file_id}"): {"*/*"},
    ("post", "/v1/memory/consolidate"): {"application/json", "text/event-stream"},
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    from serve_apps.deployments.gateway import app

    return app.openapi()


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, ops in document["paths"].items() for method, op in ops.items()]


def _params(op: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["in"], p["name"]): p for p in op.get("parameters", [])}


def test_every_api_operation_is_tagged_with_its_resource(document) -> None:
    """The API's routes are gathered in one router (serve_apps/deployments/api.py), each
    resource under its tag, which is how generated clients and /docs group them."""
    untagged = [(method, path) for path, operations in document["paths"].items() if path.startswith("/v1/")
                for method, operation in operations.items() if not operation.get("tags")]
    assert untagged == []
    tags = {path: operation["tags"] for path, operations in document["paths"].items()
            for operation in operations.values() if operation.get("tags")}
    assert tags["/v1/memory"] == ["memory"] and tags["/v1/chat"] == ["conversations"]
    assert tags["/v1/me/devices"] == ["devices"] and tags["/v1/calls"] == ["calls"]
    # The liveness probe is not part of the API: served at the root, with no tag.
    assert "/healthz" not in tags and "/healthz" in document["paths"]


def test_every_error_is_documented_in_the_error_shape(document) -> None:
    assert "HTTPValidationError" not in json.dumps(document)
    assert document["components"]["schemas"]["ErrorBody"]["properties"]["error"] == {
        "$ref": "#/components/schemas/ErrorInfo"}
    for method, path, op in _operations(document):
        responses = op["responses"]
        assert "422" in responses, (method, path)  # a NUL is refused anywhere (serve_apps/http/nul.py)
        if op.get("requestBody"):
            assert "400" in responses, (method, path)
        if any(p["in"] == "path" for p in op.get("parameters", [])):
            assert "404" in responses, (method, path)
        for status, answer in responses.items():
            if int(status) >= 400 and (method, path, status) != ("get", "/v1/files/{file_id}", "416"):
                assert answer["content"] == {"application/json": {"schema": ERROR}}, (method, path, status)
        # The replica's backpressure answers every route but the probe, with Retry-After.
        if path != "/healthz":
            assert "Retry-After" in responses["503"]["headers"], (method, path)


def test_the_statuses_the_routes_raise_are_documented(document) -> None:
    def statuses(method: str, path: str) -> set[str]:
        return set(document["paths"][path][method]["responses"])

    assert {"409"} <= statuses("patch", "/v1/sessions/{session_id}")
    assert {"409"} <= statuses("delete", "/v1/sessions/{session_id}")
    assert {"409"} <= statuses("post", "/v1/calls/{call_id}/answer")
    assert {"409"} <= statuses("delete", "/v1/admin/people/{person_id}")
    assert {"410", "429"} <= statuses("post", "/v1/devices/pair")
    assert "Retry-After" in document["paths"]["/v1/devices/pair"]["post"]["responses"]["429"]["headers"]
    assert {"413"} <= statuses("post", "/v1/files")
    assert {"413", "422"} <= statuses("post", "/v1/memory/import")
    assert {"404"} <= statuses("post", "/v1/chat")
    assert {"502"} <= statuses("get", "/v1/preview")
    assert {"206", "416"} <= statuses("get", "/v1/files/{file_id}")
    assert "content" not in document["paths"]["/v1/files/{file_id}"]["get"]["responses"]["416"]


def test_every_operation_that_needs_a_key_says_so_and_documents_401(document) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer", "description": schemes["bearer"]["description"]}
    assert (schemes["token"]["in"], schemes["cookie"]["in"]) == ("query", "cookie")
    for method, path, op in _operations(document):
        if (method, path) in OPEN:
            assert "security" not in op, (method, path)
            continue
        assert op["security"] == [{"bearer": []}, {"token": []}, {"cookie": []}], (method, path)
        assert "401" in op["responses"], (method, path)
    # Owner routes refuse a device token (403); the device's own routes take it.
    assert "403" in document["paths"]["/v1/memory"]["get"]["responses"]
    assert "403" not in document["paths"]["/v1/ask"]["post"]["responses"]


def test_streams_and_downloads_document_their_media_type(document) -> None:
    for (method, path), media in MEDIA.items():
        assert set(document["paths"][path][method]["responses"]["200"]["content"]) == media, (method, path)
    download = document["paths"]["/v1/files/{file_id}"]["get"]["responses"]
    assert download["206"]["content"] == download["200"]["content"]
    imported = document["paths"]["/v1/memory/import"]["post"]["requestBody"]
    assert set(imported["content"]) == {"application/x-ndjson"} and imported["required"]


def test_header_and_query_inputs_are_declared(document) -> None:
    stream = _params(document["paths"]["/v1/me/events/stream"]["get"])
    assert set(stream) == {("query", "after"), ("header", "Last-Event-ID")}
    # Read as text: one that is not a plain number is ignored (200), never refused (422).
    assert all({"type": "string"} in p["schema"]["anyOf"] and not p["required"] for p in stream.values())
    assert ("header", "Range") in _params(document["paths"]["/v1/files/{file_id}"]["get"])
    webhook = document["paths"]["/v1/telegram/webhook"]["post"]
    assert ("header", "X-Telegram-Bot-Api-Secret-Token") in _params(webhook)
    assert set(webhook["requestBody"]["content"]) == {"application/json"}


# -- real answers, in-process, against the document ---------------------------------------------

@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FastAPI, Store]]:
    monkeypatch.setattr(http_app, "report", lambda *_a, **_k: None)
    monkeypatch.setattr(events, "event_bus", _EventBus)
    store = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'doc.sqlite3'}")
    await migrate(store)
    app = FastAPI()
    for module in (memory, events, files):
        app.include_router(module.router, prefix=API_PREFIX)
    answer_errors(app)
    app.state.gateway = _Gateway(store)
    yield app, store
    await store.close()


def _media_matches(documented: str, received: str) -> bool:
    received = received.split(";")[0].strip().lower()
    kind, sub = documented.split("/")
    return documented in ("*/*", received) or (sub == "*" and received.startswith(f"{kind}/"))


def conforms(document: dict[str, Any], method: str, path: str, reply: httpx.Response) -> None:
    """`reply` is an answer `path` documents: its status, its media type and (for JSON) its body."""
    responses = document["paths"][path][method]["responses"]
    assert str(reply.status_code) in responses, (method, path, reply.status_code, sorted(responses))
    content = responses[str(reply.status_code)].get("content")
    if not content:
        return
    received = reply.headers["content-type"]
    media = next((m for m in content if _media_matches(m, received)), None)
    assert media is not None, (method, path, received, list(content))
    if media == "application/json":
        schema = {**content[media]["schema"], "components": document["components"]}
        jsonschema.validate(reply.json(), schema, cls=jsonschema.Draft202012Validator)


async def test_real_answers_are_what_the_document_says(document, api) -> None:
    app, store = api
    record = await store.add_file("notes.txt", "text/plain", b"0123456789")
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    owner = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=owner) as client:
        samples: list[tuple[str, str, httpx.Response, int]] = [
            ("get", "/v1/memory/{item_id}", await client.get("/v1/memory/999"), 404),
            ("get", "/v1/memory/{item_id}", await client.get("/v1/memory/0"), 422),
            ("get", "/v1/memory", await client.get("/v1/memory", headers={"Authorization": ""}), 401),
            ("post", "/v1/memory", await client.post("/v1/memory", json={"text": ""}), 422),
            ("post", "/v1/memory", await client.post("/v1/memory", content=b"{", headers={
                "Content-Type": "application/json"}), 400),
            ("post", "/v1/memory", await client.post("/v1/memory", json={"text": "I like tea"}), 201),
            ("get", "/v1/memory", await client.get("/v1/memory"), 200),
            ("get", "/v1/memory/export", await client.get("/v1/memory/export"), 200),
            ("post", "/v1/memory/import", await client.post("/v1/memory/import", content=b"not json\n"), 422),
            ("get", "/v1/files/{file_id}", await client.get(f"/v1/files/{record.id}"), 200),
            ("get", "/v1/files/{file_id}", await client.get(f"/v1/files/{record.id}",
                                                            headers={"Range": "bytes=2-4"}), 206),
            ("get", "/v1/files/{file_id}", await client.get(f"/v1/files/{record.id}",
                                                            headers={"Range": "bytes=50-"}), 416),
            ("get", "/v1/me/events/stream", await client.get("/v1/me/events/stream"), 200),
        ]
    for method, path, reply, status in samples:
        assert reply.status_code == status, (method, path, reply.status_code, reply.text)
        conforms(document, method, path, reply)
    assert samples[-1][2].text.startswith(": connected")


async def test_the_stream_keeps_its_resume_point_as_declared(document, api, monkeypatch) -> None:
    app, store = api
    bus = _EventBus()
    monkeypatch.setattr(events, "event_bus", lambda: bus)
    kept = await repo.add_event(store, OWNER_ID, None, {"event": "note", "title": "t", "text": "x"}, DeviceLimits())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                 headers={"Authorization": f"Bearer {KEY}"}) as client:
        by_query = await client.get("/v1/me/events/stream", params={"after": "0"})
        header_wins = await client.get("/v1/me/events/stream", params={"after": "0"},
                                       headers={"Last-Event-ID": str(kept["id"])})
        ignored = await client.get("/v1/me/events/stream", headers={"Last-Event-ID": "soon"})
    for reply in (by_query, header_wins, ignored):
        conforms(document, "get", "/v1/me/events/stream", reply)
    assert f"id: {kept['id']}\nevent: device_event" in by_query.text
    assert "event: device_event" not in header_wins.text and "event: device_event" not in ignored.text


def test_the_backpressure_answer_is_the_documented_503(document) -> None:
    schema = {**document["paths"]["/v1/memory"]["get"]["responses"]["503"]["content"]["application/json"]["schema"],
              "components": document["components"]}
    jsonschema.validate(overloaded_body(2), schema, cls=jsonschema.Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError):  # FastAPI's own shape is not ours
        jsonschema.validate({"detail": [{"loc": ["query"], "msg": "x"}]}, schema, cls=jsonschema.Draft202012Validator)
