"""The listening side: accept connections and dispatch their requests.

Owns: RemotingServer (start on host:port, report the bound port, track
connections, close listeners, graceful stop). Imports: asyncio,
``apogee.remoting``.

Graceful stop, in order: stop accepting; answer new requests on open
connections with SYSTEM_BUSY; let running and queued handlers finish within
``stop_grace_s`` (their answers are written); close every connection after
its buffered answers are flushed; cancel whatever is still running.
Requests a handler parked without answering (long polls) are not waited for:
their owner answers them before stopping the server.

TLS (``ServerConfig.tls_mode``, see ``tls``): enforcing serves TLS only,
permissive accepts through ``tls.SniffingServer`` (plain and TLS on one
port). A connection counts from its ``connection_made`` -- after the
handshake -- so a failed handshake leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from types import TracebackType

from apogee.remoting.config import ServerConfig
from apogee.remoting.connection import CloseListener, Connection
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.tls import SniffingServer, TlsMode, bind_socket

log = logging.getLogger(__name__)

_CLOSE_WAIT_S = 2.0


class RemotingServer:
    def __init__(self, handlers: HandlerTable, config: ServerConfig | None = None) -> None:
        self.handlers = handlers
        self.config = config or ServerConfig()
        self._server: asyncio.Server | SniffingServer | None = None
        self._connections: set[Connection] = set()
        self._close_listeners: list[CloseListener] = []
        self._port = 0

    @property
    def port(self) -> int:
        """The bound port (meaningful after ``start``, also when configured as 0)."""
        return self._port

    @property
    def connections(self) -> frozenset[Connection]:
        return frozenset(self._connections)

    def add_close_listener(self, listener: CloseListener) -> None:
        """Call ``listener(connection)`` whenever a client connection closes."""
        self._close_listeners.append(listener)

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen on the configured host and port, or on ``sock`` when given.

        A caller that must know the port before it builds its handlers (a
        broker writes its own address into every stored record) binds the
        socket itself and hands it over.
        """
        loop = asyncio.get_running_loop()
        cfg = self.config
        if cfg.tls_mode is TlsMode.PERMISSIVE:
            assert cfg.ssl_context is not None  # ServerConfig checks it
            sniffing = SniffingServer(
                sock or bind_socket(cfg.host, cfg.port),
                self._new_connection,
                cfg.ssl_context,
                backlog=cfg.backlog,
                sniff_timeout_s=cfg.idle_timeout_s or 120.0,
                handshake_timeout_s=cfg.ssl_handshake_timeout_s,
            )
            sniffing.start()
            self._server = sniffing
        else:
            tls = cfg.ssl_context if cfg.tls_mode is TlsMode.ENFORCING else None
            timeout = cfg.ssl_handshake_timeout_s if tls is not None else None
            if sock is not None:
                self._server = await loop.create_server(
                    self._new_connection,
                    sock=sock,
                    backlog=cfg.backlog,
                    ssl=tls,
                    ssl_handshake_timeout=timeout,
                )
            else:
                self._server = await loop.create_server(
                    self._new_connection,
                    cfg.host,
                    cfg.port,
                    backlog=cfg.backlog,
                    reuse_address=True,
                    ssl=tls,
                    ssl_handshake_timeout=timeout,
                )
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("remoting server listening on %s:%d (TLS %s)", cfg.host, self._port,
                 cfg.tls_mode.value)  # fmt: skip

    def _new_connection(self) -> Connection:
        cfg = self.config
        return Connection(
            self.handlers,
            max_frame_bytes=cfg.max_frame_bytes,
            idle_timeout_s=cfg.idle_timeout_s,
            write_high_water_bytes=cfg.write_high_water_bytes,
            server_side=True,
            on_close=self._connection_closed,
            on_open=self._connections.add,
        )

    def _connection_closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        for listener in self._close_listeners:
            try:
                listener(conn)
            except Exception:
                log.exception("connection-closed listener failed for %s", conn.peer)

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop accepting, finish in-flight handlers within the grace period, close."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        conns = list(self._connections)
        for conn in conns:
            conn.accepting_requests = False
        grace = self.config.stop_grace_s if grace_s is None else grace_s
        if not await self.handlers.drain(grace):
            log.warning("stopping with %d requests unfinished", self.handlers.in_flight)
            self.handlers.cancel_all()
        await asyncio.gather(*(c.close_and_wait(_CLOSE_WAIT_S) for c in conns))
        await server.wait_closed()
        log.info("remoting server on port %d stopped", self._port)

    async def __aenter__(self) -> RemotingServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
