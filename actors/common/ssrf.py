"""The SSRF guard every server-side fetch goes through.

URLs reach us from model output and from web pages, so a fetch must never be a way into the
owner's network or the cloud metadata service. The rules:

* only http and https, no userinfo, no odd characters, no numeric host spellings other than the
  canonical dotted quad;
* the host is resolved once and EVERY address must be public (one private answer among public
  ones refuses the whole host, since the connection could land on any of them);
* the socket goes to one of the addresses that were checked, never to the result of a second
  lookup, so DNS rebinding between check and connect changes nothing. The request still carries
  the original Host header and TLS server name, so virtual hosting and certificates work;
* redirects are followed by hand, at most ``MAX_REDIRECTS``, and each hop is checked afresh.

Tests need a "public" address that really is a local server: the resolver is injectable and
``connect_override`` maps a checked public address to the socket address actually dialled.
The guard still validates the public address; only the dial target changes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from html.parser import HTMLParser
from typing import Any, Union
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx
from pydantic import BaseModel, Field

MAX_REDIRECTS: int = 5
MAX_URL_LENGTH: int = 2048
USER_AGENT: str = "Iriis/0.1 (personal agent; +fetch)"
REDIRECT_STATUSES: frozenset[int] = frozenset({301, 302, 303, 307, 308})

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Resolver = Callable[[str], Awaitable[Sequence[str]]]
ResolverLike = Union[Resolver, Mapping[str, Union[str, Sequence[str]]]]


class FetchError(Exception):
    """The fetch failed for an ordinary reason (timeout, refused connection, bad response)."""


class SsrfError(FetchError, ValueError):
    """The guard refused the URL or an address; the message says what and why."""


# --------------------------------------------------------------------------- addresses

_METADATA_ADDRESSES: frozenset[IPAddress] = frozenset({
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, DigitalOcean...
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task credentials
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
})

# Names refused before any lookup: they are the metadata service or this machine whatever DNS
# says, and a split-horizon resolver may answer them with something that looks public.
_BLOCKED_NAMES: frozenset[str] = frozenset({
    "localhost", "metadata.google.internal", "metadata.goog", "metadata", "instance-data",
})

# Explicit lists instead of ``ipaddress``'s is_private/is_global: those also flag the
# documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24), which are harmless to allow and
# are exactly the "public-looking" addresses tests need.
_V4_BLOCKED: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple(
    (ipaddress.IPv4Network(net), reason) for net, reason in (
        ("0.0.0.0/8", "unspecified / 'this network'"),
        ("10.0.0.0/8", "private network (10/8)"),
        ("100.64.0.0/10", "carrier-grade NAT (100.64/10)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private network (172.16/12)"),
        ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
        ("192.168.0.0/16", "private network (192.168/16)"),
        ("198.18.0.0/15", "reserved (benchmarking)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved / broadcast"),
    )
)

_V6_BLOCKED: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.IPv6Network(net), reason) for net, reason in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "reserved (discard-only)"),
        ("fc00::/7", "unique-local (private) IPv6"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated, private)"),
        ("ff00::/8", "multicast"),
    )
)

_V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_V4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")


def _parse_ip(ip: str | IPAddress) -> IPAddress:
    if isinstance(ip, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        return ip
    text = str(ip).strip().strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise SsrfError(f"{text!r} is not an IP address") from None


def _embedded_v4(addr: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """IPv4 addresses an IPv6 address carries, with the name of the form (for the message)."""
    low32 = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if addr in _V4_MAPPED:
        found.append(("IPv4-mapped", low32))
    elif addr in _V4_TRANSLATED:
        found.append(("IPv4-translated", low32))
    elif addr in _V4_COMPATIBLE:
        found.append(("IPv4-compatible", low32))
    elif addr in _NAT64:
        found.append(("NAT64", low32))
    elif addr in _SIX_TO_FOUR and addr.sixtofour is not None:
        found.append(("6to4", addr.sixtofour))
    elif addr in _TEREDO and addr.teredo is not None:
        server, client = addr.teredo
        found.extend([("Teredo server", server), ("Teredo client", client)])
    return found


def _refusal(addr: IPAddress) -> str | None:
    """Why ``addr`` must not be reached, or None when it is public."""
    if addr in _METADATA_ADDRESSES:
        return "cloud metadata endpoint"
    if isinstance(addr, ipaddress.IPv4Address):
        for net4, reason in _V4_BLOCKED:
            if addr in net4:
                return reason
        return None
    # :: and ::1 sit inside the IPv4-compatible block, so the plain list goes first.
    for net6, reason in _V6_BLOCKED:
        if addr in net6:
            return reason
    for form, inner in _embedded_v4(addr):
        inner_reason = _refusal(inner)
        if inner_reason is not None:
            return f"{form} form of {inner} ({inner_reason})"
    return None


def check_address(ip: str | IPAddress) -> None:
    """Refuse an address a server-side fetch must not reach; return quietly if it is public."""
    addr = _parse_ip(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id:
        addr = ipaddress.IPv6Address(str(addr).split("%", 1)[0])
    reason = _refusal(addr)
    if reason is not None:
        raise SsrfError(f"{addr} is refused: {reason}")


# --------------------------------------------------------------------------- URLs

class UrlTarget(BaseModel):
    """What ``check_url`` found: the parts the fetch uses, after the syntactic checks."""

    url: str
    scheme: str
    host: str  # as sent on the wire (IDNA ASCII for names, bare text for IP literals)
    port: int
    literal_ip: str | None = None


_FORBIDDEN_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The address the C library would read from a numeric host like ``0x7f.1`` or ``2130706433``.

    Mirrors inet_aton: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last part
    fills the remaining bytes. None when the text is not a valid number of that shape.
    """
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        try:
            if part.startswith(("0x", "0X")):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            else:
                values.append(int(part, 10))
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def _raw_authority_host(url: str) -> str:
    """The host text exactly as written, before any parser normalises it."""
    parts = urlsplit(url)
    netloc = parts.netloc
    host = netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if ":" in host else host


