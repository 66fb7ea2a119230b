"""ROCKETMQ binary command header (serialize type 1).

Owns: header bytes <-> RemotingCommand for the compact form Java clients use
when ``rocketmq.serialize.type=ROCKETMQ``.

Layout, big-endian, minimum 21 bytes::

    +--------+--------+---------+--------+--------+------------------+-------------------+
    | code   | lang   | version | opaque | flag   | remark           | extFields         |
    | int16  | int8   | int16   | int32  | int32  | int32 n + n UTF8 | int32 m + m bytes |
    +--------+--------+---------+--------+--------+------------------+-------------------+

    extFields section (m bytes), repeated to its end:
    +-----------+-----------+-------------+-------------+
    | int16 kl  | kl UTF-8  | int32 vl    | vl UTF-8    |
    +-----------+-----------+-------------+-------------+

Rules (RocketMQSerializable): a zero-length string reads back as null, so an
empty remark is None and an ext field whose value is empty is absent; any
length pointing beyond the header is a ProtocolError. ``code`` and
``version`` are int16 on the wire, so larger values cannot be encoded.
"""

from __future__ import annotations

import struct

from apogee.codes import LanguageCode, SerializeType
from apogee.errors import ProtocolError
from apogee.protocol.command import Body, RemotingCommand

_FIXED = struct.Struct(">hbhii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
MIN_HEADER_LENGTH = _FIXED.size + 4 + 4
assert MIN_HEADER_LENGTH == 21

_LANGUAGE_BY_VALUE = {lang.value: lang for lang in LanguageCode}


def encode(cmd: RemotingCommand) -> bytes:
    """The binary header of ``cmd``."""
    if not -0x8000 <= cmd.code <= 0x7FFF:
        raise ProtocolError(f"code {cmd.code} does not fit the binary header's int16")
    if not -0x8000 <= cmd.version <= 0x7FFF:
        raise ProtocolError(f"version {cmd.version} does not fit the binary header's int16")
    parts = [_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode() if cmd.remark else b""
    parts.append(_I32.pack(len(remark)))
    parts.append(remark)
    ext = _encode_ext(cmd.ext_fields)
    parts.append(_I32.pack(len(ext)))
    parts.append(ext)
    return b"".join(parts)


def _encode_ext(ext_fields: dict[str, str]) -> bytes:
    parts: list[bytes] = []
    for key, value in ext_fields.items():
        if not key or not value:
            continue  # null and empty read back as null: not worth the bytes
        k = key.encode()
        v = value.encode()
        if len(k) > 0x7FFF:
            raise ProtocolError(f"ext field name longer than 32767 bytes: {key[:40]!r}...")
        parts.append(_I16.pack(len(k)))
        parts.append(k)
        parts.append(_I32.pack(len(v)))
        parts.append(v)
    return b"".join(parts)


def decode(header: bytes | bytearray | memoryview, body: Body) -> RemotingCommand:
    """Build a command from a binary header and its (already sliced) body."""
    view = memoryview(header)
    size = len(view)
    if size < MIN_HEADER_LENGTH:
        raise ProtocolError(f"binary header of {size} bytes is shorter than {MIN_HEADER_LENGTH}")
    code, lang, version, opaque, flag = _FIXED.unpack_from(view, 0)
    pos = _FIXED.size
    remark, pos = _read_str(view, pos, 4, "remark")
    if pos + 4 > size:
        raise ProtocolError("binary header ends inside the extFields length")
    (ext_len,) = _I32.unpack_from(view, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len > size:
        raise ProtocolError(f"binary header extFields length {ext_len} exceeds the header")
    ext_fields = _decode_ext(view, pos, pos + ext_len)
    return RemotingCommand(
        code,
        language=_LANGUAGE_BY_VALUE.get(lang, LanguageCode.OTHER),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _read_str(view: memoryview, pos: int, width: int, what: str) -> tuple[str | None, int]:
    end = len(view)
    if pos + width > end:
        raise ProtocolError(f"binary header ends inside the length of {what}")
    (n,) = (_I16 if width == 2 else _I32).unpack_from(view, pos)
    pos += width
    if n == 0:
        return None, pos
    if n < 0 or pos + n > end:
        raise ProtocolError(f"binary header {what} length {n} exceeds the header")
    try:
        return str(view[pos : pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"binary header {what} is not UTF-8") from exc


def _decode_ext(view: memoryview, pos: int, end: int) -> dict[str, str]:
    section = view[:end]
    out: dict[str, str] = {}
    while pos < end:
        key, pos = _read_str(section, pos, 2, "ext field name")
        value, pos = _read_str(section, pos, 4, f"ext field {key!r}")
        if key is not None and value is not None:
            out[key] = value
    return out
