"""The wire between machines: TLS pinned by the certificate's SHA-256 fingerprint.

The host makes a self-signed certificate once and puts its fingerprint in the pairing token.
A peer accepts a connection only from a server presenting exactly that certificate, and checks
it before sending a byte, so no certificate authority is involved and nobody without the token
can pose as the host. Both ends speak plain HTTP on localhost; this module carries the bytes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import fcntl
import hashlib
import ipaddress
import logging
import socket
import ssl
import struct
from pathlib import Path

from actors.common.errors import IriisError

log = logging.getLogger(__name__)

CERT_NAME, KEY_NAME = "relay-cert.pem", "relay-key.pem"
# Connecting and the TLS handshake to one candidate address (10 s: a loaded host took over 5).
CONNECT_TIMEOUT = 10.0


class TunnelError(IriisError):
    """The host could not be reached, or presented a certificate other than the pinned one."""

    code = "tunnel_error"


def fingerprint(cert_der: bytes) -> str:
    return hashlib.sha256(cert_der).hexdigest()


def ensure_certificate(folder: Path) -> tuple[Path, Path, str]:
    """The host's certificate and key (made on first use), and the certificate's fingerprint."""
    from cryptography import x509  # lazy: cryptography ~0.1 s; new certificate only
    from cryptography.hazmat.primitives import hashes, serialization  # lazy: cryptography ~0.1 s; new certificate only
    from cryptography.hazmat.primitives.asymmetric import ec  # lazy: cryptography ~0.1 s; new certificate only
    from cryptography.x509.oid import NameOID  # lazy: cryptography ~0.1 s; new certificate only

    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / CERT_NAME, folder / KEY_NAME
    if not cert_path.exists() or not key_path.exists():
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "iriis relay")])
        now = dt.datetime.now(dt.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(days=1))
                .not_valid_after(now + dt.timedelta(days=3650))
                .sign(key, hashes.SHA256()))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    der = ssl.PEM_cert_to_DER_cert(cert_path.read_text())
    return cert_path, key_path, fingerprint(der)


def _interface_ipv4() -> list[str]:
    """IPv4 addresses of this machine's interfaces, loopback excluded (Linux ioctl; best effort)."""
    found: list[str] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _index, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915,  # SIOCGIFADDR
                                     struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            addr = socket.inet_ntoa(packed[20:24])
            if not ipaddress.ip_address(addr).is_loopback and addr not in found:
                found.append(addr)
    return found


def candidate_addresses(host: str, port: int, advertise: str = "") -> list[str]:
    """Where peers should dial, best first: what the owner advertised, else the bound address,
    else every interface address (for a wildcard bind)."""
    if advertise.strip():
        out = []
        for item in advertise.split(","):
            item = item.strip()
            if item:
                out.append(item if ":" in item and not item.startswith("[") else f"{item}:{port}")
        return out
    if host not in ("0.0.0.0", "", "::"):
        return [f"{host}:{port}"]
    return [f"{a}:{port}" for a in _interface_ipv4()] or [f"127.0.0.1:{port}"]


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def _client_context() -> ssl.SSLContext:
    # No CA and no host name: trust comes from the pinned fingerprint, checked right after the
    # handshake and before any application data is written.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


async def dial(addrs: list[str], pinned: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """A TLS stream to the first candidate that answers with the pinned certificate.

    A wrong certificate is refused at once (never retried elsewhere silently: it means someone
    is in the way, or the token is wrong)."""
    errors: list[str] = []
    for addr in addrs:
        host, port = _split(addr)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=_client_context()), CONNECT_TIMEOUT)
        except asyncio.TimeoutError:
            errors.append(f"{addr}: no TLS handshake within {CONNECT_TIMEOUT:g} s")
            continue
        except (OSError, ssl.SSLError) as exc:
            errors.append(f"{addr}: {str(exc) or type(exc).__name__}")
            continue
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        if not der or fingerprint(der) != pinned:
            writer.close()
            raise TunnelError(f"{addr} presented a certificate that does not match the token; refusing it")
        return reader, writer, addr
    raise TunnelError("could not reach the host: " + "; ".join(errors))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
            else:
                writer.close()
        except (OSError, RuntimeError):
            writer.close()


class Forwarder:
    """A local plain-TCP port whose every connection is carried over pinned TLS to the host."""

    def __init__(self, addrs: list[str], pinned: str) -> None:
        self.addrs = addrs
        self.pinned = pinned
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._handle, host, port)
        return self.server.sockets[0].getsockname()[1]

    async def _handle(self, local_reader: asyncio.StreamReader, local_writer: asyncio.StreamWriter) -> None:
        try:
            remote_reader, remote_writer, addr = await dial(self.addrs, self.pinned)
        except TunnelError as exc:
            log.warning("tunnel: %s", exc)
            local_writer.close()
            return
        log.debug("tunnel: connection carried to %s", addr)
        try:
            await asyncio.gather(_pipe(local_reader, remote_writer), _pipe(remote_reader, local_writer))
        finally:
            for w in (local_writer, remote_writer):
                w.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
