"""TLS on the remoting port: settings, SSL contexts, and plain + TLS on one port.

Owns: TlsMode, TlsConfig (RocketMQ's ``tls.*`` keys, TlsSystemConfig), the
server and client SSLContexts built from them, and TlsListener, the
listener of the two TLS modes.

Modes of the server (``tls.server.mode``):

* ``disabled`` -- plain only. A TLS ClientHello reads as a frame length
  over the limit and the connection is closed.
* ``permissive`` -- plain and TLS on one port. Each new connection waits
  until its first byte arrives (the client always speaks first) and peeks
  at it: 0x16, a TLS handshake record, gets TLS; anything else is served
  plain on the same transport type as in ``disabled``, so established
  plain connections cost exactly what they cost there. No valid frame
  starts with 0x16: its length would be over 369 MB.
* ``enforcing`` -- TLS only; a plain client fails the handshake and is
  closed.

Apogee's default is ``disabled`` (RocketMQ's is ``permissive`` with a
self-signed certificate made at start, ``tls.test.mode.enable``, which is
not offered here: a TLS mode needs ``tls.server.certPath`` and
``tls.server.keyPath``). A client connects over TLS when ``tls.enable`` is
true; like RocketMQ it checks the server's certificate only when
``tls.client.authServer`` is true (against ``tls.client.trustCertPath``,
else the system's CAs), and never its host name. A server asks clients for
certificates with ``tls.server.need.client.auth`` optional or require,
verifying them against ``tls.server.trustCertPath``. ``tls.config.file``
names a properties file with more ``tls.*`` keys, which win over those
beside it, as in RocketMQ.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from apogee._util.props import bind, load_properties, reject_unknown
from apogee.errors import ConfigError

log = logging.getLogger(__name__)

TLS_RECORD_HANDSHAKE = 0x16


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, text: str) -> TlsMode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ConfigError(
                f"tls.server.mode must be disabled, permissive or enforcing, got {text!r}"
            ) from None


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
#: keys a tls.config.file may not set (RocketMQ reads them only as system properties)
_NOT_IN_FILE = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """RocketMQ's TLS settings; read from broker.conf / namesrv.conf under these keys."""

    server_mode: str = field(default="disabled", metadata=_key("tls.server.mode"))
    server_cert_path: str = field(default="", metadata=_key("tls.server.certPath"))
    server_key_path: str = field(default="", metadata=_key("tls.server.keyPath"))
    server_key_password: str = field(default="", metadata=_key("tls.server.keyPassword"))
    server_need_client_auth: str = field(
        default="none", metadata=_key("tls.server.need.client.auth")
    )
    server_auth_client: bool = field(default=False, metadata=_key("tls.server.authClient"))
    server_trust_cert_path: str = field(default="", metadata=_key("tls.server.trustCertPath"))
    client_enable: bool = field(default=False, metadata=_key("tls.enable"))
    client_cert_path: str = field(default="", metadata=_key("tls.client.certPath"))
    client_key_path: str = field(default="", metadata=_key("tls.client.keyPath"))
    client_key_password: str = field(default="", metadata=_key("tls.client.keyPassword"))
    client_auth_server: bool = field(default=False, metadata=_key("tls.client.authServer"))
    client_trust_cert_path: str = field(default="", metadata=_key("tls.client.trustCertPath"))
    test_mode_enable: bool = field(default=False, metadata=_key("tls.test.mode.enable"))
    config_file: str = field(default="", metadata=_key("tls.config.file"))

    def check(self) -> TlsConfig:
        """This config, if its values fit together; else ConfigError naming the key."""
        mode = TlsMode.parse(self.server_mode)
        if self.server_need_client_auth not in _CLIENT_AUTH:
            raise ConfigError(
                "tls.server.need.client.auth must be none, optional or require, "
                f"got {self.server_need_client_auth!r}"
            )
        if mode is TlsMode.DISABLED:
            return self
        if not (self.server_cert_path and self.server_key_path):
            test = " (tls.test.mode.enable is not supported)" if self.test_mode_enable else ""
            raise ConfigError(
                f"tls.server.mode={mode.value} needs tls.server.certPath and "
                f"tls.server.keyPath{test}"
            )
        if self.server_need_client_auth != "none" and not self.server_trust_cert_path:
            raise ConfigError(
                "tls.server.need.client.auth needs tls.server.trustCertPath to verify clients"
            )
        return self

    @property
    def mode(self) -> TlsMode:
        return TlsMode.parse(self.server_mode)


def tls_config_from_properties(props: dict[str, str]) -> tuple[TlsConfig, set[str]]:
    """The ``tls.*`` keys of a config file (and of its ``tls.config.file``); keys used."""
    raw, used = bind(TlsConfig(), props)
    if raw.config_file:
        path = Path(raw.config_file).expanduser()
        extra = load_properties(path)
        bad = sorted(set(extra) & _NOT_IN_FILE)
        if bad:
            raise ConfigError(f"{bad[0]} cannot be set in tls.config.file {path}")
        raw, extra_used = bind(raw, extra)
        reject_unknown(extra, extra_used, source=str(path))
    return raw.check(), used


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str, side: str) -> None:
    try:
        ctx.load_cert_chain(cert, key or None, password or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"tls.{side}.certPath {cert} / tls.{side}.keyPath {key}: cannot load: {exc}"
        ) from None


