"""MCP server "web": read a page, preview a link and (when configured) search the web.

Run over stdio: ``python -m actors.tools.servers.web``. Every fetch of a URL that came from the
model or from a page goes through the SSRF guard (actors/common/ssrf.py).

Environment:

* ``IRIIS_SEARCH_URL`` and ``IRIIS_SEARCH_KEY``: the search endpoint and its key. Without both,
  ``web_search`` is not registered at all (and the server instructions say so), so the model
  never sees a tool that can only fail. ``IRIIS_SEARCH_STYLE`` is ``brave`` (Brave Search API:
  ``X-Subscription-Token`` header, results under ``web.results``) or ``generic`` (bearer key,
  results under ``results``/``items``/``data``); by default ``brave`` when the URL is Brave's.
  The endpoint is the owner's configuration, not model input, so it is called directly rather
  than through the guard (a self-hosted search on the LAN must work).
* ``IRIIS_TEST_RESOLVE`` and ``IRIIS_TEST_CONNECT``: FOR TESTS ONLY, never set them in
  production. ``IRIIS_TEST_RESOLVE=public.example=203.0.113.10,b.example=203.0.113.11`` answers
  those names without DNS (other names still use the system resolver);
  ``IRIIS_TEST_CONNECT=203.0.113.10=127.0.0.1:8123`` dials a local test server when the guard
  has approved 203.0.113.10. Connect targets must be loopback, so the hook cannot be used to
  reach the LAN.
"""

from __future__ import annotations

import html
import ipaddress
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal

import httpx
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from actors.common.fetch import FetchResult, safe_fetch
from actors.common.html import link_preview as extract_preview
from actors.common.html import readable_text
from actors.common.ssrf import FetchError, Resolver, SsrfError, static_resolver, system_resolver

WEB_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                           open_world_hint=True)
DEFAULT_MAX_CHARS = 20_000
MAX_MAX_CHARS = 100_000
SEARCH_TIMEOUT = 15.0

Fetch = Callable[[str], Awaitable[FetchResult]]


class FetchSettings(BaseModel):
    """How this server's fetches are resolved and dialled (test hooks included)."""

    resolve: dict[str, list[str]] = Field(default_factory=dict)
    connect: dict[str, tuple[str, int]] = Field(default_factory=dict)

    def resolver(self) -> Resolver:
        if not self.resolve:
            return system_resolver
        return static_resolver(self.resolve, fallback=system_resolver)


class SearchSettings(BaseModel):
    url: str
    key: str
    style: Literal["brave", "generic"]


def _pairs(text: str, variable: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        if not item.strip():
            continue
        left, sep, right = item.partition("=")
        if not sep or not left.strip() or not right.strip():
            raise ValueError(f"{variable}: expected name=value pairs separated by commas, got {item!r}")
        pairs.append((left.strip().lower(), right.strip()))
    return pairs


def fetch_settings(env: Mapping[str, str]) -> FetchSettings:
    resolve: dict[str, list[str]] = {}
    for host, address in _pairs(env.get("IRIIS_TEST_RESOLVE", ""), "IRIIS_TEST_RESOLVE"):
        resolve.setdefault(host, []).append(address)
    connect: dict[str, tuple[str, int]] = {}
    for address, target in _pairs(env.get("IRIIS_TEST_CONNECT", ""), "IRIIS_TEST_CONNECT"):
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"IRIIS_TEST_CONNECT: target {target!r} must be a loopback address")
        connect[str(ipaddress.ip_address(address))] = (host, int(port))
    return FetchSettings(resolve=resolve, connect=connect)


def search_settings(env: Mapping[str, str]) -> SearchSettings | None:
    url = env.get("IRIIS_SEARCH_URL", "").strip()
    key = env.get("IRIIS_SEARCH_KEY", "").strip()
    if not url or not key:
        return None
    style = env.get("IRIIS_SEARCH_STYLE", "").strip().lower()
    if style not in ("brave", "generic"):
        style = "brave" if "search.brave.com" in url else "generic"
    return SearchSettings(url=url, key=key, style=style)  # type: ignore[arg-type]


class LinkPreview(BaseModel):
    url: str
    title: str | None = None
    description: str | None = None
    image: str | None = None
    site_name: str | None = None


