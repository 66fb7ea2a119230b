"""The master's replication port: one streaming connection per slave (RocketMQ HAService).

Owns: listening on ``haListenPort``, each slave connection (``SlaveLink``):
reading its offset reports, streaming commit-log bytes from where its first
report asked, heartbeats, housekeeping; the figures of each link for
haStatus; and telling ``GroupTransfer`` of every acknowledgement. What to
stream is the store's (``apogee.store.replication``).

Streaming: a link writes header and bytes (views of the mapped commit log,
``haTransferBatchSize`` per frame, several frames per loop turn) until the
transport's buffer passes its high-water mark, then waits for it to drain.
With nothing more to send it waits for ``wake`` (the broker calls it after
each dispatch step, when new bytes are in the file). It sends a heartbeat
(size 0, offset = where the next transfer starts) when nothing was written
for ``haSendHeartbeatInterval``, once as soon as it first catches up (so a
slave checking its tail learns the master's end at once), and at once when
the slave asked for more than this master has (its first frame then names
the master's end). A link that has read nothing for ``haHousekeepingInterval``
is closed.

Lag in time (haStatus): the master notes (time, end offset) each time the log
grows, and a slave's lag is the age of the oldest byte it has not
acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from apogee.broker.ha.transfer import GroupTransfer
from apogee.errors import ProtocolError
from apogee.model.stats import HAConnectionInfo
from apogee.protocol.ha import ReportReader, encode_header
from apogee.store.replication import ReplicationSource, TransferCursor

log = logging.getLogger(__name__)

#: bytes one link writes per loop turn before it lets other callbacks run
_TURN_BYTES = 4 << 20
_WRITE_HIGH_WATER = 8 << 20
_GROWTH_STEP_MS = 10
_TICK_S = 0.05  # how often replication deadlines are checked


@dataclass(frozen=True, slots=True)
class MasterSettings:
    batch_bytes: int = 32 * 1024  # haTransferBatchSize
    heartbeat_s: float = 5.0  # haSendHeartbeatInterval
    housekeeping_s: float = 20.0  # haHousekeepingInterval
    max_gap: int = 256 << 20  # haMaxGapNotInSync


class SlaveLink(asyncio.Protocol):
    """One slave's connection."""

    def __init__(self, server: HAServer) -> None:
        self._server = server
        self._reader = ReportReader()
        self._transport: asyncio.Transport | None = None
        self.peer = "?"
        self.cursor: TransferCursor | None = None
        self.ack = -1
        self._paused = False
        self._scheduled = False
        self._caught_up_once = False
        self.last_read = self.last_write = time.monotonic()
        self.sent_bytes = 0
        self._rate = _Rate()

    # -- asyncio ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._server.link_opened(self)

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        try:
            offset = self._reader.feed(data)
        except ProtocolError as exc:
            log.warning("slave %s: %s; closing", self.peer, exc)
            self.close()
            return
        if offset is None:
            return
        if self.cursor is None:
            self.cursor = self._server.cursor_for(offset)
            log.info("slave %s asks for offset %d; streaming from %d", self.peer, offset,
                     self.cursor.next)  # fmt: skip
            if self.cursor.behind_slave:
                log.warning("slave %s asks for offset %d, past this master's end %d",
                            self.peer, offset, self.cursor.next)  # fmt: skip
                self._heartbeat()
            elif offset and offset < self._server.source.min_offset:
                log.error("slave %s asks for offset %d, before this master's oldest byte %d: "
                          "it cannot catch up (give it an empty store)", self.peer, offset,
                          self._server.source.min_offset)  # fmt: skip
            self.pump()
        # An ack counts only for bytes this link sent: a slave ahead of this
        # master (it has bytes the master lost) must not answer anyone's send.
        self.ack = min(offset, self.cursor.next)
        self._server.acked(self.ack)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._server.link_closed(self)

    # -- streaming ----------------------------------------------------------------------

    def wake(self) -> None:
        """New bytes may be in the log: stream them (soon, once per loop turn)."""
        if not self._scheduled and self.cursor is not None and self._transport is not None:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.pump)

    def pump(self) -> None:
        self._scheduled = False
        transport, cursor = self._transport, self.cursor
        if transport is None or cursor is None or transport.is_closing():
            return
        batch = self._server.settings.batch_bytes
        written = 0
        frames: list[bytes | memoryview] = []
        while not self._paused and written < _TURN_BYTES:
            taken = cursor.take(batch)
            if taken is None:
                break
            offset, view = taken
            frames += (encode_header(offset, len(view)), view)
            written += len(view)
            if len(frames) >= 64:
                transport.writelines(frames)
                frames = []
        if frames:
            transport.writelines(frames)
        if written:
            self.last_write = time.monotonic()
            self.sent_bytes += written
            self._rate.add(written)
            if not self._paused and written >= _TURN_BYTES:
                self.wake()  # more to send: let other callbacks run first
                return
        if not self._caught_up_once and not self._paused:
            self._caught_up_once = True
            self._heartbeat()

    def _heartbeat(self) -> None:
        if self._transport is not None and self.cursor is not None:
            self._transport.write(encode_header(self.cursor.next, 0))
            self.last_write = time.monotonic()

    def housekeep(self, now: float) -> None:
        settings = self._server.settings
        if now - self.last_read > settings.housekeeping_s:
            log.warning("slave %s silent for %.1fs; closing", self.peer, now - self.last_read)
            self.close()
        elif now - self.last_write > settings.heartbeat_s and not self._paused:
            self._heartbeat()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    @property
    def bytes_per_s(self) -> int:
        return self._rate.per_second()


