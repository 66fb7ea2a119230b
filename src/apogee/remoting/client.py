"""The connecting side: a pool of connections keyed by "host:port".

Owns: RemotingClient (lazy connect under a per-address lock, connect
timeout, invoke / invoke_oneway, name-server rotation, close all).

Invariants: at most one live connection per address; a connection leaves the
pool when it closes, and the next call reconnects. With ``credentials`` in
its config every request leaving any of its connections is signed there
(``protocol.signing``), including the ones callers send on a pooled
connection directly; with an ``ssl_context`` every connection is TLS. The client dispatches
requests its peers send (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED)
through its own HandlerTable; without one they get REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from apogee.errors import ClientError, RemotingConnectError, RemotingError
from apogee.protocol import header_scan
from apogee.protocol.command import RemotingCommand
from apogee.protocol.signing import SessionCredentials, sign
from apogee.remoting.config import ClientConfig
from apogee.remoting.connection import (
    PULL_ANSWER,
    SEND_ANSWER,
    CloseListener,
    Connection,
    Signer,
)
from apogee.remoting.dispatch import HandlerTable

log = logging.getLogger(__name__)

_CLOSE_WAIT_S = 2.0  # how long close() lets buffered requests flush before aborting
# Compiled only: interpreted they would always decline.
_send_answer = header_scan.send_answer if header_scan.COMPILED else None
_pull_answer = header_scan.pull_answer
_unpack_prefix = struct.Struct(">ii").unpack_from


class ClientConnection(Connection):
    """A connection this side opened.

    The answer to a send or a pull (``Connection.request_encoded``) that
    arrives as one whole read, alone, is read by ``header_scan.send_answer``
    (a frame of a header only) or ``pull_answer`` (a header and a body), only
    for what the result needs, and resolves the request's future with that
    ``SendAnswer`` or ``PullAnswer``: no frame decoder, no command, no
    ext-field dict. Anything else (a partial or coalesced read, another
    answer, a request, any answer the kernel declines) takes
    ``Connection.data_received``.
    """

    def data_received(self, data: bytes) -> None:
        n = len(data)
        if n > 8 and _send_answer is not None:
            length, kind = _unpack_prefix(data)
            decoder = self._decoder
            # one JSON frame (serialize type 0: the header's length is the whole type
            # word), and nothing held before it
            if (
                length + 4 == n
                and 0 < kind <= length - 4
                and n <= decoder.max_frame_bytes
                and not decoder.pending
                and not decoder.buffered
            ):
                if kind == length - 4:  # a header only
                    answer: tuple[Any, ...] | None = _send_answer(data, 8)
                    want = SEND_ANSWER
                else:
                    answer = _pull_answer(data, 8, 8 + kind)
                    want = PULL_ANSWER
                if answer is not None:
                    opaque = answer[0]
                    pending = self._pending
                    waiting = pending.get(opaque)
                    if waiting is not None and waiting[4] == want:
                        del pending[opaque]
                        self._last_activity = self._loop.time()
                        fut = waiting[0]
                        if not fut.done():  # its caller may have been cancelled
                            fut.set_result(answer)
                        return
        super().data_received(data)


def _signer(credentials: SessionCredentials) -> Signer:
    return lambda request: sign(request, credentials)


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` (IPv6 as ``"[::1]:9876"``) -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClientError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    def __init__(
        self, config: ClientConfig | None = None, handlers: HandlerTable | None = None
    ) -> None:
        self.config = config or ClientConfig()
        self.handlers = handlers
        self._pool: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._close_listeners: list[CloseListener] = []
        self._namesrv_index = 0
        self._closed = False
        credentials = self.config.credentials
        self._sign: Signer | None = _signer(credentials) if credentials is not None else None

    def add_close_listener(self, listener: CloseListener) -> None:
        """Call ``listener(connection)`` when any pooled connection closes."""
        self._close_listeners.append(listener)

    def pooled(self, addr: str) -> Connection | None:
        """The open pooled connection to ``addr``, or None (no await: for hot paths)."""
        conn = self._pool.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def connection(self, addr: str) -> Connection:
        """The pooled connection to ``addr``, connecting on first use."""
        conn = self._pool.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise ClientError("the remoting client is closed")
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._pool.get(addr)
            if conn is not None and not conn.closed:
                return conn
            conn = await self._connect(addr)
            self._pool[addr] = conn
            return conn

    async def _connect(self, addr: str) -> Connection:
        host, port = split_address(addr)
        cfg = self.config
        loop = asyncio.get_running_loop()

        def factory() -> Connection:
            return ClientConnection(
                self.handlers,
                max_frame_bytes=cfg.max_frame_bytes,
                idle_timeout_s=cfg.idle_timeout_s,
                write_high_water_bytes=cfg.write_high_water_bytes,
                on_close=lambda c: self._connection_closed(addr, c),
                sign=self._sign,
            )

        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel that
            # comes as the attempt ends, and a caller's loop would never stop.
            async with asyncio.timeout(cfg.connect_timeout_s):
                _, conn = await loop.create_connection(factory, host, port, ssl=cfg.ssl_context)
        except TimeoutError:
            raise RemotingConnectError(
                f"connecting to {addr} took longer than {cfg.connect_timeout_s}s"
            ) from None
        except OSError as exc:
            raise RemotingConnectError(f"cannot connect to {addr}: {exc}") from exc
        log.debug("connected to %s", addr)
        return conn

    def _connection_closed(self, addr: str, conn: Connection) -> None:
        if self._pool.get(addr) is conn:
            del self._pool[addr]
        for listener in self._close_listeners:
            try:
                listener(conn)
            except Exception:
                log.exception("connection-closed listener failed for %s", addr)

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return its response command."""
        conn = await self.connection(addr)
        return await conn.request(request, timeout_s or self.config.request_timeout_s)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        conn = await self.connection(addr)
        await conn.invoke_oneway(request)

    async def invoke_any(
        self, addrs: Sequence[str], request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Try name servers in turn, starting with the last one that answered."""
        if not addrs:
            raise ClientError("no name server address configured")
        last: RemotingError | None = None
        for step in range(len(addrs)):
            index = (self._namesrv_index + step) % len(addrs)
            try:
                response = await self.invoke(addrs[index], request, timeout_s)
            except RemotingError as exc:
                log.info("name server %s failed: %s", addrs[index], exc)
                last = exc
                continue
            self._namesrv_index = index
            return response
        assert last is not None
        raise last

    async def close_connection(self, addr: str) -> None:
        conn = self._pool.pop(addr, None)
        if conn is not None:
            await conn.close_and_wait(_CLOSE_WAIT_S)

    async def close(self) -> None:
        """Close every pooled connection; pending requests fail with RemotingClosedError."""
        self._closed = True
        conns = list(self._pool.values())
        self._pool.clear()
        await asyncio.gather(*(c.close_and_wait(_CLOSE_WAIT_S) for c in conns))

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
