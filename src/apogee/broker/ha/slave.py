"""A slave's replication connection to its master (RocketMQ HAClient).

Owns: connecting to the master's HA address (``haMasterAddress``, else the
one the name servers name in their registration answers), reconnecting,
reading transfer frames straight into a receive buffer, reporting this log's
end (first at connect, then after each read that appended, and at least
every ``haSendHeartbeatInterval``), closing a connection the master left
silent for ``haHousekeepingInterval``, and the figures for haStatus. What the
frames mean (the tail check, appends, truncation) is
``apogee.store.replication.ReplicaTail``'s.

After a connection ends the client waits ``retry_s`` before the next, except
when it ended because the tail check asked for it (then at once). While it
knows no master, or cannot reach the one it knows, it asks (``ask_master``,
which registers with the name servers again: their answer names the master)
once per ``retry_s``. A store
that refuses writes (a full disk, a failed sync) ends the connection too: the
master keeps the bytes and the next connection asks for them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from apogee.errors import ProtocolError, StoreError
from apogee.protocol.ha import TransferReader, encode_report
from apogee.store.replication import ReplicaStore, ReplicaTail, Step

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SlaveSettings:
    heartbeat_s: float = 5.0  # haSendHeartbeatInterval
    housekeeping_s: float = 20.0  # haHousekeepingInterval
    retry_s: float = 5.0  # RocketMQ waits 5 s after a failed connection
    connect_timeout_s: float = 3.0


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """This slave's connection, for haStatus."""

    master_addr: str
    connected: bool
    max_offset: int
    last_read_ms: int
    last_write_ms: int
    bytes_per_s: int


class _MasterLink(asyncio.BufferedProtocol):
    def __init__(self, client: HAClient) -> None:
        self._client = client
        self._reader = TransferReader()
        self._transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.reported = -1
        self.retry_at_once = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client.last_read = time.monotonic()
        try:
            first = self._client.tail.start()
        except (ValueError, StoreError) as exc:  # a log it cannot read its own tail of
            log.error("replication: cannot tell where this log ends: %s", exc)
            transport.close()
            return
        self.report(first)

    def report(self, offset: int) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(encode_report(offset))
            self.reported = offset
            self._client.last_write = time.monotonic()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        client = self._client
        client.last_read = time.monotonic()
        client.received += nbytes
        self._reader.filled(nbytes)
        ack = None
        try:
            for offset, body in self._reader.frames():
                outcome = client.tail.on_frame(offset, body)
                if outcome.ack is not None:
                    ack = outcome.ack
                if outcome.step is Step.RECONNECT:
                    log.info("replication from %s: %s; connecting again", client.master,
                             outcome.reason)  # fmt: skip
                    self.retry_at_once = True
                    self.close()
                    break
        except ProtocolError as exc:
            log.warning("replication from %s: %s; closing", client.master, exc)
            self.close()
        except StoreError as exc:
            log.error("replication from %s stopped: %s", client.master, exc)
            self.close()
        if ack is not None:
            client.on_appended()
            if ack > self.reported:
                self.report(ack)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if not self.closed.done():
            self.closed.set_result(None)


class HAClient:
    """Keeps a slave connected to its master and its log following the master's."""

    def __init__(
        self,
        store: ReplicaStore,
        master_addr: Callable[[], str | None],
        settings: SlaveSettings,
        *,
        on_appended: Callable[[], None],
        ask_master: Callable[[], None] = lambda: None,
        name: str = "slave",
    ) -> None:
        self.tail = ReplicaTail(store, name=name)
        self._ask_master = ask_master
        self._store = store
        self._master_addr = master_addr
        self.settings = settings
        self.on_appended = on_appended
        self.master = ""
        self.last_read = self.last_write = 0.0
        self.received = 0
        self._link: _MasterLink | None = None
        self._task: asyncio.Task[None] | None = None
        self._rate_mark = (time.monotonic(), 0)
        self._rate = 0

    @property
    def connected(self) -> bool:
        return self._link is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if self._link is not None:
            self._link.close()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            addr = self._master_addr()
            if not addr:
                self._ask_master()
                await asyncio.sleep(self.settings.retry_s)
                continue
            if addr != self.master:
                log.info("master HA address: %s", addr)
                self.master = addr
            at_once = False
            try:
                at_once = await self._connection(addr)
            except OSError as exc:
                log.info("cannot reach the master's HA port %s: %s", addr, exc)
            except TimeoutError:
                log.info("connecting to the master's HA port %s timed out", addr)
            if not at_once:
                if not self.connected:
                    self._ask_master()  # it may have moved
                await asyncio.sleep(self.settings.retry_s)

    async def _connection(self, addr: str) -> bool:
        """One connection, until it ends; whether to connect again at once."""
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancel (``stop``)
        # that comes as the connection attempt ends, and the loop would go on.
        async with asyncio.timeout(self.settings.connect_timeout_s):
            transport, link = await loop.create_connection(
                lambda: _MasterLink(self), host.strip("[]"), int(port)
            )
        self._link = link
        log.info("replicating from %s", addr)
        try:
            while not link.closed.done():
                await asyncio.wait({link.closed}, timeout=self._tick_s())
                if not self._housekeep(link):
                    break
        finally:
            self._link = None
            transport.close()
        return link.retry_at_once

    def _tick_s(self) -> float:
        return max(0.05, min(1.0, self.settings.heartbeat_s / 2))

    def _housekeep(self, link: _MasterLink) -> bool:
        """Report when due; False when the master has been silent too long."""
        now = time.monotonic()
        if now - self.last_read > self.settings.housekeeping_s:
            log.warning("master %s silent for %.1fs; closing", self.master, now - self.last_read)
            return False
        if now - self.last_write > self.settings.heartbeat_s:
            link.report(self.tail.position)
        return True

    def info(self, now_ms: int) -> ClientInfo:
        mono = time.monotonic()
        at, seen = self._rate_mark
        if mono - at >= 1.0:
            self._rate = int((self.received - seen) / (mono - at))
            self._rate_mark = (mono, self.received)

        def wall(t: float) -> int:
            return int(now_ms - (mono - t) * 1000) if t else 0

        return ClientInfo(
            self.master,
            self.connected,
            self._store.commit_log_max_offset(),
            wall(self.last_read),
            wall(self.last_write),
            self._rate,
        )
