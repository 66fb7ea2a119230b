"""TLS on the remoting port in each tls.server.mode, over real sockets (asyncio and uvloop).

Certificates are made per module by ``apogee.testing.certs``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from apogee.codes import ResponseCode
from apogee.errors import RemotingClosedError, RemotingConnectError, RemotingTimeoutError
from apogee.protocol.command import RemotingCommand
from apogee.remoting import (
    ClientConfig,
    HandlerTable,
    RemotingClient,
    RemotingServer,
    RequestContext,
    ServerConfig,
)
from apogee.remoting.limits import ServerLimits
from apogee.remoting.tls import TlsConfig, TlsMode, client_context, server_context
from apogee.testing.certs import CertFiles, make_certificate

ECHO = 1000


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    root = tmp_path_factory.mktemp("certs")
    return {name: make_certificate(root, name) for name in ("server", "client", "stranger")}


def echo_table() -> HandlerTable:
    async def echo(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        tls = ctx.require_channel()._transport.get_extra_info("ssl_object") is not None  # type: ignore[union-attr]
        return req.make_response(ext_fields={"tls": str(tls).lower()}, body=req.body_bytes())

    table = HandlerTable()
    table.register(ECHO, echo)
    return table


def tls_server_config(certs: dict[str, CertFiles], mode: TlsMode, **keys: str) -> ServerConfig:
    tls = TlsConfig(
        server_mode=mode.value,
        server_cert_path=str(certs["server"].cert),
        server_key_path=str(certs["server"].key),
        **keys,  # type: ignore[arg-type]
    )
    return ServerConfig(
        host="127.0.0.1",
        port=0,
        idle_timeout_s=2.0,
        tls_mode=mode,
        ssl_context=server_context(tls),
    )


@asynccontextmanager
async def serving(config: ServerConfig) -> AsyncIterator[RemotingServer]:
    server = RemotingServer(echo_table(), config)
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace_s=0.5)


async def echo_over(addr: str, config: ClientConfig) -> str:
    async with RemotingClient(config) as client:
        response = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"ping"))
        assert response.code == ResponseCode.SUCCESS and response.body_bytes() == b"ping"
        return response.ext_fields["tls"]


PLAIN = ClientConfig(connect_timeout_s=2.0, request_timeout_s=2.0)


def tls_client(**keys: object) -> ClientConfig:
    ctx = client_context(TlsConfig(client_enable=True, **keys))  # type: ignore[arg-type]
    return ClientConfig(connect_timeout_s=2.0, request_timeout_s=2.0, ssl_context=ctx)


async def wait_no_connections(server: RemotingServer) -> None:
    for _ in range(100):
        if not server.connections:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{len(server.connections)} connections left")


async def test_enforcing_serves_tls_and_closes_plain_clients(certs: dict[str, CertFiles]) -> None:
    async with serving(tls_server_config(certs, TlsMode.ENFORCING)) as server:
        addr = f"127.0.0.1:{server.port}"
        assert await echo_over(addr, tls_client()) == "true"
        with pytest.raises((RemotingClosedError, RemotingTimeoutError)):
            await echo_over(addr, PLAIN)
        await wait_no_connections(server)  # a failed handshake leaves nothing behind


async def test_permissive_serves_plain_and_tls_on_one_port(certs: dict[str, CertFiles]) -> None:
    async with serving(tls_server_config(certs, TlsMode.PERMISSIVE)) as server:
        addr = f"127.0.0.1:{server.port}"
        results = await asyncio.gather(
            *(echo_over(addr, tls_client() if i % 2 else PLAIN) for i in range(6))
        )
        assert results == ["false", "true"] * 3
        # many requests on one plain and one TLS connection
        async with RemotingClient(PLAIN) as plain, RemotingClient(tls_client()) as secure:
            answers = await asyncio.gather(
                *(
                    c.invoke(addr, RemotingCommand.request(ECHO, body=b"x" * 70_000))
                    for c in (plain, secure)
                    for _ in range(20)
                )
            )
            assert {a.body_length() for a in answers} == {70_000}
            assert len(server.connections) == 2


async def test_permissive_closes_connections_that_never_speak(
    certs: dict[str, CertFiles],
) -> None:
    async with serving(tls_server_config(certs, TlsMode.PERMISSIVE)) as server:
        loop = asyncio.get_running_loop()
        silent = socket.create_connection(("127.0.0.1", server.port))
        silent.setblocking(False)
        try:
            # the sniff timeout is the idle timeout (2 s here): then the server closes it
            data = await asyncio.wait_for(loop.sock_recv(silent, 1), 10)
        except ConnectionResetError:
            data = b""
        finally:
            silent.close()
        assert data == b""
        # a client that sends garbage starting with the TLS byte fails its handshake only
        rogue = socket.create_connection(("127.0.0.1", server.port))
        rogue.sendall(b"\x16\x00\x00\x00garbage")
        rogue.close()
        assert await echo_over(f"127.0.0.1:{server.port}", PLAIN) == "false"


async def test_disabled_refuses_tls_clients(certs: dict[str, CertFiles]) -> None:
    async with serving(ServerConfig(host="127.0.0.1", port=0)) as server:
        addr = f"127.0.0.1:{server.port}"
        with pytest.raises(RemotingConnectError):
            await echo_over(addr, tls_client())
        assert await echo_over(addr, PLAIN) == "false"


async def test_client_checks_the_server_certificate_when_asked(
    certs: dict[str, CertFiles],
) -> None:
    async with serving(tls_server_config(certs, TlsMode.ENFORCING)) as server:
        addr = f"127.0.0.1:{server.port}"
        ca = str(certs["server"].cert)
        trusted = tls_client(client_auth_server=True, client_trust_cert_path=ca)
        assert await echo_over(addr, trusted) == "true"
        other = str(certs["stranger"].cert)
        wrong = tls_client(client_auth_server=True, client_trust_cert_path=other)
        with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await echo_over(addr, wrong)


async def test_server_requires_client_certificates_when_asked(
    certs: dict[str, CertFiles], tmp_path: Path
) -> None:
    config = tls_server_config(
        certs,
        TlsMode.PERMISSIVE,
        server_need_client_auth="require",
        server_trust_cert_path=str(certs["client"].cert),
    )
    async with serving(config) as server:
        addr = f"127.0.0.1:{server.port}"
        with_cert = tls_client(
            client_cert_path=str(certs["client"].cert), client_key_path=str(certs["client"].key)
        )
        assert await echo_over(addr, with_cert) == "true"
        with pytest.raises((RemotingConnectError, RemotingClosedError, ssl.SSLError)):
            await echo_over(addr, tls_client())
        await wait_no_connections(server)


async def test_failed_handshakes_do_not_use_up_max_connections(
    certs: dict[str, CertFiles],
) -> None:
    config = dataclasses.replace(
        tls_server_config(certs, TlsMode.ENFORCING), limits=ServerLimits(max_connections=2)
    )
    async with serving(config) as server:
        addr = f"127.0.0.1:{server.port}"
        for _ in range(4):  # plain clients: each handshake fails
            with pytest.raises((RemotingClosedError, RemotingTimeoutError)):
                await echo_over(addr, PLAIN)
        assert await echo_over(addr, tls_client()) == "true"
        await wait_no_connections(server)
        assert server.refused_connections == 0
