"""The SSRF guard every server-side fetch goes through.

URLs reach us from model output and from web pages, so a fetch must never be a way into the
owner's network or the cloud metadata service. The rules:

* only http and https, no userinfo, no odd characters, no numeric host spellings other than the
  canonical dotted quad (`check_url`);
* the host is resolved once and EVERY address must be public (one private answer among public
  ones refuses the whole host, since the connection could land on any of them)
  (`resolve_checked`, `check_address`);
* the socket goes to one of the addresses that were checked, never to the result of a second
  lookup, and redirects are followed by hand, each hop checked afresh: that is the fetching
  side, in actors.common.fetch (`safe_fetch`).

Tests need a "public" address that really is a local server: the resolver is injectable here,
and `safe_fetch`'s ``connect_override`` maps a checked public address to the socket address
actually dialled.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Union
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from actors.common.errors import IriisError

MAX_URL_LENGTH: int = 2048

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Resolver = Callable[[str], Awaitable[Sequence[str]]]
ResolverLike = Union[Resolver, Mapping[str, Union[str, Sequence[str]]]]


class FetchError(IriisError):
    """The fetch failed for an ordinary reason (timeout, refused connection, bad response)."""

    code = "fetch_failed"


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
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError as exc:  # "http://[::1": an IPv6 bracket left open
        raise SsrfError(f"malformed URL: {exc}") from None
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


def host_allowed(host: str, allow_hosts: set[str] | None) -> bool:
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
    except UnicodeError as exc:  # a name IDNA cannot encode ("a..b": an empty label)
        raise FetchError(f"could not resolve {host!r}: {exc}") from None
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
