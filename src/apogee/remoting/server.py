"""The listening side: accept connections and dispatch their requests.

Owns: RemotingServer (start on host:port, report the bound port, track
connections, close listeners, graceful stop).

Graceful stop, in order: stop accepting; answer new requests on open
connections with SYSTEM_BUSY; let running and queued handlers finish within
``stop_grace_s`` (their answers are written); close every connection after
its buffered answers are flushed; cancel whatever is still running.
Requests a handler parked without answering (long polls) are not waited for:
their owner answers them before stopping the server.

TLS (``ServerConfig.tls_mode``, see ``tls``): both TLS modes accept
through ``tls.TlsListener`` (permissive: plain and TLS on one port, told
apart by the first byte; enforcing: TLS only), which hands back the
connections whose handshake failed so they leave the connection count.
Without TLS the asyncio server accepts, as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from types import TracebackType

from apogee._util.net import listen_socket
from apogee.remoting.config import ServerConfig
from apogee.remoting.connection import CloseListener, Connection, TurnShare
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.limits import FrameBudget
from apogee.remoting.tls import TlsListener, TlsMode

log = logging.getLogger(__name__)

_CLOSE_WAIT_S = 2.0
_SWEEP_S = 1.0  # how often slow partial frames are looked for


class RemotingServer:
    def __init__(self, handlers: HandlerTable, config: ServerConfig | None = None) -> None:
        self.handlers = handlers
        self.config = config or ServerConfig()
        self._server: asyncio.Server | TlsListener | None = None
        self._connections: set[Connection] = set()
        self._close_listeners: list[CloseListener] = []
        self._port = 0
        self._budget = FrameBudget(self.config.limits.max_pending_frame_bytes)
        self._share = TurnShare()  # the later turns of pipelining connections
        self._sweep: asyncio.TimerHandle | None = None
        self.refused_connections = 0

    @property
    def pending_frame_bytes(self) -> int:
        """Bytes held in partial frames by all connections now."""
        return self._budget.held

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
        if cfg.tls_mode is not TlsMode.DISABLED:
            assert cfg.ssl_context is not None  # ServerConfig checks it
            listener = TlsListener(
                sock or listen_socket(cfg.host, cfg.port),
                self._new_connection,
                cfg.ssl_context,
                sniff=cfg.tls_mode is TlsMode.PERMISSIVE,
                on_failed=self._never_opened,
                backlog=cfg.backlog,
                max_pending=cfg.limits.max_connections,
                sniff_timeout_s=cfg.idle_timeout_s or 120.0,
                handshake_timeout_s=cfg.ssl_handshake_timeout_s,
            )
            listener.start()
            self._server = listener
        elif sock is not None:
            self._server = await loop.create_server(
                self._new_connection, sock=sock, backlog=cfg.backlog
            )
        else:
            try:
                self._server = await loop.create_server(
                    self._new_connection,
                    cfg.host,
                    cfg.port,
                    backlog=cfg.backlog,
                    reuse_address=True,
                )
            except OSError as exc:  # say which address, keep errno for the caller
                reason = os.strerror(exc.errno) if exc.errno else str(exc)
                where = f"{cfg.host}:{cfg.port}"
                raise OSError(exc.errno, f"cannot listen on {where}: {reason}") from exc
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("remoting server listening on %s:%d (TLS %s)", cfg.host, self._port,
                 cfg.tls_mode.value)  # fmt: skip
        if cfg.limits.frame_timeout_s is not None:
            self._sweep = loop.call_later(_SWEEP_S, self._sweep_slow_frames)

    def _sweep_slow_frames(self) -> None:
        """Close connections whose frame has been incomplete for too long."""
        timeout = self.config.limits.frame_timeout_s
        assert timeout is not None
        loop = asyncio.get_running_loop()
        oldest = loop.time() - timeout
        for conn in list(self._connections):
            since = conn.partial_since
            if since and since < oldest:
                log.warning("closing connection with %s: a frame incomplete for over %.0fs",
                            conn.peer, timeout)  # fmt: skip
                conn.abort()
        self._sweep = loop.call_later(_SWEEP_S, self._sweep_slow_frames)

    def _new_connection(self) -> Connection:
        cfg = self.config
        limit = cfg.limits.max_connections
        if limit is not None and len(self._connections) >= limit:
            self.refused_connections += 1
            why = f"{len(self._connections)} connections open, maxConnections is {limit}"
            return Connection(None, server_side=True, refuse=why)
        conn = Connection(
            self.handlers,
            max_frame_bytes=cfg.max_frame_bytes,
            idle_timeout_s=cfg.idle_timeout_s,
            write_high_water_bytes=cfg.write_high_water_bytes,
            server_side=True,
            on_close=self._connection_closed,
            budget=self._budget,
            max_write_buffer_bytes=cfg.limits.max_write_buffer_bytes,
            share=self._share,
        )
        self._connections.add(conn)
        return conn

    def _never_opened(self, conn: asyncio.Protocol) -> None:
        # its TLS handshake failed: connection_made never ran, connection_lost never will
        if isinstance(conn, Connection):
            self._connections.discard(conn)

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
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
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