def _load_trust(ctx: ssl.SSLContext, path: str, key: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{key} {path}: cannot load: {exc}") from None


def server_context(config: TlsConfig) -> ssl.SSLContext | None:
    """The server's SSLContext, or None when ``tls.server.mode`` is disabled."""
    if config.check().mode is TlsMode.DISABLED:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_chain(
        ctx, config.server_cert_path, config.server_key_path, config.server_key_password, "server"
    )
    ctx.verify_mode = _CLIENT_AUTH[config.server_need_client_auth]
    if config.server_trust_cert_path:
        _load_trust(ctx, config.server_trust_cert_path, "tls.server.trustCertPath")
    return ctx


def client_context(config: TlsConfig) -> ssl.SSLContext | None:
    """The client's SSLContext, or None when ``tls.enable`` is false."""
    if not config.client_enable:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # RocketMQ checks the certificate, never the host name
    if config.client_auth_server:
        if config.client_trust_cert_path:
            _load_trust(ctx, config.client_trust_cert_path, "tls.client.trustCertPath")
        else:
            ctx.load_default_certs()
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if config.client_cert_path:
        _load_chain(
            ctx,
            config.client_cert_path,
            config.client_key_path,
            config.client_key_password,
            "client",
        )
    return ctx


def client_ssl_context(
    tls: bool | ssl.SSLContext | str | Path | None,
) -> ssl.SSLContext | None:
    """What a client API's ``tls`` argument means.

    False/None: plain. True: TLS without checking the server's certificate
    (RocketMQ's ``tls.enable`` default). A path: TLS checking the server's
    certificate against that CA file. An SSLContext: used as given.
    """
    if tls is None or tls is False:
        return None
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is True:
        return client_context(TlsConfig(client_enable=True))
    config = TlsConfig(client_enable=True, client_auth_server=True, client_trust_cert_path=str(tls))
    return client_context(config)


# -- accepting TLS connections --------------------------------------------------------


class TlsListener:
    """Accepts on ``sock`` for the TLS modes: TLS only, or (``sniff``) TLS and plain.

    The listening half of asyncio.Server that RemotingServer uses: ``close``,
    ``wait_closed`` and ``sockets``. With ``sniff`` a connection is served
    TLS or plain by its first byte, and one that sends nothing within
    ``sniff_timeout_s`` is closed. A protocol made for a connection whose
    handshake then failed goes to ``on_failed`` (asyncio never tells it
    anything). Beyond ``max_pending`` connections still sniffing or in their
    handshake, new ones are closed at once.
    """

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        ssl_context: ssl.SSLContext,
        *,
        sniff: bool,
        on_failed: Callable[[asyncio.Protocol], None],
        backlog: int,
        max_pending: int | None,
        sniff_timeout_s: float,
        handshake_timeout_s: float,
    ) -> None:
        self._sock = sock
        self._factory = factory
        self._ssl = ssl_context
        self._sniff = sniff
        self._on_failed = on_failed
        self._backlog = backlog
        self._max_pending = max_pending
        self._sniff_timeout_s = sniff_timeout_s
        self._handshake_timeout_s = handshake_timeout_s
        self._accepting: asyncio.Task[None] | None = None
        self._serving: set[asyncio.Task[None]] = set()

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        return (self._sock,)

    def start(self) -> None:
        self._sock.setblocking(False)
        self._sock.listen(self._backlog)
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:  # out of descriptors: wait, do not spin
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if self._max_pending is not None and len(self._serving) >= self._max_pending:
                log.warning("closing a new connection: %d still in their TLS handshake",
                            len(self._serving))  # fmt: skip
                conn.close()
                continue
            task = loop.create_task(self._serve(conn))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)

    async def _serve(self, conn: socket.socket) -> None:
        made: list[asyncio.Protocol] = []

        def factory() -> asyncio.Protocol:
            protocol = self._factory()
            made.append(protocol)
            return protocol

        handed_over = opened = False
        try:
            conn.setblocking(False)
            tls = True
            if self._sniff:
                first = await asyncio.wait_for(_peek(conn), self._sniff_timeout_s)
                if not first:
                    return
                tls = first[0] == TLS_RECORD_HANDSHAKE
            loop = asyncio.get_running_loop()
            handed_over = True  # from here the transport owns and closes the socket
            if tls:
                await loop.connect_accepted_socket(
                    factory, conn, ssl=self._ssl, ssl_handshake_timeout=self._handshake_timeout_s
                )
            else:
                await loop.connect_accepted_socket(factory, conn)
            opened = True
        except TimeoutError:
            log.info("closing a connection that sent nothing for %.0fs", self._sniff_timeout_s)
        except (OSError, ssl.SSLError) as exc:
            log.info("TLS handshake or accept failed: %s", exc)
        finally:
            if not handed_over:
                conn.close()
            if not opened:
                for protocol in made:
                    self._on_failed(protocol)

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._serving:
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._serving) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)


async def _peek(conn: socket.socket) -> bytes:
    """The first byte waiting on ``conn``, left in place; b"" when the peer closed."""
    loop = asyncio.get_running_loop()
    fd = conn.fileno()
    while True:
        try:
            return conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
