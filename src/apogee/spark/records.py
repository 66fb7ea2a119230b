"""Stored records to Arrow: the source's schema and its column builder.

Owns: ``SOURCE_SCHEMA`` (the DataFrame a ``rocketmq`` read returns), its
Arrow twin, and ``ColumnBuilder``, which walks the records of pull bodies
(the commit-log layout drawn in ``apogee.model.message_codec``) into column
lists and hands them out as ``pyarrow.RecordBatch``es, so no per-message
object is ever made.

The Python loop per record does only what has to be sequential: the fixed
fields with one ``struct`` call, the body and the raw property string by
slicing. The property strings are then parsed for the whole batch with Arrow
compute (split, filter, a group-by only when a name repeats): tags, keys and
the unique key become their columns, ``properties`` holds the rest. ``msgId``
is the producer's unique key (what consumers call msgId), or the offset
message id when the producer set none.

A TAG subscription is matched on the exact tag here too: the broker filters
on tag hash codes, and two tags may share one.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from apogee.errors import ProtocolError
from apogee.model.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
    property_value,
)
from apogee.model.message_codec import MESSAGE_MAGIC_CODE_V2
from apogee.model.subscription import SubscriptionData

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("brokerName", StringType(), False),
        StructField("queueId", IntegerType(), False),
        StructField("queueOffset", LongType(), False),
        StructField("msgId", StringType(), False),
        StructField("tags", StringType(), True),
        StructField("keys", StringType(), True),
        StructField("body", BinaryType(), False),
        StructField("properties", MapType(StringType(), StringType(), True), False),
        StructField("bornTimestamp", TimestampType(), False),
        StructField("storeTimestamp", TimestampType(), False),
        StructField("reconsumeTimes", IntegerType(), False),
    ]
)
ARROW_SCHEMA: pa.Schema = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
# BORNHOST STORETIMESTAMP STOREHOST RECONSUMETIMES PREPARED BODYLEN, for IPv4 hosts
_V4_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")
assert _V4_HEAD.size == 88
_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_TAKEN_OUT = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


class ColumnBuilder:
    """Column lists for one output partition; ``flush`` turns them into a RecordBatch."""

    def __init__(self, topic: str, broker_name: str, queue_id: int) -> None:
        self.topic = topic
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.bytes_read = 0
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.bodies: list[bytes] = []
        self.props: list[bytes] = []
        self.ids: list[bytes] = []  # STOREHOST + PHYSICALOFFSET: the offset message id
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsumes: list[int] = []

    def __len__(self) -> int:
        return len(self.offsets)

    # One flat loop on purpose: a helper call per record costs more than its decoding.
    def add(self, body: bytes, end_offset: int, sub: SubscriptionData | None) -> int:
        """Append the records of a pull body with queue offsets below ``end_offset``.

        Returns the queue offset after the last record looked at (kept or
        filtered out); records at or past ``end_offset`` are not looked at.
        """
        self.bytes_read += len(body)
        pos = 0
        size = len(body)
        next_offset = -1
        view = memoryview(body)
        matching = sub is not None and not sub.is_all
        v4_head, v6_flags, v2_magic = _V4_HEAD.unpack_from, _V6_FLAGS, MESSAGE_MAGIC_CODE_V2
        offsets, bodies, props, ids = self.offsets, self.bodies, self.props, self.ids
        born_list, stored_list, reconsumes = self.born, self.stored, self.reconsumes
        while pos < size:
            if size - pos < _V4_HEAD.size:
                raise ProtocolError(f"record at byte {pos} of a pull body is cut short")
            fields = v4_head(body, pos)
            total, magic, _crc, _qid, _flag, qoff, phys, sysflag, born = fields[:9]
            stored, store_host, reconsume, _prepared, body_len = fields[10:]
            if total <= 0 or pos + total > size:
                raise ProtocolError(f"record at byte {pos} of a pull body is cut short")
            if qoff >= end_offset:
                break
            next_offset = qoff + 1
            if sysflag & v6_flags:
                stored, store_host, reconsume, body_len, at = _v6_fields(body, pos, sysflag)
            else:
                at = pos + _V4_HEAD.size
            value = body[at : at + body_len]
            at += body_len
            if magic == v2_magic:
                (topic_len,) = _H.unpack_from(body, at)
                at += 2 + topic_len
            else:
                at += 1 + body[at]
            (props_len,) = _H.unpack_from(body, at)
            at += 2
            pos += total
            raw = body[at : at + props_len]
            if matching:
                tag = property_value(str(view[at : at + props_len], "utf-8"), PROPERTY_TAGS)
                if not sub.matches_tag(tag):  # type: ignore[union-attr]
                    continue
            if sysflag & COMPRESSED_FLAG:
                value = _inflate(value, sysflag)
            offsets.append(qoff)
            bodies.append(value)
            props.append(raw)
            ids.append(store_host + _Q.pack(phys))
            born_list.append(born)
            stored_list.append(stored)
            reconsumes.append(reconsume)
        return next_offset

    def flush(self) -> pa.RecordBatch:
        """The rows added since the last flush, as one RecordBatch of ``ARROW_SCHEMA``."""
        n = len(self.offsets)
        utc = pa.timestamp("us", tz="UTC")
        props, picked = _properties(self.props)
        tags, keys, uniq = picked
        if uniq.null_count:
            # the offset message id where the producer set no unique key
            offset_ids = pa.array([i.hex().upper() for i in self.ids], pa.string())
            uniq = pc.coalesce(uniq, offset_ids)
        columns: list[Any] = [
            pa.repeat(self.topic, n).cast(pa.string()) if n else pa.array([], pa.string()),
            pa.repeat(self.broker_name, n).cast(pa.string()) if n else pa.array([], pa.string()),
            pa.repeat(self.queue_id, n).cast(pa.int32()) if n else pa.array([], pa.int32()),
            pa.array(self.offsets, pa.int64()),
            uniq,
            tags,
            keys,
            pa.array(self.bodies, pa.binary()),
            props,
            _millis(self.born, utc),
            _millis(self.stored, utc),
            pa.array(self.reconsumes, pa.int32()),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _properties(raw: list[bytes]) -> tuple[pa.Array, list[pa.Array]]:
    """Property strings -> the ``properties`` map and the TAGS, KEYS, UNIQ_KEY columns.

    RocketMQ's rules (``apogee.model.message``), in Arrow compute instead of a
    Python loop per message: pairs split at 0x02, name and value at the first
    0x01, pairs with an empty name or value dropped, a later duplicate name wins.
    """
    n = len(raw)
    texts = pa.array(raw, pa.binary()).cast(pa.string())
    pieces = pc.split_pattern(texts, "\x02")
    parents = pc.list_parent_indices(pieces)
    flat = pc.list_flatten(pieces)
    has_pair = pc.match_substring(flat, "\x01")
    split = pc.split_pattern(pc.filter(flat, has_pair), "\x01", max_splits=1)
    names, values = pc.list_element(split, 0), pc.list_element(split, 1)
    valid = pc.and_(pc.greater(pc.utf8_length(names), 0), pc.greater(pc.utf8_length(values), 0))
    table = pa.table(
        {
            "row": pc.filter(pc.filter(parents, has_pair), valid),
            "at": pc.filter(pa.array(np.arange(len(names), dtype=np.int64)), valid),
            "k": pc.filter(names, valid),
            "v": pc.filter(values, valid),
        }
    )
    if len(table) and len(table.group_by(["row", "k"]).aggregate([])) < len(table):
        # a name given twice (batch sends append the batch's properties): the last counts
        last = table.group_by(["row", "k"]).aggregate([("at", "max")])
        table = table.filter(pc.is_in(table["at"], value_set=last["at_max"]))
    rows = pa.array(np.arange(n, dtype=np.int64))
    picked = []
    for name in (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
        mine = table.filter(pc.equal(table["k"], name))
        where = pc.index_in(rows, value_set=mine["row"].combine_chunks())
        picked.append(mine["v"].combine_chunks().take(where))
    kept = table.filter(pc.invert(pc.is_in(table["k"], value_set=pa.array(_TAKEN_OUT))))
    counts = np.bincount(kept["row"].to_numpy(), minlength=n) if len(kept) else np.zeros(n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    props = pa.MapArray.from_arrays(
        pa.array(offsets),
        kept["k"].combine_chunks() if len(kept) else pa.array([], pa.string()),
        kept["v"].combine_chunks() if len(kept) else pa.array([], pa.string()),
        type=ARROW_SCHEMA.field("properties").type,
    )
    return props, picked


def _v6_fields(body: bytes, pos: int, sysflag: int) -> tuple[int, bytes, int, int, int]:
    """STORETIMESTAMP, STOREHOST, RECONSUMETIMES, BODYLEN and the body's position
    of a record with an IPv6 born or store host."""
    at = pos + 48 + (20 if sysflag & BORNHOST_V6_FLAG else 8)
    (stored,) = _Q.unpack_from(body, at)
    at += 8
    host_len = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
    store_host = body[at : at + host_len]
    at += host_len
    (reconsume,) = _I.unpack_from(body, at)
    at += 12  # RECONSUMETIMES, PREPARED TRANSACTION OFFSET
    (body_len,) = _I.unpack_from(body, at)
    return stored, store_host, reconsume, body_len, at + 4


def _millis(values: list[int], kind: pa.DataType) -> pa.Array:
    """Epoch milliseconds as Spark's timestamps (microseconds, UTC)."""
    return pc.multiply(pa.array(values, pa.int64()), 1000).cast(kind)


def _inflate(value: bytes, sysflag: int) -> bytes:
    if sysflag & COMPRESSION_TYPE_MASK not in (0, COMPRESSION_ZLIB):
        return value  # LZ4 / ZSTD bodies of 5.x producers are handed over as stored
    try:
        return zlib.decompress(value)
    except zlib.error as exc:
        raise ProtocolError("a compressed message body does not inflate") from exc
