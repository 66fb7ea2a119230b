"""Remoting frames: command -> buffers, and a stream decoder for bytes -> commands.

Owns: the length-prefixed frame format and the frame size limit.
No I/O, no opaque allocation, no timers (sans-I/O: the caller moves bytes).

Frame, big-endian::

    +-----------+--------------------------+------------+----------+
    | int32 L   | int32 T                  | header (H) | body (B) |
    +-----------+--------------------------+------------+----------+
    L = 4 + H + B   (everything after L itself)
    T = serializeType << 24 | H      (0 = JSON, 1 = ROCKETMQ binary)

Invariants: ``L + 4`` never exceeds ``max_frame_bytes`` (RocketMQ's Netty
decoder limit, 16 MiB by default), checked as soon as the length word is
seen and before the frame is buffered; ``H <= L - 4``. Any violation is a
ProtocolError after which the stream is unusable (the connection closes); the
frames before the malformed one are still given, a header's fault is found
only when its frame is decoded.
"""

from __future__ import annotations

import struct

from apogee.codes import SerializeType
from apogee.errors import FrameTooLargeError, ProtocolError
from apogee.protocol import header_binary, header_json, header_scan, header_write
from apogee.protocol.command import Buffer, RemotingCommand

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength

_PREFIX = struct.Struct(">ii")
_LENGTH = struct.Struct(">i")
_HEADER_MASK = 0xFFFFFF

_ENCODERS = {SerializeType.JSON: header_json.encode, SerializeType.ROCKETMQ: header_binary.encode}
_JSON = SerializeType.JSON
_json_encode = header_json.encode
# The whole frame start in one bytes object, when header_write is compiled.
_scan_frame = header_write.encode_frame if header_write.COMPILED else None
_scan_read = header_scan.decode_frame if header_scan.COMPILED else None
_pack_prefix = _PREFIX.pack
_BUFFER_TYPES = (bytes, bytearray, memoryview)
_DECODERS = {
    SerializeType.JSON.value: header_json.decode,
    SerializeType.ROCKETMQ.value: header_binary.decode,
}


def encode(cmd: RemotingCommand) -> list[Buffer]:
    """Frame ``cmd``: prefix and header in one bytes object, then the body buffers.

    Body buffers are passed through untouched, so memoryviews of mapped files
    reach ``transport.writelines`` without a copy.
    """
    kind = cmd.serialize_type
    body = cmd.body
    if kind is _JSON and _scan_frame is not None and type(body) is bytes:
        # Compiled: length and type words written with the header, no join.
        head = _scan_frame(cmd, len(body))
        if head is not None:
            return [head, body] if body else [head]
    # JSON first, without hashing the enum (Enum.__hash__ is Python code).
    header = _json_encode(cmd) if kind is _JSON else _ENCODERS[kind](cmd)
    h = len(header)
    if h > _HEADER_MASK:
        raise ProtocolError(f"header of {h} bytes does not fit 24 bits")
    # bytes first: isinstance against a union builds the union on every call
    if type(body) is bytes or isinstance(body, _BUFFER_TYPES):
        b = len(body) if type(body) is bytes else memoryview(body).nbytes
        head = _pack_prefix(4 + h + b, (kind << 24) | h) + header
        return [head, body] if b else [head]
    # a loop, not a comprehension and a generator: two frames fewer per pull answer
    buffers: list[Buffer] = []
    b = 0
    for part in body:
        if len(part):
            buffers.append(part)
            b += memoryview(part).nbytes
    head = _pack_prefix(4 + h + b, (kind << 24) | h) + header
    return [head, *buffers]


def encode_bytes(cmd: RemotingCommand) -> bytes:
    """The whole frame as one bytes object (tests, small control messages)."""
    return b"".join(encode(cmd))


