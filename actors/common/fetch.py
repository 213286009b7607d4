"""Fetching a URL under the SSRF guard (actors.common.ssrf).

* The host is resolved once and checked; the socket goes to one of the addresses that were
  checked, never to the result of a second lookup, so DNS rebinding between check and connect
  changes nothing. The request still carries the original Host header and TLS server name, so
  virtual hosting and certificates work;
* redirects are followed by hand, at most ``MAX_REDIRECTS``, and each hop is checked afresh.

Tests need a "public" address that really is a local server: ``connect_override`` maps a
checked public address to the socket address actually dialled. The guard still validates the
public address; only the dial target changes.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urljoin

import httpcore
import httpx
from pydantic import BaseModel, Field

from actors.common.ssrf import (
    FetchError, ResolverLike, SsrfError, UrlTarget, check_url, host_allowed, resolve_checked)

MAX_REDIRECTS: int = 5
USER_AGENT: str = "Iriis/0.1 (personal agent; +fetch)"
REDIRECT_STATUSES: frozenset[int] = frozenset({301, 302, 303, 307, 308})


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
        if not host_allowed(target.host, allow_hosts):
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