def check_url(url: str) -> UrlTarget:
    """The syntactic checks: scheme, characters, userinfo, host form. No DNS here."""
    if not isinstance(url, str) or not url:
        raise SsrfError("no URL given")
    if len(url) > MAX_URL_LENGTH:
        raise SsrfError(f"URL is longer than {MAX_URL_LENGTH} characters")
    if _FORBIDDEN_CHARS.search(url):
        raise SsrfError("URL contains whitespace, control characters or backslashes")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise SsrfError(f"scheme {scheme or '(none)'!r} is refused: only http and https are fetched")

    raw_host = _raw_authority_host(url).lower()
    if "%" in raw_host:
        # Percent-escapes and IPv6 zone ids in a host are read differently by different parsers.
        raise SsrfError("host contains '%' (escapes and IPv6 zone ids are refused)")
    bare = raw_host[:-1] if raw_host.endswith(".") else raw_host
    # WHATWG rule: a host whose last label is a number is an IPv4 address in some spelling, and
    # the C resolver would read "0177.0.0.1" or "2130706433" as 127.0.0.1.
    if bare and ":" not in bare and _NUMERIC_LABEL.match(bare.rsplit(".", 1)[-1]):
        decoded = _inet_aton(bare)
        if decoded is None:
            raise SsrfError(f"host {raw_host!r} is not a valid IPv4 address")
        if str(decoded) != raw_host:
            reason = _refusal(decoded)
            if reason is not None:
                raise SsrfError(f"host {raw_host!r} is {decoded} and is refused: {reason}")
            raise SsrfError(f"host {raw_host!r} is refused: non-standard spelling of {decoded}; "
                            "write the address as a plain dotted quad")

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise SsrfError(f"malformed URL: {exc}") from None
    if parsed.userinfo:
        raise SsrfError("URLs with user:password@ are refused (they hide the real host)")
    host = parsed.raw_host.decode("ascii").lower()
    if not host:
        raise SsrfError("URL has no host")
    # The two parsers must agree on the host, or the one that sends could reach a host the
    # checks never saw.
    urllib_host = (urlsplit(url).hostname or "").lower()
    if urllib_host != parsed.host.lower():
        raise SsrfError("URL is ambiguous: parsers disagree about its host")

    name = host[:-1] if host.endswith(".") else host
    if name in _BLOCKED_NAMES or name.endswith(".localhost"):
        raise SsrfError(f"host {name!r} is refused: local or metadata host name")

    literal: str | None = None
    try:
        literal_addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        check_address(literal_addr)
        literal = str(literal_addr)
    port = parsed.port if parsed.port is not None else (443 if scheme == "https" else 80)
    if not 0 < port < 65536:
        raise SsrfError(f"port {port} is out of range")
    return UrlTarget(url=str(parsed), scheme=scheme, host=host, port=port, literal_ip=literal)


