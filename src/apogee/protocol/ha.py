"""RocketMQ's classic replication wire format: slave offset reports, master transfer frames.

Owns: encoding both kinds of message, and the incremental decoders that take
bytes as a socket delivers them. No I/O. The connection is a plain TCP
stream from the slave to the master's HA port (``haListenPort``), outside the
remoting protocol::

    slave -> master, repeated
        +--------------------------+
        | int64 slave max offset   |   big-endian; the first report is where
        +--------------------------+   the master starts, later ones are acks

    master -> slave, repeated
        +------------------------+-------------+---------------------------+
        | int64 physical offset  | int32 size  | size bytes of commit log   |
        +------------------------+-------------+---------------------------+
        size 0 is a heartbeat; its offset is where the next transfer starts

A master reads only whole 8-byte reports and keeps the newest; a partial one
waits for its remaining bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from apogee.errors import ProtocolError

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
REPORT_SIZE: Final = REPORT.size  # 8
HEADER_SIZE: Final = HEADER.size  # 12

_pack_report = REPORT.pack
_pack_header = HEADER.pack
_unpack_header = HEADER.unpack_from


def encode_report(offset: int) -> bytes:
    """A slave's report of its commit log's max offset."""
    if offset < 0:
        raise ValueError(f"offset {offset} is negative")
    return _pack_report(offset)


def encode_header(offset: int, size: int) -> bytes:
    """The header of a master's transfer of ``size`` bytes at ``offset`` (0: heartbeat)."""
    if offset < 0 or not 0 <= size < 1 << 31:
        raise ValueError(f"offset {offset} or size {size} out of range")
    return _pack_header(offset, size)


class ReportReader:
    """The master's side: the newest whole report in the bytes read so far."""

    def __init__(self) -> None:
        self._partial = b""
        self.reports = 0

    def feed(self, data: bytes | bytearray | memoryview) -> int | None:
        """Take bytes from the socket; the last complete report in them, or None.

        Raises:
            ProtocolError: a report is negative (no slave has such an offset).
        """
        buf = self._partial + bytes(data) if self._partial else bytes(data)
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._partial = buf[whole:]
        if not whole:
            return None
        self.reports += whole // REPORT_SIZE
        (offset,) = REPORT.unpack_from(buf, whole - REPORT_SIZE)
        if offset < 0:
            raise ProtocolError(f"slave reported a negative offset {offset}")
        return int(offset)


class TransferReader:
    """The slave's side: frames out of a receive buffer a socket reads straight into.

    ``buffer()`` is where the next read goes (as an ``asyncio.BufferedProtocol``
    wants it) and ``filled(n)`` says how much arrived; ``frames()`` then
    yields each complete frame as (offset, view of its body). A view is valid
    only until the generator is resumed: the caller copies or appends the
    bytes at once. Frames longer than the buffer make it grow, up to
    ``max_frame_bytes``.
    """

    def __init__(self, capacity: int = 4 << 20, *, max_frame_bytes: int = 64 << 20) -> None:
        if capacity < 4 * HEADER_SIZE:
            raise ValueError("capacity is too small")
        self._buf = bytearray(capacity)
        self._view = memoryview(self._buf)
        self._start = 0  # first byte not consumed
        self._end = 0  # end of the bytes received
        self.max_frame_bytes = max_frame_bytes
        self.frames_read = 0

    @property
    def pending(self) -> int:
        """Bytes received and not yet consumed as a whole frame."""
        return self._end - self._start

    def buffer(self, min_free: int = 64 * 1024) -> memoryview:
        """Free space at the end of the buffer, compacting first when short of it."""
        free = len(self._buf) - self._end
        if free < min_free or free < len(self._buf) // 4:
            self._compact()
        return self._view[self._end :]

    def filled(self, n: int) -> None:
        if n < 0 or self._end + n > len(self._buf):
            raise ValueError(f"{n} bytes do not fit the buffer")
        self._end += n

    def frames(self) -> Iterator[tuple[int, memoryview]]:
        """Each complete frame received so far, in order.

        Raises:
            ProtocolError: a negative offset or size, or a frame over the limit.
        """
        view = self._view
        while self._end - self._start >= HEADER_SIZE:
            offset, size = _unpack_header(view, self._start)
            if offset < 0 or size < 0:
                raise ProtocolError(f"bad transfer header: offset {offset}, size {size}")
            if size > self.max_frame_bytes:
                raise ProtocolError(f"transfer of {size} bytes exceeds {self.max_frame_bytes}")
            body = self._start + HEADER_SIZE
            if self._end - body < size:
                if HEADER_SIZE + size > len(self._buf):
                    self._grow(HEADER_SIZE + size)
                    view = self._view
                return
            self._start = body + size
            self.frames_read += 1
            part = view[body : body + size]
            try:
                yield offset, part
            finally:
                part.release()

    def reset(self) -> None:
        """Forget everything received (a new connection)."""
        self._start = self._end = 0

    def _compact(self) -> None:
        n = self._end - self._start
        if self._start:
            self._buf[:n] = self._buf[self._start : self._end]
        self._start, self._end = 0, n

    def _grow(self, size: int) -> None:
        # A new buffer, not a resized one: views of the old may still be alive.
        n = self._end - self._start
        buf = bytearray(max(size, min(2 * len(self._buf), self.max_frame_bytes + HEADER_SIZE)))
        buf[:n] = self._view[self._start : self._end]
        self._buf, self._view = buf, memoryview(buf)
        self._start, self._end = 0, n