class FrameDecoder:
    """Turns a byte stream, split anywhere, into commands, each decoded when asked for.

    ``push`` takes bytes in: the length word of every frame they complete is
    checked at once, and the complete frames wait undecoded (in the bytes read,
    or in the decoder's buffer when a frame spans reads) until ``take`` decodes
    them; a trailing partial frame is kept for the next push. So frames waiting
    for their turn cost no object each, nothing the cycle collector walks.
    ``read`` is a push and a take in one pass, ``feed`` one that takes all.

    A malformed frame is found by ``push`` (its length word) or by ``take``
    (its header); either way the frames before it are still given by ``take``,
    which then raises the error, as it does from then on: the stream is
    unusable past it, and nothing after it is kept.

    When bytes complete a partial frame while nothing else waits, only that
    frame's rest goes into the buffer: it is decoded there at once (the one
    frame ever decoded before ``take``; its header's fault is then found by
    ``push``, with nothing before it) and the frames after it wait in the
    bytes read. A read of several large frames is so copied once, not
    appended whole to the buffer and copied out again.
    """

    __slots__ = (
        "_buf", "_end", "_error", "_first", "_pos", "_src", "_waiting", "max_frame_bytes",
    )  # fmt: skip

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        # The complete frames waiting are _src[_pos:_end]: the bytes of one read
        # when they all came in it, else _buf, whose partial frame then follows.
        self._src: bytes | bytearray = b""
        self._pos = 0
        self._end = 0
        self._waiting = 0
        self._buf = bytearray()  # the partial frame (after the waiting ones if _src is _buf)
        # A frame completed in _buf and decoded there, waiting before those of _src
        # (counted in _waiting)
        self._first: RemotingCommand | None = None
        self._error: Exception | None = None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf) - self._end if self._src is self._buf else len(self._buf)

    @property
    def waiting(self) -> int:
        """Complete frames not yet taken."""
        return self._waiting

    @property
    def pending(self) -> bool:
        """Frames wait, or a malformed one was found: ``take`` has more to say."""
        return self._waiting > 0 or self._error is not None

    @property
    def failed(self) -> bool:
        """A malformed frame was found: ``take`` raises once the frames before it are taken."""
        return self._error is not None

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Every command completed by ``data``; ProtocolError if any frame is malformed."""
        out = self.read(data)
        if self._error is not None:
            raise self._error
        return out

    def read(
        self, data: bytes | bytearray | memoryview, limit: int | None = None
    ) -> list[RemotingCommand]:
        """``push(data)`` then ``take(limit)``, decoding in place what is taken now."""
        if self._buf or self._waiting or self._error is not None:
            self.push(data)
            return self.take(limit)
        # Common case: the read starts on a frame boundary and nothing waits.
        if _scan_read is not None and limit != 0:
            # Compiled: one whole JSON frame (the usual request) in one call.
            try:
                cmd = _scan_read(data, self.max_frame_bytes)
            except Exception:  # never its own error: the usual way below decides
                cmd = None
            if cmd is not None:
                return [cmd]
        out: list[RemotingCommand] = []
        end = len(data)
        pos = 0
        most = self.max_frame_bytes
        while end - pos >= 4 and len(out) != limit:
            (length,) = _LENGTH.unpack_from(data, pos)
            if length + 4 > most or length < 4 or end - pos - 4 < length:
                break  # a bad length word or a partial frame: kept (as the error) below
            try:
                out.append(_frame(data, pos + 4, length))
            except Exception as exc:  # a fault of any header decoder
                self._error = exc
                if not out:
                    raise
                return out
            pos += 4 + length
        if pos < end:
            if limit is not None and type(data) is not bytes:
                data = bytes(memoryview(data)[pos:])  # frames left may wait: never a reused buffer
                pos = 0
            self._keep(data, pos)
            if not out and self._error is not None:
                raise self._error  # a bad length word first
        return out

    def push(self, data: bytes | bytearray | memoryview) -> int:
        """Take ``data`` in; the number of frames it completed (they wait for ``take``)."""
        if self._error is not None:
            return 0  # nothing past a malformed frame is kept
        if type(data) is not bytes:  # it may wait here: never a buffer its owner reuses
            data = bytes(data)
        buf = self._buf
        if not self._waiting:
            if not buf:
                return self._keep(data, 0)
            if len(buf) >= 4:  # its length word was checked as it came
                (length,) = _LENGTH.unpack_from(buf)
                need = length + 4 - len(buf)
                if need <= len(data):
                    return self._complete(data, need)
        if self._src is not buf:
            # Gather any frames still waiting in an earlier read before the partial
            # frame this data continues (rare: reading is paused while frames wait).
            if self._waiting:
                buf[0:0] = memoryview(self._src)[self._pos : self._end]
                self._end -= self._pos
            else:
                self._end = 0
            self._src, self._pos = buf, 0
        buf += data
        end, count = self._scan(buf, self._end)
        if self.failed:
            del buf[end:]
        self._end = end
        self._waiting += count
        if not self._waiting:
            self._src, self._end = b"", 0
        return count

    def _complete(self, data: bytes, need: int) -> int:
        """The partial frame (alone in the buffer) completed by ``data[:need]`` and
        decoded; the frames of ``data`` after it wait there (see the class docstring)."""
        buf = self._buf
        buf += memoryview(data)[:need]
        try:
            first = _frame(buf, 4, len(buf) - 4)
        except Exception as exc:  # a fault of any header decoder: nothing after it is kept
            self._error = exc
            self._buf = bytearray()
            return 1
        buf.clear()
        count = self._keep(data, need)
        self._first = first
        self._waiting = count + 1
        return count + 1

    def _keep(self, data: bytes | bytearray | memoryview, pos: int) -> int:
        """Keep ``data[pos:]`` when nothing else is held: its frames in it, undecoded."""
        end, count = self._scan(data, pos)
        if count:
            assert type(data) is bytes  # bytes from a caller may wait; a buffer is copied
            self._src, self._pos, self._end, self._waiting = data, pos, end, count
        if not self.failed and end < len(data):
            self._buf += memoryview(data)[end:]
        return count

    def _scan(self, src: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
        """(end of the complete frames from ``pos``, how many); a bad length word is kept
        as the error, and the scan stops before it."""
        end = len(src)
        limit = self.max_frame_bytes
        count = 0
        while end - pos >= 4:
            (length,) = _LENGTH.unpack_from(src, pos)
            if length + 4 > limit:
                self._error = FrameTooLargeError(
                    f"frame of {length + 4} bytes exceeds the maximum of {limit}"
                )
                break
            if length < 4:
                self._error = ProtocolError(f"frame length {length} is shorter than the type word")
                break
            if end - pos - 4 < length:
                break
            pos += 4 + length
            count += 1
        return pos, count

    def take(self, limit: int | None = None) -> list[RemotingCommand]:
        """Decode up to ``limit`` (default all) of the waiting frames, in order.

        At a malformed frame: the commands before it if there are any (the
        error waits for the next call), else the error.
        """
        waiting = self._waiting
        if not waiting:
            if self._error is not None:
                raise self._error
            return []
        n = waiting if limit is None or limit >= waiting else limit
        out: list[RemotingCommand] = []
        first = self._first
        if first is not None and n:
            self._first = None
            out.append(first)
            n -= 1
            waiting -= 1
        src, pos = self._src, self._pos
        try:
            for _ in range(n):
                (length,) = _LENGTH.unpack_from(src, pos)
                out.append(_frame(src, pos + 4, length))
                pos += 4 + length
        except Exception as exc:  # a fault of any header decoder: the stream is unusable
            self._error = exc
            self._src, self._pos, self._end, self._waiting = b"", 0, 0, 0
            self._buf = bytearray()
            if not out:
                raise
            return out
        waiting -= n
        self._waiting = waiting
        if src is self._buf:
            # Taken frames leave the buffer (deleting a bytearray's front is cheap).
            del self._buf[:pos]
            self._end -= pos
            if not waiting:
                self._src, self._end = b"", 0
        elif waiting:
            self._pos = pos
        else:
            self._src, self._pos, self._end = b"", 0, 0
        return out


def _frame(src: bytes | bytearray | memoryview, start: int, length: int) -> RemotingCommand:
    (type_word,) = _LENGTH.unpack_from(src, start)
    h = type_word & _HEADER_MASK
    if h > length - 4:
        raise ProtocolError(f"header length {h} exceeds frame length {length} - 4")
    decode = _DECODERS.get((type_word >> 24) & 0xFF)
    if decode is None:
        raise ProtocolError(f"unknown serialize type {(type_word >> 24) & 0xFF}")
    hstart = start + 4
    bstart = hstart + h
    bend = start + length
    if bend <= bstart:
        body = b""
    elif type(src) is bytes:
        body = src[bstart:bend]
    else:
        # One copy: slicing a bytearray copies once and bytes() again. Pull
        # answers (32 records of 1 KiB and more) are most often assembled
        # here over several reads. The view is gone when the expression
        # ends, so the buffer may still resize.
        body = bytes(memoryview(src)[bstart:bend])
    # Slicing copies the (small) header, so no view pins the bytearray buffer.
    return decode(src[hstart:bstart], body)