def _host_allowed(host: str, allow_hosts: set[str] | None) -> bool:
    if allow_hosts is None:
        return True
    name = host.rstrip(".")
    for entry in allow_hosts:
        entry = entry.lower().rstrip(".")
        if entry.startswith("*.") and name.endswith(entry[1:]):
            return True
        if name == entry:
            return True
    return False


# --------------------------------------------------------------------------- resolving

async def system_resolver(host: str) -> list[str]:
    """The system's getaddrinfo, off the event loop."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise FetchError(f"could not resolve {host!r}: {exc.strerror or exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def static_resolver(mapping: Mapping[str, str | Sequence[str]],
                    fallback: Resolver | None = None) -> Resolver:
    """A resolver answering from a fixed table, for tests and their env hooks.

    Names not in the table go to ``fallback``; without one they do not resolve, so a test can
    never reach real DNS by accident.
    """
    table = {k.lower().rstrip("."): ([v] if isinstance(v, str) else list(v)) for k, v in mapping.items()}

    async def resolve(host: str) -> list[str]:
        found = table.get(host.lower().rstrip("."))
        if found is not None:
            return list(found)
        if fallback is not None:
            return list(await fallback(host))
        raise FetchError(f"could not resolve {host!r}")

    return resolve


def _as_resolver(resolver: ResolverLike | None) -> Resolver:
    if resolver is None:
        return system_resolver
    if isinstance(resolver, Mapping):
        return static_resolver(resolver)
    return resolver


async def resolve_checked(host: str, resolver: ResolverLike | None = None) -> list[str]:
    """Resolve ``host`` and refuse it unless every address is public."""
    addresses = list(await _as_resolver(resolver)(host))
    if not addresses:
        raise FetchError(f"could not resolve {host!r}")
    checked: list[str] = []
    for address in addresses:
        try:
            check_address(address)
        except SsrfError as exc:
            raise SsrfError(f"host {host!r} resolves to {exc}") from None
        checked.append(str(_parse_ip(address)))
    return checked


# --------------------------------------------------------------------------- pinned transport

class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Dials only the checked addresses for one host; anything else is refused outright."""

    def __init__(self, host: str, addresses: Sequence[str],
                 connect_override: Mapping[str, tuple[str, int]] | None) -> None:
        self._host = host
        self._addresses = list(addresses)
        self._override = dict(connect_override or {})
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        if host.lower() != self._host:
            raise SsrfError(f"connection to unchecked host {host!r} refused")
        last: Exception | None = None
        for address in self._addresses:
            target_host, target_port = self._override.get(address, (address, port))
            try:
                return await self._inner.connect_tcp(target_host, target_port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise SsrfError("unix sockets are refused")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _map_error(exc: Exception) -> FetchError:
    if isinstance(exc, SsrfError):
        return exc
    if isinstance(exc, httpcore.TimeoutException):
        return FetchError("timed out")
    if isinstance(exc, httpcore.ConnectError):
        return FetchError(f"could not connect: {exc or 'connection refused'}")
    return FetchError(f"{type(exc).__name__}: {exc}")


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_stream():
                yield chunk
        except httpcore.NetworkError as exc:
            raise _map_error(exc) from None
        except httpcore.TimeoutException as exc:
            raise _map_error(exc) from None
        except httpcore.ProtocolError as exc:
            raise _map_error(exc) from None

    async def aclose(self) -> None:
        await self._response.aclose()


class _PinnedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose connections go to pre-checked addresses.

    httpcore takes the Host header from the request and the TLS server name from the URL's
    host, and only asks the network backend for a socket, so pinning at the backend keeps both
    the name-based parts and certificate checks intact.
    """

    def __init__(self, host: str, addresses: Sequence[str],
                 connect_override: Mapping[str, tuple[str, int]] | None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(),
            max_connections=4, retries=0, http1=True, http2=False,
            network_backend=_PinnedBackend(host, addresses, connect_override),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host,
                             port=request.url.port, target=request.url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
                httpcore.UnsupportedProtocol) as exc:
            raise _map_error(exc) from None
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_ResponseStream(response), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()


# --------------------------------------------------------------------------- fetching

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml",
               "application/javascript", "application/rss+xml", "application/atom+xml")


def _is_text(content_type: str) -> bool:
    base = content_type.split(";", 1)[0].strip().lower()
    return base.startswith(_TEXT_TYPES) or base.endswith(("+json", "+xml")) or not base


class FetchResult(BaseModel):
    url: str
    final_url: str
    status: int
    content_type: str
    content: bytes = b""
    text: str | None = None  # decoded body when the type is textual, else None
    redirects: list[str] = Field(default_factory=list)
    truncated: bool = False


async def _one_hop(target: UrlTarget, addresses: Sequence[str],
                   connect_override: Mapping[str, tuple[str, int]] | None,
                   max_bytes: int, timeout: float,
                   ssl_context: ssl.SSLContext | None) -> tuple[httpx.Response, bytes, bool]:
    transport = _PinnedTransport(target.host, addresses, connect_override, ssl_context)
    async with httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False,
                                 timeout=timeout) as client:
        headers = {"User-Agent": USER_AGENT, "Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
        async with client.stream("GET", target.url, headers=headers) as response:
            if response.status_code in REDIRECT_STATUSES:
                return response, b"", False
            body = bytearray()
            truncated = False
            async for chunk in response.aiter_bytes():
                room = max_bytes - len(body)
                body.extend(chunk[:room])
                if len(chunk) > room:
                    truncated = True
                    break
            return response, bytes(body), truncated


async def safe_fetch(url: str, *, resolver: ResolverLike | None = None, max_bytes: int = 2_000_000,
                     timeout: float = 15, allow_hosts: set[str] | None = None,
                     connect_override: Mapping[str, tuple[str, int]] | None = None,
                     ssl_context: ssl.SSLContext | None = None) -> FetchResult:
    """GET ``url`` under the guard, following at most ``MAX_REDIRECTS`` re-checked redirects.

    ``allow_hosts`` narrows the reachable hosts further (exact names, or ``*.example.com`` for
    subdomains); it never exempts a host from the address checks. ``connect_override`` is for
    tests only: it maps a checked public address to the (host, port) actually dialled.
    ``ssl_context`` replaces the default (certifi) trust store, e.g. for a test CA.
    Raises SsrfError for refusals and FetchError for ordinary failures.
    """
    try:
        async with asyncio.timeout(timeout):
            return await _fetch(url, resolver, max_bytes, timeout, allow_hosts, connect_override,
                                ssl_context)
    except TimeoutError:
        raise FetchError(f"timed out after {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise FetchError(f"{type(exc).__name__}: {exc}") from None


async def _fetch(url: str, resolver: ResolverLike | None, max_bytes: int, timeout: float,
                 allow_hosts: set[str] | None,
                 connect_override: Mapping[str, tuple[str, int]] | None,
                 ssl_context: ssl.SSLContext | None) -> FetchResult:
    redirects: list[str] = []
    current = url
    while True:
        target = check_url(current)
        if not _host_allowed(target.host, allow_hosts):
            raise SsrfError(f"host {target.host!r} is not in the allowed hosts")
        if target.literal_ip is not None:
            addresses = [target.literal_ip]
        else:
            addresses = await resolve_checked(target.host.rstrip("."), resolver)
        response, body, truncated = await _one_hop(target, addresses, connect_override,
                                                   max_bytes, timeout, ssl_context)
        location = response.headers.get("location")
        if response.status_code in REDIRECT_STATUSES and location:
            if len(redirects) >= MAX_REDIRECTS:
                raise SsrfError(f"too many redirects (more than {MAX_REDIRECTS})")
            # Location may be relative; it is resolved against the URL that sent it.
            current = urljoin(target.url, location.strip())
            redirects.append(current)
            continue
        content_type = response.headers.get("content-type", "")
        text: str | None = None
        if _is_text(content_type):
            try:
                text = body.decode(response.charset_encoding or "utf-8", errors="replace")
            except LookupError:  # the server named a charset Python does not know
                text = body.decode("utf-8", errors="replace")
        return FetchResult(url=url, final_url=target.url, status=response.status_code,
                           content_type=content_type, content=body, text=text,
                           redirects=redirects, truncated=truncated)


# --------------------------------------------------------------------------- HTML helpers

_SKIP_TAGS = frozenset({"script", "style", "noscript", "nav", "template", "svg", "canvas",
                        "iframe", "head", "select", "button", "object"})
_BLOCK_TAGS = frozenset({"p", "div", "section", "article", "main", "header", "footer", "aside",
                         "ul", "ol", "li", "br", "tr", "table", "blockquote", "pre", "dd", "dt",
                         "dl", "figcaption", "figure", "hr", "address", "details", "summary",
                         "h1", "h2", "h3", "h4", "h5", "h6", "td", "th"})
_VOID_TAGS = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col",
                        "embed", "source", "track", "wbr"})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping:
            if tag == self._skipping[-1]:
                self._skipping.append(tag)
            return
        hidden = any(k == "hidden" or (k == "aria-hidden" and v == "true") for k, v in attrs)
        if tag in _SKIP_TAGS or (hidden and tag not in _VOID_TAGS):
            self._skipping.append(tag)
            return
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            self.parts.append("#" * int(tag[1]) + " ")
        elif tag == "li":
            self.parts.append("- ")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._skipping and tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag == self._skipping[-1]:
                self._skipping.pop()
            return
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def readable_text(html: str) -> str:
    """The words a person would read on the page: headings, paragraphs, lists, link text."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines: list[str] = []
    for raw in "".join(parser.parts).split("\n"):
        line = " ".join(raw.split())
        if line and line not in ("-", "#", "##", "###", "####", "#####", "######"):
            lines.append(line)
    return "\n".join(lines)


class _MetaExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.meta: dict[str, str] = {}
        self.title: str = ""
        self._in_title = False
        self._title_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self._title_done:
            self._in_title = True
        elif tag == "meta":
            values = {k.lower(): (v or "") for k, v in attrs}
            key = (values.get("property") or values.get("name") or "").strip().lower()
            if key and "content" in values and key not in self.meta:
                self.meta[key] = values["content"].strip()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title = False
            self._title_done = True

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


def link_preview(html: str, url: str) -> dict[str, str | None]:
    """Title, description, image and site name from OpenGraph, Twitter cards or plain HTML."""
    parser = _MetaExtractor()
    parser.feed(html)
    parser.close()
    meta = parser.meta

    def first(*keys: str) -> str | None:
        for key in keys:
            value = " ".join(meta.get(key, "").split())
            if value:
                return value
        return None

    title = first("og:title", "twitter:title") or (" ".join(parser.title.split()) or None)
    image = first("og:image", "og:image:url", "og:image:secure_url", "twitter:image")
    if image is not None:
        image = urljoin(url, image)
        # A preview image is shown to a person; only web URLs, never javascript: or data:.
        if urlsplit(image).scheme not in ("http", "https"):
            image = None
    site_name = first("og:site_name", "application-name") or (urlsplit(url).hostname or None)
    return {
        "title": title,
        "description": first("og:description", "description", "twitter:description"),
        "image": image,
        "site_name": site_name,
    }
