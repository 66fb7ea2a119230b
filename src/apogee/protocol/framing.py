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
ProtocolError after which the stream is unusable (the connection closes).
"""

from __future__ import annotations

import struct

from apogee.codes import SerializeType
from apogee.errors import FrameTooLargeError, ProtocolError
from apogee.protocol import header_binary, header_json
from apogee.protocol.command import Buffer, RemotingCommand

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength

_PREFIX = struct.Struct(">ii")
_LENGTH = struct.Struct(">i")
_HEADER_MASK = 0xFFFFFF

_ENCODERS = {SerializeType.JSON: header_json.encode, SerializeType.ROCKETMQ: header_binary.encode}
_JSON = SerializeType.JSON
_json_encode = header_json.encode
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
    # JSON first, without hashing the enum (Enum.__hash__ is Python code).
    header = _json_encode(cmd) if kind is _JSON else _ENCODERS[kind](cmd)
    h = len(header)
    if h > _HEADER_MASK:
        raise ProtocolError(f"header of {h} bytes does not fit 24 bits")
    body = cmd.body
    # bytes first: isinstance against a union builds the union on every call
    if type(body) is bytes or isinstance(body, _BUFFER_TYPES):
        b = len(body) if type(body) is bytes else memoryview(body).nbytes
        head = _pack_prefix(4 + h + b, (kind << 24) | h) + header
        return [head, body] if b else [head]
    buffers = [part for part in body if len(part)]
    b = sum(memoryview(part).nbytes for part in buffers)
    head = _pack_prefix(4 + h + b, (kind << 24) | h) + header
    return [head, *buffers]


def encode_bytes(cmd: RemotingCommand) -> bytes:
    """The whole frame as one bytes object (tests, small control messages)."""
    return b"".join(encode(cmd))


class FrameDecoder:
    """Turns a byte stream, split anywhere, into commands.

    ``feed`` returns every command completed by the new bytes and keeps any
    trailing partial frame for the next call. After a ProtocolError the
    decoder must be discarded with its connection.
    """

    __slots__ = ("_buf", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        if self._buf:
            self._buf += data
            src: bytes | bytearray | memoryview = self._buf
        else:
            # Common case: the chunk starts on a frame boundary; parse it in place.
            src = data
        out: list[RemotingCommand] = []
        pos = self._parse(src, out)
        if src is self._buf:
            del self._buf[:pos]
        elif pos < len(data):
            self._buf += memoryview(data)[pos:]
        return out

    def _parse(self, src: bytes | bytearray | memoryview, out: list[RemotingCommand]) -> int:
        end = len(src)
        pos = 0
        limit = self.max_frame_bytes
        while end - pos >= 4:
            (length,) = _LENGTH.unpack_from(src, pos)
            if length + 4 > limit:
                raise FrameTooLargeError(
                    f"frame of {length + 4} bytes exceeds the maximum of {limit}"
                )
            if length < 4:
                raise ProtocolError(f"frame length {length} is shorter than the type word")
            if end - pos - 4 < length:
                break
            out.append(self._frame(src, pos + 4, length))
            pos += 4 + length
        return pos

    @staticmethod
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
