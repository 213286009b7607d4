"""Dialling a relay host: a host that accepts the connection but never finishes the TLS handshake
is reported by name and with how long it was given (the message used to end in an empty colon)."""

from __future__ import annotations

import asyncio

import pytest

from actors.relay import tunnel


async def test_a_host_that_never_answers_the_handshake_is_named_with_the_time_it_had(monkeypatch) -> None:
    monkeypatch.setattr(tunnel, "CONNECT_TIMEOUT", 0.2)
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accepted, never answered

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(tunnel.TunnelError) as refused:
            await tunnel.dial([f"127.0.0.1:{port}"], "0" * 64)
        assert str(refused.value) == f"could not reach the host: 127.0.0.1:{port}: no TLS handshake within 0.2 s"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_closed_port_says_why() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(tunnel.TunnelError) as refused:
        await tunnel.dial([f"127.0.0.1:{port}"], "0" * 64)
    message = str(refused.value)
    assert message.startswith(f"could not reach the host: 127.0.0.1:{port}: ") and not message.endswith(": ")
