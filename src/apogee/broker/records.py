"""Reading a few fields of stored records without decoding them whole.

Owns: ``record_properties`` (the property string of a commit-log record, as
pulls re-check tags and key queries re-check keys) and ``inflate`` (a
size-capped zlib inflate for compressed batch bodies).

Record positions are those drawn in ``model.message_codec``: the body
length sits at byte 84 for IPv4 hosts and 12 bytes later per IPv6 host;
the topic length is one byte (v1 magic) or two (v2).
"""

from __future__ import annotations

import struct
import zlib

from apogee.model.message import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from apogee.model.message_codec import MESSAGE_MAGIC_CODE_V2, SYSFLAG_POSITION

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_MAGIC_SYSFLAG = struct.Struct(">i28xi")  # magic at 4, sysFlag at 36
_BODY_LENGTH_POSITION_V4 = 84
assert _MAGIC_SYSFLAG.size + 4 == SYSFLAG_POSITION + 4


def _topic_span(record: memoryview | bytes) -> tuple[int, int]:
    """Where one stored record's topic starts, and its length."""
    magic, sys_flag = _MAGIC_SYSFLAG.unpack_from(record, 4)
    pos = _BODY_LENGTH_POSITION_V4
    if sys_flag & BORNHOST_V6_FLAG:
        pos += 12
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        pos += 12
    (body_len,) = _I32.unpack_from(record, pos)
    pos += 4 + body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        return pos + 2, int.from_bytes(record[pos : pos + 2], "big")
    return pos + 1, record[pos]


def record_properties(record: memoryview | bytes) -> str:
    """The property string of one stored record ("" when it has none)."""
    topic_at, topic_len = _topic_span(record)
    pos = topic_at + topic_len
    (props_len,) = _I16.unpack_from(record, pos)
    pos += 2
    return str(record[pos : pos + props_len], "utf-8") if props_len > 0 else ""


def record_topic(record: memoryview | bytes) -> str:
    """The topic of one stored record."""
    topic_at, topic_len = _topic_span(record)
    return str(record[topic_at : topic_at + topic_len], "utf-8")


class InflateError(ValueError):
    """A compressed body that does not inflate, or inflates beyond the limit."""


def inflate(data: bytes | memoryview, limit: int) -> bytes:
    """zlib-inflate ``data``, refusing output over ``limit`` bytes (a zip bomb costs nothing)."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise InflateError(f"compressed body does not inflate: {exc}") from None
    if len(out) > limit:
        raise InflateError(f"compressed body inflates beyond {limit} bytes")
    if not inflater.eof:
        raise InflateError("compressed body is cut short")
    return out