class SearchHit(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = ""
    url: str = ""
    snippet: str = ""


_TAG = re.compile(r"<[^>]+>")


def _plain(text: Any) -> str:
    """Search snippets carry <strong> highlights and entities; the model wants plain words."""
    return " ".join(html.unescape(_TAG.sub("", str(text or ""))).split())


def parse_search_results(payload: Any, style: str) -> list[SearchHit]:
    items: Any = None
    if isinstance(payload, dict):
        web = payload.get("web")
        if isinstance(web, dict):
            items = web.get("results")
        for key in ("results", "items", "data", "organic_results", "hits"):
            if items is None and isinstance(payload.get(key), list):
                items = payload[key]
    elif isinstance(payload, list):
        items = payload
    if not isinstance(items, list):
        raise ToolError("the search service answered in a shape this server does not understand")
    hits: list[SearchHit] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        try:
            hit = SearchHit(
                title=_plain(item.get("title") or item.get("name")),
                url=str(item.get("url") or item.get("link") or item.get("href") or ""),
                snippet=_plain(item.get("snippet") or item.get("description") or item.get("content")
                               or item.get("body") or ""),
            )
        except ValidationError:
            continue
        if hit.url:
            hits.append(hit)
    return hits


def format_hits(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Results for {query!r}:"]
    for n, hit in enumerate(hits, 1):
        lines.append(f"{n}. {hit.title or '(untitled)'}")
        lines.append(f"   {hit.url}")
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
    return "\n".join(lines)


def _refusal(url: str, exc: Exception) -> ToolError:
    if isinstance(exc, SsrfError):
        return ToolError(f"refused to fetch {url} ({exc})")
    return ToolError(f"could not fetch {url}: {exc}")


def _instructions(search: SearchSettings | None) -> str:
    instructions = ("Reads web pages as plain text and previews links. Private, local and "
                    "cloud-metadata addresses are refused.")
    if search is None:
        instructions += (" Web search is not configured on this server (set IRIIS_SEARCH_URL and "
                         "IRIIS_SEARCH_KEY), so there is no web_search tool.")
    return instructions


def _fetcher(fetching: FetchSettings) -> Fetch:
    """The server's one way to fetch a URL: through the SSRF guard, errors as tool errors."""
    resolver = fetching.resolver()
    connect = fetching.connect or None

    async def fetch(url: str) -> FetchResult:
        try:
            result = await safe_fetch(url, resolver=resolver, connect_override=connect)
        except FetchError as exc:
            raise _refusal(url, exc) from None
        if result.status >= 400:
            raise ToolError(f"{result.final_url} answered HTTP {result.status}")
        return result

    return fetch


def _page_text(result: FetchResult, max_chars: int) -> str:
    """A fetched page as the model reads it: a short header, then its readable text."""
    if result.text is None:
        raise ToolError(f"{result.final_url} is {result.content_type or 'binary'}, not text")
    base_type = result.content_type.split(";", 1)[0].strip().lower()
    is_html = base_type in ("text/html", "application/xhtml+xml") or (
        not base_type and "<html" in result.text[:1000].lower())
    body = readable_text(result.text) if is_html else result.text.strip()
    header = [f"URL: {result.final_url}"]
    if result.redirects:
        header.append(f"Redirected from: {result.url}")
    if is_html:
        title = extract_preview(result.text, result.final_url)["title"]
        if title:
            header.append(f"Title: {title}")
    note = ""
    if len(body) > max_chars:
        note = f"\n[truncated: showing {max_chars} of {len(body)} characters]"
        body = body[:max_chars]
    elif result.truncated:
        note = "\n[truncated: the page was larger than the download limit]"
    return "\n".join(header) + "\n\n" + body + note


async def _search_web(settings: SearchSettings, query: str, count: int) -> str:
    """Ask the configured search service; its failures become tool errors the model can read."""
    if settings.style == "brave":
        headers = {"X-Subscription-Token": settings.key, "Accept": "application/json"}
    else:
        headers = {"Authorization": f"Bearer {settings.key}", "Accept": "application/json"}
    try:
        async with httpx.AsyncClient(timeout=SEARCH_TIMEOUT) as client:
            response = await client.get(settings.url, params={"q": query, "count": count},
                                        headers=headers)
    except httpx.HTTPError as exc:
        raise ToolError(f"the search service could not be reached: {type(exc).__name__}") from None
    if response.status_code in (401, 403):
        raise ToolError(f"the search service refused the key (HTTP {response.status_code})")
    if response.status_code >= 400:
        raise ToolError(f"the search service answered HTTP {response.status_code}")
    try:
        payload = response.json()
    except ValueError:
        raise ToolError("the search service did not answer with JSON") from None
    return format_hits(query, parse_search_results(payload, settings.style)[:count])


def _add_page_tools(server: MCPServer, fetch: Fetch) -> None:
    """fetch_url and link_preview: the tool names, signatures and docstrings are the schema."""

    @server.tool(annotations=WEB_READ)
    async def fetch_url(
        url: Annotated[str, Field(description="an http or https URL")],
        max_chars: Annotated[int, Field(ge=200, le=MAX_MAX_CHARS)] = DEFAULT_MAX_CHARS,
    ) -> str:
        """Fetch a web page and return its readable text (scripts, styles and menus removed)."""
        return _page_text(await fetch(url), max_chars)

    @server.tool(annotations=WEB_READ)
    async def link_preview(url: Annotated[str, Field(description="an http or https URL")]) -> LinkPreview:
        """Title, description, image and site name of a link, as a chat app would preview it."""
        result = await fetch(url)
        if result.text is None or "html" not in result.content_type.lower():
            return LinkPreview(url=result.final_url, site_name=httpx.URL(result.final_url).host or None)
        return LinkPreview(url=result.final_url, **extract_preview(result.text, result.final_url))


def _add_search_tool(server: MCPServer, settings: SearchSettings) -> None:
    @server.tool(annotations=WEB_READ)
    async def web_search(
        query: Annotated[str, Field(min_length=1, max_length=400)],
        count: Annotated[int, Field(ge=1, le=10)] = 5,
    ) -> str:
        """Search the web; returns numbered results, each a title, URL and snippet."""
        return await _search_web(settings, query, count)


def create_server(env: Mapping[str, str] | None = None) -> MCPServer:
    env = dict(os.environ if env is None else env)
    fetching = fetch_settings(env)
    search = search_settings(env)
    server = MCPServer("web", instructions=_instructions(search))
    _add_page_tools(server, _fetcher(fetching))
    if search is not None:
        # Registered only when configured, so the model never sees a tool that can only fail.
        _add_search_tool(server, search)
    return server


def main() -> None:
    create_server().run("stdio")


if __name__ == "__main__":
    main()
