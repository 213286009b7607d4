"""Tools end to end: MCP servers started from mcp.yaml, routing with more_tools, artefacts as
files, the agent itself as an MCP server, link previews through the SSRF guard."""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests import scripted_openai as so
from tests.conftest import OWNER_KEY, UPLOAD_LIMIT
from tests.sse import chat

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {OWNER_KEY}"}


@pytest.fixture
def client(server, model) -> httpx.Client:
    with httpx.Client(base_url=server.url, timeout=120, headers=AUTH) as c:
        yield c


def offered(request_body: dict) -> set[str]:
    return {t["function"]["name"] for t in request_body.get("tools", [])}


def test_tool_servers_are_listed_with_their_state(client) -> None:
    servers = {s["name"]: s for s in client.get("/v1/tools").json()["data"]}
    assert servers["studio"]["state"] == "on" and servers["studio"]["tools"] == 5
    assert servers["files"]["state"] == "on"
    assert servers["search"]["state"] == "off" and "IRIIS_TEST_MISSING_KEY" in servers["search"]["reason"]


def test_a_chart_made_by_an_mcp_server_comes_back_as_a_file(client, model) -> None:
    model.enqueue(so.tools(("make_chart", {"kind": "bar", "title": "Steps",
                                           "series": {"steps": [3, 5, 8]}, "x_labels": ["Mon", "Tue", "Wed"]})),
                  so.text("Here is your chart."))
    events = chat(client, OWNER_KEY, "plot my steps as a bar chart", timeout=120)
    assert "make_chart" in offered(model.requests[0]["body"])  # routed by the keywords
    done = next(d for e, d in events if e == "tool" and d["status"] == "done")
    file_id = int(done["result"].split("file ")[1].split()[0])
    assert done["files"] == [file_id] and f"[file:{file_id}]" in events[-1][1]["text"]
    png = client.get(f"/v1/files/{file_id}")
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"


def test_more_tools_adds_a_server_mid_turn(client, model) -> None:
    model.enqueue(so.tools(("more_tools", {"need": "make a spreadsheet"})),
                  so.tools(("make_spreadsheet", {"sheets": {"Budget": [["item", "cost"], ["tea", 3]]}})),
                  so.text("Your spreadsheet is ready."))
    chat(client, OWNER_KEY, "hello there", timeout=120)
    first, second = (offered(r["body"]) for r in model.requests[:2])
    assert "more_tools" in first and "make_spreadsheet" not in first
    assert "make_spreadsheet" in second
    result = model.requests[2]["body"]["messages"][-1]["content"]
    assert "saved as file" in result


def test_the_files_server_reads_an_upload(client, model) -> None:
    up = client.post("/v1/files", files={"file": ("plan.txt", b"Phase one: dig.", "text/plain")}).json()
    model.enqueue(so.tools(("inspect_file", {"file_id": up["id"], "question": "what is it?"})), so.text("A plan."))
    chat(client, OWNER_KEY, "inspect the file I uploaded", timeout=120)
    tool_msg = model.requests[1]["body"]["messages"][-1]["content"]
    assert "Phase one: dig." in tool_msg and 'untrusted="true" from="files.inspect_file"' in tool_msg


async def test_the_agent_answers_as_an_mcp_server(server, model) -> None:
    model.enqueue(so.text("Hello from Iriis over MCP."))
    async with httpx2.AsyncClient(headers=AUTH, timeout=60) as http:
        async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                assert [t.name for t in tools.tools] == ["chat"]
                result = await session.call_tool("chat", {"message": "hi"})
    reply = json.loads(result.content[0].text)
    assert reply["reply"] == "Hello from Iriis over MCP." and reply["session_id"]


async def test_mcp_callers_cannot_confirm_actions(server, model) -> None:
    model.enqueue(so.tools(("save_note", {"text": "from mcp"})), so.text("I could not save it."))
    async with httpx2.AsyncClient(headers=AUTH, timeout=60) as http:
        async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("chat", {"message": "save a note"})
    assert "nobody can confirm" in model.requests[-1]["body"]["messages"][-1]["content"]


def test_mcp_endpoint_needs_the_owner_key_and_a_known_host(server) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    assert httpx.post(f"{server.url}/mcp", json=body).status_code == 401
    rebinding = httpx.post(f"{server.url}/mcp", json=body,
                           headers={**AUTH, "Host": "evil.example", "Accept": "application/json, text/event-stream"})
    assert rebinding.status_code in (400, 403, 421)


def test_a_key_made_with_the_cli_works_on_mcp_at_its_first_request(server) -> None:
    from tests.server_proc import IRIIS

    made = subprocess.run([str(IRIIS), "key", "new", "--label", "mcp client"], env=server.env, capture_output=True,
                          text=True, timeout=60, check=True)
    key = made.stdout.strip()
    time.sleep(2.5)  # the server's copy of the stored keys is older than its reload interval now
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    first = httpx.post(f"{server.url}/mcp", json=body, timeout=30,
                       headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"})
    assert first.status_code == 200, first.text


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/", "http://169.254.169.254/latest/meta-data",
                                 "file:///etc/passwd", "http://[::1]/"])
def test_link_previews_refuse_private_addresses(client, url) -> None:
    resp = client.get("/v1/preview", params={"url": url})
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "url_refused"


def test_uploads_at_the_limit_pass_and_over_it_get_413(client) -> None:
    at = client.post("/v1/files", files={"file": ("at.bin", b"a" * UPLOAD_LIMIT, "application/octet-stream")})
    assert at.status_code == 201 and at.json()["size"] == UPLOAD_LIMIT
    over = client.post("/v1/files", files={"file": ("over.bin", b"a" * (UPLOAD_LIMIT + 1), "application/octet-stream")})
    assert over.status_code == 413 and over.json()["error"]["code"] == "file_too_large"
