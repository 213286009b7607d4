"""The SSRF guard: refused addresses and URLs, redirect chains, pinning, and a real fetch.

"Public" hosts here resolve (through the injected resolver) to documentation addresses in
203.0.113.0/24, and the connect map sends those to a real HTTP server on 127.0.0.1. The guard
still sees and checks the public address; only the socket goes to the local server.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from actors.common.fetch import MAX_REDIRECTS, safe_fetch
from actors.common.html import link_preview, readable_text
from actors.common.ssrf import FetchError, SsrfError, check_address, check_url

PUBLIC = "203.0.113.10"
PUBLIC2 = "203.0.113.11"

PAGE = """<!doctype html><html><head><title>Plain title</title>
<meta property="og:title" content="OG title"><meta name="description" content="A short page.">
<meta property="og:image" content="/img/cover.png"><meta property="og:site_name" content="Example Site">
<style>body { color: red }</style><script>var secret = "do-not-show";</script></head>
<body><nav><a href="/">Home</a> <a href="/about">Menu item</a></nav>
<h1>Main heading</h1><p>First   paragraph with <a href="/x">a link</a>.</p>
<ul><li>one</li><li>two</li></ul><div hidden>hidden text</div></body></html>"""


@dataclass
class Seen:
    path: str
    host: str


@dataclass
class LocalSite:
    port: int
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def paths(self) -> list[str]:
        with self.lock:
            return [s.path for s in self.seen]

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()


def _handler(site_ref: list[LocalSite]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            pass

        def _send(self, status: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8",
                  location: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if location is not None:
                self.send_header("Location", location)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            site = site_ref[0]
            with site.lock:
                site.seen.append(Seen(self.path, self.headers.get("Host", "")))
            path = self.path
            if path == "/page":
                self._send(200, PAGE.encode())
            elif path == "/to-loopback":
                self._send(302, location=f"http://127.0.0.1:{site.port}/secret")
            elif path == "/to-metadata":
                self._send(302, location="http://169.254.169.254/latest/meta-data/")
            elif path == "/hop1":
                self._send(302, location="http://public2.example/hop2")
            elif path == "/hop2":
                self._send(301, location="http://internal.example/secret")
            elif path.startswith("/loop/"):
                self._send(302, location=f"/loop/{int(path.rsplit('/', 1)[1]) + 1}")
            elif path.startswith("/chain/"):
                n = int(path.rsplit("/", 1)[1])
                if n < MAX_REDIRECTS:
                    self._send(307, location=f"/chain/{n + 1}")
                else:
                    self._send(200, b"end of chain", "text/plain")
            elif path == "/relative":
                self._send(302, location="page")
            elif path == "/big":
                self._send(200, b"x" * 10_000, "text/plain")
            elif path == "/binary":
                self._send(200, b"\x89PNG\r\n\x1a\n\x00\x00", "image/png")
            else:
                self._send(404, b"not here", "text/plain")

    return Handler


@pytest.fixture(scope="module")
def site() -> Iterator[LocalSite]:
    ref: list[LocalSite] = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    ref.append(LocalSite(port=httpd.server_address[1]))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield ref[0]
    httpd.shutdown()
    httpd.server_close()


RESOLVE: dict[str, list[str]] = {
    "public.example": [PUBLIC],
    "public2.example": [PUBLIC2],
    "internal.example": ["10.0.0.5"],
    "mixed.example": ["203.0.113.12", "192.168.1.1"],
    "v6loop.example": ["::1"],
    "mapped.example": ["::ffff:169.254.169.254"],
}


def _connect(site: LocalSite) -> dict[str, tuple[str, int]]:
    return {PUBLIC: ("127.0.0.1", site.port), PUBLIC2: ("127.0.0.1", site.port)}


# --------------------------------------------------------------------------- refusals

REFUSED: list[tuple[str, str]] = [
    ("http://127.0.0.1/", "loopback"),
    ("http://127.8.9.10:8080/admin", "loopback"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://192.168.1.1/router", "private"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://169.254.10.10/", "link-local"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://224.0.0.1/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://[::1]/", "loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fd12:3456::1]/", "unique-local"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "metadata"),
    ("http://[ff02::1]/", "multicast"),
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped form of 127.0.0.1"),
    ("http://[::ffff:a9fe:a9fe]/", "IPv4-mapped form of 169.254.169.254"),
    ("http://[::10.0.0.1]/", "IPv4-compatible form of 10.0.0.1"),
    ("http://[64:ff9b::192.168.0.1]/", "NAT64 form of 192.168.0.1"),
    ("http://[2002:7f00:1::]/", "6to4 form of 127.0.0.1"),
    ("http://[2002:a9fe:a9fe::1]/", "6to4 form of 169.254.169.254"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "metadata"),
    ("http://0x08080808/", "non-standard spelling"),
    ("http://127.0.0.1./", "loopback"),
    ("http://%31%32%37.0.0.1/", "'%'"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata host name"),
    ("http://localhost:8080/", "local or metadata host name"),
    ("http://app.localhost/", "local or metadata host name"),
    ("http://public.example@127.0.0.1/", "user:password@"),
    ("http://user:pw@public.example/", "user:password@"),
    ("http://public.example\\@127.0.0.1/", "backslashes"),
    ("http://mixed.example/", "192.168.1.1 is refused"),
    ("http://internal.example/", "10.0.0.5 is refused"),
    ("http://v6loop.example/", "::1 is refused: loopback"),
    ("http://mapped.example/", "IPv4-mapped form of 169.254.169.254"),
    ("ftp://public.example/file", "scheme 'ftp'"),
    ("file:///etc/passwd", "scheme 'file'"),
    ("gopher://public.example:70/_x", "scheme 'gopher'"),
    ("javascript:alert(1)", "scheme 'javascript'"),
    ("data:text/html,<h1>x</h1>", "scheme 'data'"),
    ("//public.example/page", "scheme '(none)'"),
    ("http://public.example:0/", "port 0"),
    ("http://[::1/", "malformed URL"),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED)
async def test_refused_before_any_connection(url: str, reason: str, site: LocalSite) -> None:
    site.clear()
    with pytest.raises(SsrfError) as caught:
        await safe_fetch(url, resolver=RESOLVE, connect_override=_connect(site), timeout=5)
    assert reason in str(caught.value)
    assert site.paths() == []


def test_enough_refusal_cases() -> None:
    assert len(REFUSED) >= 20


@pytest.mark.parametrize("address", [
    "8.8.8.8", "1.1.1.1", PUBLIC, "2606:4700:4700::1111", "64:ff9b::8.8.8.8", "2002:808:808::1",
    "::ffff:8.8.8.8", "172.32.0.1", "100.128.0.1", "192.169.0.1",
])
def test_public_addresses_pass(address: str) -> None:
    check_address(address)
    check_address(ipaddress.ip_address(address))


def test_check_address_says_why() -> None:
    with pytest.raises(SsrfError, match="cloud metadata endpoint"):
        check_address("169.254.169.254")
    with pytest.raises(SsrfError, match="not an IP address"):
        check_address("public.example")
    with pytest.raises(SsrfError, match="link-local"):
        check_address("fe80::1%eth0")


def test_check_url_normalises_without_dns() -> None:
    target = check_url("HTTP://Public.Example/a?b=1")
    assert (target.scheme, target.host, target.port, target.literal_ip) == ("http", "public.example", 80, None)
    assert check_url("https://bücher.example/").host == "xn--bcher-kva.example"
    assert check_url("https://8.8.8.8:8443/").literal_ip == "8.8.8.8"


# --------------------------------------------------------------------------- real fetches

async def test_public_looking_address_reaches_local_server(site: LocalSite) -> None:
    site.clear()
    result = await safe_fetch("http://public.example/page", resolver=RESOLVE,
                              connect_override=_connect(site))
    assert result.status == 200
    assert result.final_url == "http://public.example/page"
    assert result.content_type.startswith("text/html")
    assert result.text is not None and "Main heading" in result.text
    assert result.redirects == []
    # The socket went to the local server, but the request still names the checked host.
    assert [(s.path, s.host) for s in site.seen] == [("/page", "public.example")]


async def test_the_local_server_itself_is_refused(site: LocalSite) -> None:
    site.clear()
    with pytest.raises(SsrfError, match="loopback"):
        await safe_fetch(f"http://127.0.0.1:{site.port}/page", resolver=RESOLVE)
    assert site.paths() == []


async def test_connects_to_checked_address_not_a_second_lookup(site: LocalSite) -> None:
    """DNS rebinding: a second answer of 127.0.0.1 must never be used."""
    calls: list[str] = []

    async def rebinding(host: str) -> list[str]:
        calls.append(host)
        return [PUBLIC] if len(calls) == 1 else ["127.0.0.1"]

    site.clear()
    result = await safe_fetch("http://public.example/page", resolver=rebinding,
                              connect_override=_connect(site))
    assert result.status == 200
    assert calls == ["public.example"]


async def test_redirect_to_loopback_refused(site: LocalSite) -> None:
    site.clear()
    with pytest.raises(SsrfError, match="loopback"):
        await safe_fetch("http://public.example/to-loopback", resolver=RESOLVE,
                         connect_override=_connect(site))
    assert site.paths() == ["/to-loopback"]


async def test_redirect_to_metadata_refused(site: LocalSite) -> None:
    with pytest.raises(SsrfError, match="metadata"):
        await safe_fetch("http://public.example/to-metadata", resolver=RESOLVE,
                         connect_override=_connect(site))


async def test_public_then_public_then_private_refused(site: LocalSite) -> None:
    site.clear()
    with pytest.raises(SsrfError, match="internal.example.*10.0.0.5"):
        await safe_fetch("http://public.example/hop1", resolver=RESOLVE,
                         connect_override=_connect(site))
    assert [(s.path, s.host) for s in site.seen] == [("/hop1", "public.example"),
                                                      ("/hop2", "public2.example")]


async def test_too_many_redirects_refused(site: LocalSite) -> None:
    site.clear()
    with pytest.raises(SsrfError, match="too many redirects"):
        await safe_fetch("http://public.example/loop/0", resolver=RESOLVE,
                         connect_override=_connect(site))
    assert site.paths() == [f"/loop/{n}" for n in range(MAX_REDIRECTS + 1)]


async def test_exactly_max_redirects_allowed(site: LocalSite) -> None:
    result = await safe_fetch("http://public.example/chain/0", resolver=RESOLVE,
                              connect_override=_connect(site))
    assert result.status == 200 and result.text == "end of chain"
    assert len(result.redirects) == MAX_REDIRECTS


async def test_relative_redirect_followed(site: LocalSite) -> None:
    site.clear()
    result = await safe_fetch("http://public.example/relative", resolver=RESOLVE,
                              connect_override=_connect(site))
    assert result.status == 200
    assert result.url == "http://public.example/relative"
    assert result.final_url == "http://public.example/page"
    assert result.redirects == ["http://public.example/page"]
    assert site.paths() == ["/relative", "/page"]


async def test_max_bytes_truncates(site: LocalSite) -> None:
    result = await safe_fetch("http://public.example/big", resolver=RESOLVE,
                              connect_override=_connect(site), max_bytes=1000)
    assert result.truncated and len(result.content) == 1000


async def test_binary_has_no_text(site: LocalSite) -> None:
    result = await safe_fetch("http://public.example/binary", resolver=RESOLVE,
                              connect_override=_connect(site))
    assert result.text is None and result.content.startswith(b"\x89PNG")


async def test_allow_hosts_narrows_but_never_exempts(site: LocalSite) -> None:
    ok = await safe_fetch("http://public.example/page", resolver=RESOLVE,
                          connect_override=_connect(site), allow_hosts={"public.example"})
    assert ok.status == 200
    with pytest.raises(SsrfError, match="not in the allowed hosts"):
        await safe_fetch("http://public2.example/page", resolver=RESOLVE,
                         connect_override=_connect(site), allow_hosts={"public.example"})
    with pytest.raises(SsrfError, match="loopback"):
        await safe_fetch("http://127.0.0.1/", allow_hosts={"127.0.0.1"})


async def test_unresolvable_and_unreachable_are_fetch_errors(site: LocalSite) -> None:
    with pytest.raises(FetchError, match="could not resolve") as caught:
        await safe_fetch("http://nowhere.example/", resolver=RESOLVE)
    assert not isinstance(caught.value, SsrfError)
    # A checked address with no override dials the (closed) port the override map gives.
    with pytest.raises(FetchError, match="could not connect"):
        await safe_fetch("http://public.example/", resolver=RESOLVE,
                         connect_override={PUBLIC: ("127.0.0.1", 1)}, timeout=5)
    # A name the system resolver cannot even encode (an empty label) is one that does not resolve.
    with pytest.raises(FetchError, match="could not resolve"):
        await safe_fetch("http://a..b/", timeout=5)


def _self_signed(name: str, directory: Path) -> tuple[Path, Path, str]:
    """A throwaway certificate for ``name``: (cert file, key file, PEM text for the client)."""
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert_file.write_bytes(pem)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, pem.decode()


@pytest.mark.parametrize(("cert_name", "ok"), [("public.example", True), ("other.example", False)])
async def test_https_pins_address_but_keeps_sni_and_certificate_name(
        cert_name: str, ok: bool, tmp_path: Path) -> None:
    cert_file, key_file, pem = _self_signed(cert_name, tmp_path)
    server_names: list[str | None] = []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert_file, key_file)
    server_ctx.sni_callback = lambda sock, name, ctx: server_names.append(name)  # type: ignore[assignment, misc]
    ref: list[LocalSite] = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    httpd.socket = server_ctx.wrap_socket(httpd.socket, server_side=True)
    ref.append(LocalSite(port=httpd.server_address[1]))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        client_ctx = ssl.create_default_context(cadata=pem)
        connect = {PUBLIC: ("127.0.0.1", ref[0].port)}
        if ok:
            result = await safe_fetch("https://public.example/page", resolver=RESOLVE,
                                      connect_override=connect, ssl_context=client_ctx, timeout=10)
            assert result.status == 200 and result.text is not None and "Main heading" in result.text
            assert [(s.path, s.host) for s in ref[0].seen] == [("/page", "public.example")]
        else:
            # The certificate is checked against the URL's name, not the dialled address.
            with pytest.raises(FetchError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
                await safe_fetch("https://public.example/page", resolver=RESOLVE,
                                 connect_override=connect, ssl_context=client_ctx, timeout=10)
            assert ref[0].seen == []
        assert server_names[:1] == ["public.example"]
    finally:
        httpd.shutdown()
        httpd.server_close()


# --------------------------------------------------------------------------- HTML helpers

def test_readable_text() -> None:
    text = readable_text(PAGE)
    assert text.splitlines() == ["# Main heading", "First paragraph with a link.", "- one", "- two"]
    for gone in ("do-not-show", "color: red", "Menu item", "hidden text", "Plain title"):
        assert gone not in text


def test_link_preview() -> None:
    preview = link_preview(PAGE, "https://public.example/articles/1")
    assert preview == {"title": "OG title", "description": "A short page.",
                       "image": "https://public.example/img/cover.png", "site_name": "Example Site"}
    bare = link_preview("<title> Only  a title </title><meta property='og:image' content='javascript:x'>",
                        "http://public.example/")
    assert bare == {"title": "Only a title", "description": None, "image": None,
                    "site_name": "public.example"}