class _Rate:
    """Bytes per second over the last few seconds."""

    def __init__(self) -> None:
        self._marks: deque[tuple[float, int]] = deque(maxlen=64)
        self._total = 0

    def add(self, n: int) -> None:
        self._total += n
        now = time.monotonic()
        if not self._marks or now - self._marks[-1][0] >= 0.1:
            self._marks.append((now, self._total))

    def per_second(self) -> int:
        now = time.monotonic()
        while len(self._marks) > 1 and now - self._marks[0][0] > 3:
            self._marks.popleft()
        if not self._marks:
            return 0
        at, total = self._marks[0]
        span = now - at
        return int((self._total - total) / span) if span > 0.05 else 0


class HAServer:
    """The master's HA service: the listening socket and its slave links."""

    def __init__(
        self,
        source: ReplicationSource,
        transfer: GroupTransfer,
        settings: MasterSettings,
        *,
        now_ms: Callable[[], int],
    ) -> None:
        self.source = source
        self.transfer = transfer
        self.settings = settings
        self._now_ms = now_ms
        self.links: list[SlaveLink] = []
        self._server: asyncio.Server | None = None
        self._housekeeping: asyncio.Task[None] | None = None
        self._growth: deque[tuple[int, int]] = deque(maxlen=4096)  # (ms, end offset)
        self.port = 0

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: SlaveLink(self), sock=sock)
        self.port = sock.getsockname()[1]
        self._housekeeping = loop.create_task(self._housekeep(), name="ha-housekeeping")
        log.info("replication port %d open", self.port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for link in list(self.links):
            link.close()
        task, self._housekeeping = self._housekeeping, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if server is not None:
            await server.wait_closed()

    def cursor_for(self, requested: int) -> TransferCursor:
        return TransferCursor(self.source, requested)

    def link_opened(self, link: SlaveLink) -> None:
        self.links.append(link)
        self.transfer.slaves = len(self.links)
        log.info("slave %s connected", link.peer)

    def link_closed(self, link: SlaveLink) -> None:
        if link in self.links:
            self.links.remove(link)
        self.transfer.slaves = len(self.links)
        log.info("slave %s disconnected (acknowledged %d)", link.peer, link.ack)

    def acked(self, offset: int) -> None:
        self.transfer.on_ack(offset)
        oldest = min((lk.ack for lk in self.links), default=offset)
        growth = self._growth
        while len(growth) > 1 and growth[1][1] <= oldest:
            growth.popleft()

    def wake(self) -> None:
        """The log grew (called after each dispatch step)."""
        end = self.source.max_offset
        growth = self._growth
        if not growth or growth[-1][1] < end:
            now = self._now_ms()
            if growth and now - growth[-1][0] < _GROWTH_STEP_MS:
                growth[-1] = (growth[-1][0], end)  # one sample per step: lag is over by < 10 ms
            else:
                growth.append((now, end))
        for link in self.links:
            link.pump()  # at once: a SYNC_MASTER send waits for these bytes

    def lag_ms(self, ack: int) -> int:
        """How long the oldest byte past ``ack`` has waited (0 when there is none)."""
        if ack >= self.source.max_offset:
            return 0
        for at, end in self._growth:
            if end > ack:
                return max(0, self._now_ms() - at)
        return 0

    def infos(self) -> list[HAConnectionInfo]:
        end = self.source.max_offset
        out = []
        for link in self.links:
            diff = max(0, end - link.ack) if link.ack >= 0 else end
            out.append(
                HAConnectionInfo(
                    addr=link.peer,
                    slave_ack_offset=link.ack,
                    diff=diff,
                    in_sync=link.ack >= 0 and diff < self.settings.max_gap,
                    transferred_byte_in_second=link.bytes_per_s,
                    transfer_from_where=link.cursor.next if link.cursor is not None else -1,
                    lag_ms=self.lag_ms(link.ack),
                )
            )
        return out

    async def _housekeep(self) -> None:
        every = max(1, int(min(1.0, self.settings.heartbeat_s / 2) / _TICK_S))
        rounds = 0
        while True:
            await asyncio.sleep(_TICK_S)
            self.transfer.tick()
            rounds += 1
            if rounds % every == 0:
                now = time.monotonic()
                for link in list(self.links):
                    link.housekeep(now)
