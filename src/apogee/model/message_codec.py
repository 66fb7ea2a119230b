"""Binary layout of a stored message (a commit-log record) and of batch bodies.

Owns: the record layout and its names; decoding and validating records,
iterating the records of a buffer (a pull response body is exactly such a
run of records), host-address packing and the inner-message format of batch
sends. Encoding a record straight into a caller's buffer and splitting a
batch body are the compiled kernels of ``apogee.model.kernels``, named here
as ``encode_record_into`` and ``decode_batch``.
Pure: no files, no clocks.

Record, all integers big-endian (RocketMQ CommitLog / MessageDecoder)::

    off  size  field
      0     4  TOTALSIZE       whole record, this field included
      4     4  MAGICCODE       v1 0xDAA320A7, v2 0xDAA320AB
      8     4  BODYCRC         crc32(body) & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG
     20     8  QUEUEOFFSET     logical offset in the consume queue
     28     8  PHYSICALOFFSET  commit-log offset of this record
     36     4  SYSFLAG         bit 0x10: born host IPv6, 0x20: store host IPv6
     40     8  BORNTIMESTAMP
     48   8|20 BORNHOST        IPv4 4 bytes + int32 port, or IPv6 16 + 4
     56     8  STORETIMESTAMP  (offsets from here on are for IPv4 hosts)
     64   8|20 STOREHOST
     72     4  RECONSUMETIMES
     76     8  PREPARED TRANSACTION OFFSET
     84     4  BODY length, then the body
      .   1|2  TOPIC length (v1: one signed byte, v2: int16), then the topic
      .     2  PROPERTIES length (int16), then the UTF-8 property string

Size (v1, IPv4 hosts) = 91 + body + topic + properties; v2 adds 1, each IPv6
host adds 12.

A record is valid when its magic is v1/v2, the field lengths add up to
TOTALSIZE, the body CRC matches, the topic is not empty and neither the
topic nor a non-empty property string ends in a zero byte. The last rule is
ours: the CRC covers only the body, so a record whose tail was cut off (and
reads back as zeros) would otherwise pass.

The blank end-of-file record is int32 remaining bytes + int32 0xCBD43194;
the rest of the file after it is undefined.

Batch inner message (client to broker), concatenated::

    int32 totalSize (22 + body + properties), int32 magic (0), int32 bodyCRC (0),
    int32 flag, int32 bodyLen, body, int16 propertiesLen, properties
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Final

from zlib_ng.zlib_ng import crc32  # the same CRC-32 as zlib, several times faster

from apogee.errors import ProtocolError
from apogee.model import kernels
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    BatchItem,
    HostPort,
    Message,
    MessageExt,
    properties_to_string,
    string_to_properties,
)
from apogee.model.msgid import create_offset_msg_id

MESSAGE_MAGIC_CODE_V1: Final = -626843481  # 0xDAA320A7 as a Java int
MESSAGE_MAGIC_CODE_V2: Final = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH: Final = 8
CRC_MASK: Final = 0x7FFFFFFF

TOTAL_SIZE_POSITION: Final = 0
MAGIC_CODE_POSITION: Final = 4
BODY_CRC_POSITION: Final = 8
QUEUE_ID_POSITION: Final = 12
FLAG_POSITION: Final = 16
QUEUE_OFFSET_POSITION: Final = 20
PHYSICAL_OFFSET_POSITION: Final = 28
SYSFLAG_POSITION: Final = 36
BORN_TIMESTAMP_POSITION: Final = 40
BORN_HOST_POSITION: Final = 48
STORE_TIMESTAMP_POSITION_V4: Final = 56

MAX_TOPIC_LENGTH_V1: Final = 127
MAX_PROPERTIES_LENGTH: Final = 32767

# Fixed part up to and including BORNTIMESTAMP.
_PREFIX = struct.Struct(">iiiiiqqiq")
assert _PREFIX.size == 48


# From BORNHOST to the body length, by (born v6, store v6).
_MIDDLES: Final = {
    (born_v6, store_v6): struct.Struct(f">{20 if born_v6 else 8}sq{20 if store_v6 else 8}siqi")
    for born_v6 in (False, True)
    for store_v6 in (False, True)
}
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_BLANK = struct.Struct(">ii")
_BATCH_HEAD = struct.Struct(">iiiii")


def record_size(
    sys_flag: int, body_len: int, topic_len: int, props_len: int, v2: bool = False
) -> int:
    """Size of a record with these field lengths (RocketMQ ``calMsgLength``)."""
    size = 91 + body_len + topic_len + props_len + (1 if v2 else 0)
    if sys_flag & BORNHOST_V6_FLAG:
        size += 12
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        size += 12
    return size


@lru_cache(maxsize=1024)
def pack_host(host: HostPort) -> bytes:
    """Address bytes + int32 port: 8 bytes for IPv4, 20 for IPv6."""
    packed = ipaddress.ip_address(host[0]).packed
    return packed + host[1].to_bytes(4, "big", signed=True)


@lru_cache(maxsize=1024)
def unpack_host(data: bytes) -> HostPort:
    """Inverse of :func:`pack_host`."""
    port = int.from_bytes(data[-4:], "big", signed=True)
    return (str(ipaddress.ip_address(data[:-4])), port)


def host_sys_flags(born_host: bytes, store_host: bytes) -> int:
    """The sysFlag bits that announce IPv6 born/store hosts."""
    flags = 0
    if len(born_host) == 20:
        flags |= BORNHOST_V6_FLAG
    if len(store_host) == 20:
        flags |= STOREHOSTADDRESS_V6_FLAG
    return flags


def topic_prefix(topic: str) -> bytes:
    """The v1 TOPIC field: one length byte plus the UTF-8 name."""
    data = topic.encode()
    if len(data) > MAX_TOPIC_LENGTH_V1:
        raise ValueError(f"topic is {len(data)} bytes, the v1 record allows {MAX_TOPIC_LENGTH_V1}")
    return bytes((len(data),)) + data


#: Write one v1 record at ``buf[pos:]`` and return its size: the compiled
#: kernel (see ``apogee.model.kernels.encode_record_into`` for the arguments).
encode_record_into: Callable[..., int] = kernels.encode_record_into


def encode_record(
    *,
    topic: str,
    body: bytes,
    queue_id: int = 0,
    flag: int = 0,
    properties: str = "",
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: HostPort = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: HostPort = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
) -> bytes:
    """One record as bytes (tests, transaction-check bodies); sets the host bits."""
    born = pack_host(born_host)
    store = pack_host(store_host)
    sys_flag = (sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)) | host_sys_flags(
        born, store
    )
    tfield = topic_prefix(topic)
    props = properties.encode()
    out = bytearray(record_size(sys_flag, len(body), len(tfield) - 1, len(props)))
    encode_record_into(
        out,
        0,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born,
        store_timestamp,
        store,
        reconsume_times,
        prepared_transaction_offset,
        body,
        tfield,
        props,
    )
    return bytes(out)


def write_blank(buf: object, pos: int, remaining: int) -> None:
    """Write the end-of-file marker announcing ``remaining`` unused bytes."""
    _BLANK.pack_into(buf, pos, remaining, BLANK_MAGIC_CODE)  # type: ignore[arg-type]


class RecordKind(Enum):
    MESSAGE = "message"
    BLANK = "blank"  # end-of-file marker: the rest of the file is unused
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class RecordMeta:
    """The fields of a record the store needs to index it (no body copy)."""

    size: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    body_offset: int  # position of the body inside the record
    body_len: int
    topic: str
    properties: str


@dataclass(frozen=True, slots=True)
class CheckedRecord:
    """Outcome of validating the bytes at one position."""

    kind: RecordKind
    size: int  # record size; the blank length for BLANK; 0 for INVALID
    meta: RecordMeta | None = None
    problem: str = ""


def check_record(
    buf: bytes | bytearray | memoryview, pos: int, end: int, check_crc: bool = True
) -> CheckedRecord:
    """Validate the record at ``buf[pos:end]`` (see the module docstring).

    Never raises on bad bytes; the problem is described in the result.
    """
    if end - pos < 8:
        return CheckedRecord(RecordKind.INVALID, 0, problem="fewer than 8 bytes left")
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        if total < END_FILE_MIN_BLANK_LENGTH or total > end - pos:
            return CheckedRecord(RecordKind.INVALID, 0, problem=f"blank marker of size {total}")
        return CheckedRecord(RecordKind.BLANK, total)
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        return CheckedRecord(RecordKind.INVALID, 0, problem=f"bad magic 0x{magic & 0xFFFFFFFF:08X}")
    if total < 91 or total > end - pos:
        return CheckedRecord(RecordKind.INVALID, 0, problem=f"total size {total} out of range")
    try:
        meta = _parse_meta(buf, pos, total, magic == MESSAGE_MAGIC_CODE_V2)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        return CheckedRecord(RecordKind.INVALID, 0, problem=f"malformed record: {exc}")
    if meta is None:
        return CheckedRecord(
            RecordKind.INVALID, 0, problem="field lengths disagree with total size"
        )
    if check_crc:
        body_start = pos + meta.body_offset
        crc = crc32(buf[body_start : body_start + meta.body_len]) & CRC_MASK
        if crc != meta.body_crc:
            return CheckedRecord(
                RecordKind.INVALID, 0, problem=f"body CRC {crc} != stored {meta.body_crc}"
            )
    return CheckedRecord(RecordKind.MESSAGE, total, meta)


def _parse_meta(
    buf: bytes | bytearray | memoryview, pos: int, total: int, v2: bool
) -> RecordMeta | None:
    (_, _, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts) = _PREFIX.unpack_from(
        buf, pos
    )
    middle = _MIDDLES[
        (bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))
    ]
    (_, store_ts, _, reconsume, prepared, body_len) = middle.unpack_from(buf, pos + 48)
    body_offset = 48 + middle.size
    if body_len < 0 or body_offset + body_len > total:
        return None
    p = pos + body_offset + body_len
    if v2:
        topic_len = int.from_bytes(buf[p : p + 2], "big")
        p += 2
    else:
        topic_len = buf[p]
        topic_len = topic_len - 256 if topic_len > 127 else topic_len
        p += 1
    if topic_len <= 0 or p + topic_len + 2 > pos + total or buf[p + topic_len - 1] == 0:
        return None
    topic = bytes(buf[p : p + topic_len]).decode()
    p += topic_len
    (props_len,) = _I16.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != pos + total:
        return None
    if props_len and buf[p + props_len - 1] == 0:
        return None  # a zeroed tail: the record was cut short
    props = bytes(buf[p : p + props_len]).decode() if props_len else ""
    return RecordMeta(
        total,
        queue_id,
        flag,
        queue_offset,
        phys,
        sys_flag,
        born_ts,
        store_ts,
        reconsume,
        prepared,
        crc,
        body_offset,
        body_len,
        topic,
        props,
    )


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0) -> MessageExt:
    """Decode the record at ``buf[pos:]`` into a :class:`MessageExt`.

    Raises:
        ProtocolError: the bytes are not a valid record (the CRC is not checked
            here; use :func:`check_record` for that).
    """
    checked = check_record(buf, pos, len(buf), check_crc=False)
    if checked.kind is not RecordKind.MESSAGE or checked.meta is None:
        raise ProtocolError(f"no message record at byte {pos}: {checked.problem or 'blank'}")
    return _to_message_ext(buf, pos, checked.meta)


def _to_message_ext(buf: bytes | bytearray | memoryview, pos: int, meta: RecordMeta) -> MessageExt:
    born_v6 = bool(meta.sys_flag & BORNHOST_V6_FLAG)
    store_v6 = bool(meta.sys_flag & STOREHOSTADDRESS_V6_FLAG)
    born_len = 20 if born_v6 else 8
    store_len = 20 if store_v6 else 8
    born = bytes(buf[pos + 48 : pos + 48 + born_len])
    store_at = pos + 48 + born_len + 8
    store = bytes(buf[store_at : store_at + store_len])
    body_start = pos + meta.body_offset
    return MessageExt(
        topic=meta.topic,
        queue_id=meta.queue_id,
        flag=meta.flag,
        body=bytes(buf[body_start : body_start + meta.body_len]),
        properties=string_to_properties(meta.properties),
        sys_flag=meta.sys_flag,
        born_timestamp=meta.born_timestamp,
        born_host=unpack_host(born),
        store_timestamp=meta.store_timestamp,
        store_host=unpack_host(store),
        reconsume_times=meta.reconsume_times,
        prepared_transaction_offset=meta.prepared_transaction_offset,
        queue_offset=meta.queue_offset,
        commit_log_offset=meta.physical_offset,
        store_size=meta.size,
        body_crc=meta.body_crc,
        msg_id=create_offset_msg_id(store, meta.physical_offset),
    )


def iter_records(buf: bytes | bytearray | memoryview) -> Iterator[MessageExt]:
    """Decode a run of concatenated records, e.g. a pull response body.

    Raises:
        ProtocolError: a record is malformed or cut short.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        checked = check_record(buf, pos, end, check_crc=False)
        if checked.kind is not RecordKind.MESSAGE or checked.meta is None:
            raise ProtocolError(f"bad record at byte {pos}: {checked.problem or 'blank marker'}")
        yield _to_message_ext(buf, pos, checked.meta)
        pos += checked.size


def store_timestamp_at(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """STORETIMESTAMP of the record at ``pos`` (its position depends on the born host)."""
    (sys_flag,) = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)
    at = pos + STORE_TIMESTAMP_POSITION_V4 + (12 if sys_flag & BORNHOST_V6_FLAG else 0)
    return int.from_bytes(buf[at : at + 8], "big", signed=True)


#: Split a batch send body into :class:`BatchItem` values (bodies are
#: zero-copy views); ``apogee.model.kernels.decode_batch``.
decode_batch: Callable[[bytes | bytearray | memoryview], list[BatchItem]] = kernels.decode_batch


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The body of a batch send (RocketMQ ``MessageDecoder.encodeMessages``)."""
    out = bytearray()
    for msg in messages:
        props = properties_to_string(msg.properties).encode()
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise ValueError(f"properties are {len(props)} bytes, the limit is 32767")
        total = 22 + len(msg.body) + len(props)
        out += _BATCH_HEAD.pack(total, 0, 0, msg.flag, len(msg.body))
        out += msg.body
        out += _I16.pack(len(props))
        out += props
    return bytes(out)
