"""The core, web and self MCP servers as real stdio subprocesses, driven by the SDK's Client.

One local HTTP server plays three parts: the "public" web site (reached through the web
server's IRIIS_TEST_RESOLVE / IRIIS_TEST_CONNECT hooks), a generic JSON search endpoint, and a
fake Iriis API for the self server.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, TextContent

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "owner-test-key"
SEARCH_KEY = "search-test-key"
PUBLIC = "203.0.113.10"

PAGE = (b"<html><head><title>Test page</title><meta property='og:description' content='About the test.'>"
        b"<script>var hidden = 'script-text';</script></head><body><nav>Menu</nav>"
        b"<h1>Hello from the local site</h1><p>Readable paragraph.</p></body></html>")

NOW = time.time()
ERRORS = [{"ts": NOW - 60, "source": "gateway", "path": "/v1/chat", "error": "RuntimeError: boom",
           "trace": "...", "request": {}}]
AUDIT = [{"ts": NOW - 30, "session_id": "s1", "tool": "calculate", "arguments": {"expression": "1+1"},
          "tier": "read", "confirmed": None, "result": "2", "error": None, "duration_ms": 3.2}]


@dataclass
class Site:
    port: int
    requests: list[tuple[str, str, str]]  # (path, Host, Authorization)
    lock: threading.Lock

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _, _ in self.requests]


def _handler(ref: list[Site]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            pass

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, payload: object) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            site = ref[0]
            auth = self.headers.get("Authorization", "")
            with site.lock:
                site.requests.append((self.path, self.headers.get("Host", ""), auth))
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/page":
                self._send(200, PAGE, "text/html; charset=utf-8")
            elif url.path == "/search":
                if auth != f"Bearer {SEARCH_KEY}":
                    return self._json(401, {"error": "bad key"})
                count = int(query.get("count", ["5"])[0])
                q = query.get("q", [""])[0]
                results = [{"title": f"Result <b>{n}</b> for {q}", "url": f"https://example.org/{n}",
                            "snippet": f"Snippet &amp; text {n}"} for n in range(1, 11)]
                self._json(200, {"results": results[:count]})
            elif url.path.startswith("/v1/"):
                if auth != f"Bearer {API_KEY}":
                    return self._json(401, {"error": {"code": "unauthorized"}})
                if url.path == "/v1/errors":
                    self._json(200, {"data": ERRORS, "count": len(ERRORS)})
                elif url.path == "/v1/audit":
                    self._json(200, {"data": AUDIT, "count": len(AUDIT)})
                else:
                    self._json(404, {"error": {"code": "not_found"}})
            else:
                self._send(404, b"not found", "text/plain")

    return Handler


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    ref: list[Site] = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    ref.append(Site(port=httpd.server_address[1], requests=[], lock=threading.Lock()))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield ref[0]
    httpd.shutdown()
    httpd.server_close()


@asynccontextmanager
async def served(module: str, env: dict[str, str]) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", f"actors.tools.servers.{module}"],
                                   env=env, cwd=str(ROOT))
    async with Client(params, read_timeout_seconds=60) as client:
        yield client


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def _tools(client: Client) -> dict[str, object]:
    listing = await client.list_tools()
    return {tool.name: tool for tool in listing.tools}


async def test_core_server() -> None:
    async with served("core", {"IRIIS_TIMEZONE": "Europe/Paris"}) as client:
        tools = await _tools(client)
        assert set(tools) == {"current_time", "date_add", "date_diff", "calculate"}
        for tool in tools.values():
            assert tool.annotations is not None and tool.annotations.read_only_hint is True  # type: ignore[attr-defined]
        assert "Europe/Paris" in (client.instructions or "")

        now = await client.call_tool("current_time", {})
        assert not now.is_error and "Europe/Paris" in text_of(now)
        tokyo = await client.call_tool("current_time", {"timezone": "Asia/Tokyo"})
        assert "Asia/Tokyo" in text_of(tokyo) and "UTC+09:00" in text_of(tokyo)
        bad_zone = await client.call_tool("current_time", {"timezone": "Mars/Olympus"})
        assert bad_zone.is_error and "unknown time zone" in text_of(bad_zone)

        added = await client.call_tool("date_add", {"date": "2024-01-31", "months": 1})
        assert "= 2024-02-29 (Thursday" in text_of(added)
        later = await client.call_tool("date_add", {"date": "2024-03-30T22:00", "hours": 5, "weeks": 1})
        assert "2024-04-07T03:00" in text_of(later)
        unreadable = await client.call_tool("date_add", {"date": "the day after", "days": 1})
        assert unreadable.is_error and "could not read the date" in text_of(unreadable)

        weeks = await client.call_tool("date_diff", {"start": "2024-01-01", "end": "2024-03-01", "unit": "weeks"})
        assert "8 weeks and 4 days (60 days)" in text_of(weeks)
        hours = await client.call_tool("date_diff", {"start": "2024-01-01T10:00", "end": "2024-01-02",
                                                     "unit": "hours"})
        assert "14 hours" in text_of(hours)
        weekday = await client.call_tool("date_diff", {"start": "today", "end": "next friday"})
        assert not weekday.is_error and "Friday" in text_of(weekday)

        calc = await client.call_tool("calculate", {"expression": "2^10 + 1"})
        assert text_of(calc) == "1025"
        refused = await client.call_tool("calculate", {"expression": "__import__('os').system('id')"})
        assert refused.is_error and "cannot calculate" in text_of(refused)


def _web_env(site: Site, search: bool) -> dict[str, str]:
    env = {"IRIIS_TEST_RESOLVE": f"public.example={PUBLIC}",
           "IRIIS_TEST_CONNECT": f"{PUBLIC}=127.0.0.1:{site.port}"}
    if search:
        env.update({"IRIIS_SEARCH_URL": f"http://127.0.0.1:{site.port}/search",
                    "IRIIS_SEARCH_KEY": SEARCH_KEY, "IRIIS_SEARCH_STYLE": "generic"})
    return env


async def test_web_server_fetches_previews_searches_and_refuses(site: Site) -> None:
    async with served("web", _web_env(site, search=True)) as client:
        tools = await _tools(client)
        assert set(tools) == {"fetch_url", "link_preview", "web_search"}
        for tool in tools.values():
            assert tool.annotations.read_only_hint is True  # type: ignore[attr-defined]

        page = await client.call_tool("fetch_url", {"url": "http://public.example/page"})
        body = text_of(page)
        assert not page.is_error
        assert "URL: http://public.example/page" in body and "Title: Test page" in body
        assert "Hello from the local site" in body and "Readable paragraph." in body
        assert "script-text" not in body and "Menu" not in body
        short = await client.call_tool("fetch_url", {"url": "http://public.example/page", "max_chars": 200})
        assert not short.is_error

        preview = await client.call_tool("link_preview", {"url": "http://public.example/page"})
        assert not preview.is_error
        assert preview.structured_content is not None
        assert preview.structured_content["title"] == "Test page"
        assert preview.structured_content["description"] == "About the test."
        assert preview.structured_content["site_name"] == "public.example"

        before = len(site.paths())
        for url, reason in [("http://127.0.0.1/", "loopback"),
                            ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
                            (f"http://127.0.0.1:{site.port}/page", "loopback"),
                            ("http://[::ffff:10.0.0.1]/", "IPv4-mapped"),
                            ("file:///etc/passwd", "scheme 'file'")]:
            refused = await client.call_tool("fetch_url", {"url": url})
            assert refused.is_error, url
            message = text_of(refused)
            assert "refused to fetch" in message and reason in message, message
        assert len(site.paths()) == before
        missing = await client.call_tool("fetch_url", {"url": "http://public.example/nope"})
        assert missing.is_error and "HTTP 404" in text_of(missing)

        found = await client.call_tool("web_search", {"query": "iriis agent", "count": 2})
        lines = text_of(found).splitlines()
        assert lines == ["Results for 'iriis agent':",
                         "1. Result 1 for iriis agent", "   https://example.org/1", "   Snippet & text 1",
                         "2. Result 2 for iriis agent", "   https://example.org/2", "   Snippet & text 2"]
        with site.lock:
            hosts = {path.split("?")[0]: host for path, host, _ in site.requests}
        assert hosts["/page"] == "public.example"


async def test_web_server_without_search_offers_no_search_tool(site: Site) -> None:
    async with served("web", _web_env(site, search=False)) as client:
        assert set(await _tools(client)) == {"fetch_url", "link_preview"}
        assert "not configured" in (client.instructions or "")


async def test_self_server_reads_the_api(site: Site) -> None:
    env = {"IRIIS_API_URL": f"http://127.0.0.1:{site.port}", "IRIIS_API_KEY": API_KEY, "IRIIS_TIMEZONE": "UTC"}
    async with served("selfinfo", env) as client:
        tools = await _tools(client)
        assert set(tools) == {"recent_errors", "audit_log", "tool_servers"}
        for tool in tools.values():
            assert tool.annotations.read_only_hint is True  # type: ignore[attr-defined]

        errors = text_of(await client.call_tool("recent_errors", {"limit": 5}))
        assert "1 recent error(s)" in errors and "[gateway /v1/chat] RuntimeError: boom" in errors
        audit = text_of(await client.call_tool("audit_log", {}))
        assert 'calculate({"expression": "1+1"}) tier read' in audit and "-> 2" in audit
        servers = await client.call_tool("tool_servers", {})
        assert not servers.is_error and "answered 404" in text_of(servers)
    with site.lock:
        seen = [(path, auth) for path, _, auth in site.requests if path.startswith("/v1/")]
    assert ("/v1/errors?limit=5", f"Bearer {API_KEY}") in seen
    assert ("/v1/tools", f"Bearer {API_KEY}") in seen


async def test_self_server_wrong_key_and_unconfigured(site: Site) -> None:
    env = {"IRIIS_API_URL": f"http://127.0.0.1:{site.port}", "IRIIS_API_KEY": "wrong"}
    async with served("selfinfo", env) as client:
        denied = await client.call_tool("recent_errors", {})
        assert denied.is_error and "refused IRIIS_API_KEY (HTTP 401" in text_of(denied)
    async with served("selfinfo", {}) as client:
        for name in ("recent_errors", "audit_log", "tool_servers"):
            result = await client.call_tool(name, {})
            assert not result.is_error
            assert text_of(result).startswith("Self-inspection is not configured")
