"""Stored records to Arrow: the source's Arrow schema and its column builder.

Owns: ``ARROW_SCHEMA``, the Arrow twin of ``apogee.spark.schema.SOURCE_SCHEMA``
(the DataFrame a ``rocketmq`` read returns), and ``ColumnBuilder``, which
turns the records of pull bodies (the commit-log layout drawn in
``apogee.model.message_codec``) into columns and hands them out as
``pyarrow.RecordBatch``es, so no per-message object is ever made.

The only loop per record is the one that has to be sequential: finding
where the next record starts (TOTALSIZE) and whether the range ends
(QUEUEOFFSET), in ``apogee.spark.scan`` (compiled by Cython when it can be).
Every other field is gathered for all records of a pull at once with numpy,
at positions computed from the sysFlag (IPv6 hosts) and the magic code
(topic length width). Bodies and property strings are copied once, at
``flush``, straight from the pull bodies into the data buffer of their
column (``copy_runs``), without a Python object per row. The property
strings are parsed per batch on their bytes with numpy: tags, keys and the
unique key become their columns, ``properties`` holds the rest. ``msgId`` is
the producer's unique key (what consumers call msgId), or the offset message
id (hex, built with a lookup table) when the producer set none.

A TAG subscription is matched on the exact tag here too: the broker filters
on tag hash codes, and two tags may share one.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
from apogee.spark.scan import copy_runs, record_starts

# SOURCE_SCHEMA in Arrow's terms, written out: PySpark's converter imports pandas, ~0.3 s
# in every Python worker that loads the connector (a test holds the two equal).
_UTC_US = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("topic", pa.string(), False),
        pa.field("brokerName", pa.string(), False),
        pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False),
        pa.field("msgId", pa.string(), False),
        pa.field("tags", pa.string(), True),
        pa.field("keys", pa.string(), True),
        pa.field("body", pa.binary(), False),
        pa.field(
            "properties",
            pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string(), True)),
            False,
        ),
        pa.field("bornTimestamp", _UTC_US, False),
        pa.field("storeTimestamp", _UTC_US, False),
        pa.field("reconsumeTimes", pa.int32(), False),
    ]
)

# empty arrays by nulls(0): pa.array() imports pandas on first use, a cost every worker
# that only writes would pay
_STRING_EMPTY = pa.nulls(0, pa.string())
# byte -> its two upper-case hex digits, for offset message ids
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)
_MAX_BINARY_BYTES = (1 << 31) - 1
_TAKEN_OUT = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


@dataclass(slots=True)
class _Chunk:
    """The kept records of one pull body, as columns."""

    offsets: np.ndarray
    born: np.ndarray
    stored: np.ndarray
    reconsumes: np.ndarray
    src: bytes  # the pull body
    # where each kept record's body and property string lie: the body in ``body_src``
    # (the pull body, or the inflated bodies back to back when one was compressed)
    body_src: bytes
    body_at: np.ndarray
    body_len: np.ndarray
    props_at: np.ndarray
    props_len: np.ndarray
    # STOREHOST and PHYSICALOFFSET positions: the offset message ids, made only when a
    # row has no unique key (producers almost always set one)
    id_parts: tuple[bytes, np.ndarray, np.ndarray, np.ndarray]


class ColumnBuilder:
    """Columns for one output partition; ``flush`` turns them into a RecordBatch."""

    def __init__(self, topic: str, broker_name: str, queue_id: int) -> None:
        self.topic = topic
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.bytes_read = 0
        self._chunks: list[_Chunk] = []
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, body: bytes, end_offset: int, sub: SubscriptionData | None) -> int:
        """Append the records of a pull body with queue offsets below ``end_offset``.

        Returns the queue offset after the last record looked at (kept or
        filtered out); records at or past ``end_offset`` are not looked at.
        """
        self.bytes_read += len(body)
        positions, pos, next_offset = record_starts(body, end_offset)
        if positions:
            chunk = _decode(body, np.array(positions, np.int64), pos, sub)
            if len(chunk.offsets):
                self._chunks.append(chunk)
                self._rows += len(chunk.offsets)
        return next_offset

    def flush(self) -> pa.RecordBatch:
        """The rows added since the last flush, as one RecordBatch of ``ARROW_SCHEMA``."""
        chunks, n = self._chunks, self._rows
        self._chunks, self._rows = [], 0
        utc = _UTC_US

        def ints(name: str) -> np.ndarray:
            parts = [getattr(c, name) for c in chunks]
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        props, picked = _properties(_gather([(c.src, c.props_at, c.props_len) for c in chunks]))
        tags, keys, uniq = picked
        if uniq.null_count:
            # the offset message id where the producer set no unique key
            ids = pa.concat_arrays([_offset_ids(*c.id_parts) for c in chunks])
            uniq = pc.coalesce(uniq, ids)
        columns: list[Any] = [
            pa.repeat(self.topic, n).cast(pa.string()) if n else _STRING_EMPTY,
            pa.repeat(self.broker_name, n).cast(pa.string()) if n else _STRING_EMPTY,
            pa.repeat(self.queue_id, n).cast(pa.int32()) if n else pa.nulls(0, pa.int32()),
            pa.array(ints("offsets"), pa.int64()),
            uniq,
            tags,
            keys,
            _gather([(c.body_src, c.body_at, c.body_len) for c in chunks]),
            props,
            pa.array(ints("born") * 1000, utc),  # epoch ms -> Spark's microseconds
            pa.array(ints("stored") * 1000, utc),
            pa.array(ints("reconsumes"), pa.int32()),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _decode(body: bytes, at: np.ndarray, end: int, sub: SubscriptionData | None) -> _Chunk:
    """The columns of the records starting at byte positions ``at`` (they end at ``end``).

    Every field is gathered with numpy at per-record positions; bodies and
    property strings are cut out of ``body`` by Arrow (see ``_slices``).
    """
    buf = np.frombuffer(body, np.uint8)
    ends = np.append(at[1:], end)
    sysflag = _int(buf, at + 36, 4)
    stored_at = at + 48 + np.where(sysflag & BORNHOST_V6_FLAG, 20, 8)
    host_at = stored_at + 8
    host_len = np.where(sysflag & STOREHOSTADDRESS_V6_FLAG, 20, 8)
    body_len = _int(buf, host_at + host_len + 12, 4)
    body_at = host_at + host_len + 16
    topic_at = body_at + body_len
    if ((body_len < 0) | (topic_at + 4 > ends)).any():
        raise ProtocolError("a record of a pull body has a body length past its end")
    v2 = _int(buf, at + 4, 4) == MESSAGE_MAGIC_CODE_V2
    props_len_at = topic_at + np.where(v2, 2 + _int(buf, topic_at, 2), 1 + buf[topic_at])
    if (props_len_at + 2 > ends).any():
        raise ProtocolError("a record of a pull body has a topic length past its end")
    props_len = _int(buf, props_len_at, 2)
    props_at = props_len_at + 2
    if ((props_len < 0) | (props_at + props_len > ends)).any():
        raise ProtocolError("a record of a pull body has a properties length past its end")
    if sub is not None and not sub.is_all:
        keep = np.array(
            [
                sub.matches_tag(property_value(str(body[a : a + n], "utf-8"), PROPERTY_TAGS))
                for a, n in zip(props_at.tolist(), props_len.tolist(), strict=True)
            ],
            dtype=bool,
        )
        at, sysflag, stored_at, host_at, host_len = (
            at[keep], sysflag[keep], stored_at[keep], host_at[keep], host_len[keep]
        )  # fmt: skip
        body_at, body_len, props_at, props_len = (
            body_at[keep], body_len[keep], props_at[keep], props_len[keep]
        )  # fmt: skip
    body_src = body
    compressed = (sysflag & COMPRESSED_FLAG) != 0
    if compressed.any():  # rare: inflated one by one, then laid out back to back
        values = [body[a : a + n] for a, n in zip(body_at.tolist(), body_len.tolist(), strict=True)]
        for i in np.flatnonzero(compressed).tolist():
            values[i] = _inflate(values[i], int(sysflag[i]))
        body_len = np.array([len(v) for v in values], np.int64)
        body_at = np.cumsum(body_len) - body_len
        body_src = b"".join(values)
    return _Chunk(
        offsets=_int(buf, at + 20, 8),
        born=_int(buf, at + 40, 8),
        stored=_int(buf, stored_at, 8),
        reconsumes=_int(buf, host_at + host_len, 4),
        src=body,
        body_src=body_src,
        body_at=body_at,
        body_len=body_len,
        props_at=props_at,
        props_len=props_len,
        id_parts=(body, host_at, host_len, at + 28),
    )


def _int(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian signed ``width``-byte integers at byte positions ``at``, as int64."""
    raw = buf[at[:, None] + np.arange(width)]
    return raw.view(f">i{width}")[:, 0].astype(np.int64)


def _gather(runs: list[tuple[bytes, np.ndarray, np.ndarray]]) -> pa.Array:
    """One binary array of ``src[s : s + n]`` for each (src, starts, lengths) in order.

    Each value is copied once, into the array's own data buffer (``copy_runs``);
    taking slices in Arrow instead costs a copy for the take and another to join
    the arrays of several pulls.
    """
    lengths = [n for _, _, n in runs]
    count = sum(len(n) for n in lengths)
    if not count:
        return pa.nulls(0, pa.binary())
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(np.concatenate(lengths), out=offsets[1:])
    total = int(offsets[-1])
    if total > _MAX_BINARY_BYTES:
        raise ValueError(f"{total} bytes do not fit one Arrow binary array (int32 offsets)")
    # from Arrow's pool, which keeps freed memory for the next batch: a fresh numpy
    # array of this size would be new pages from the kernel, faulted in one by one
    data = pa.allocate_buffer(total)
    at = 0
    for src, starts, n in runs:
        at = copy_runs(src, starts.tolist(), n.tolist(), data, at)
    return pa.BinaryArray.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets.astype(np.int32)), data]
    )


def _offset_ids(
    body: bytes, host_at: np.ndarray, host_len: np.ndarray, phys_at: np.ndarray
) -> pa.Array:
    """STOREHOST + PHYSICALOFFSET in upper-case hex: the offset message id of each record."""
    n = len(host_at)
    if (host_len != 8).any():  # an IPv6 store host: rare, one by one
        ids = [
            (body[h : h + w] + body[p : p + 8]).hex().upper()
            for h, w, p in zip(host_at.tolist(), host_len.tolist(), phys_at.tolist(), strict=True)
        ]
        return pa.array(ids, pa.string())
    buf = np.frombuffer(body, np.uint8)
    raw = np.concatenate(
        [buf[host_at[:, None] + np.arange(8)], buf[phys_at[:, None] + np.arange(8)]], axis=1
    )
    text = np.ascontiguousarray(_HEX[raw]).reshape(-1)
    offsets = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))


def _properties(raw: pa.Array) -> tuple[pa.Array, list[pa.Array]]:
    """Property strings -> the ``properties`` map and the TAGS, KEYS, UNIQ_KEY columns.

    RocketMQ's rules (``apogee.model.message``): pairs split at 0x02, name and
    value at the first 0x01, pairs with an empty name or value dropped, a later
    duplicate name wins. Done on the bytes of all strings at once with numpy
    (0x01 and 0x02 never occur inside a multi-byte UTF-8 character).
    """
    n = len(raw)
    texts = raw.cast(pa.string())  # the strings must be UTF-8, whatever they hold
    offs = _offsets(texts)
    data_buf = texts.buffers()[2]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lo, hi = int(offs[0]), int(offs[-1])
    window = data[lo:hi]
    twos = np.flatnonzero(window == 2) + lo
    ones = np.flatnonzero(window == 1) + lo
    # pieces between 0x02s and string bounds; sorted apart, starts and ends pair up
    starts = np.sort(np.concatenate([offs[:-1], twos + 1]))
    ends = np.sort(np.concatenate([twos, offs[1:]]))
    at = np.searchsorted(ones, starts)
    cut = np.append(ones, hi + 1)[at]  # the first 0x01 at or after each piece's start
    valid = (cut > starts) & (ends > cut + 1)
    starts, cut, ends = starts[valid], cut[valid], ends[valid]
    rows = np.searchsorted(offs, starts, side="right") - 1
    m = len(starts)
    bounds = np.empty(4 * m, np.int64)  # name, 0x01, value, what lies up to the next name
    bounds[0::4], bounds[1::4], bounds[2::4], bounds[3::4] = starts, cut, cut + 1, ends
    spans = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), max(4 * m - 1, 0), [None, pa.py_buffer(bounds), data_buf]
    )
    names = spans.take(pa.array(np.arange(0, 4 * m, 4))).cast(pa.string())
    values = spans.take(pa.array(np.arange(2, 4 * m, 4))).cast(pa.string())
    encoded = pc.dictionary_encode(names)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    wanted = rows * max(len(encoded.dictionary), 1) + codes
    if _repeats(wanted, n * max(len(encoded.dictionary), 1)):
        # a name given twice (batch sends append the batch's properties): the last counts
        _, last = np.unique(wanted[::-1], return_index=True)
        keep = np.sort(m - 1 - last)
        rows, codes, names, values = rows[keep], codes[keep], names.take(keep), values.take(keep)
    taken = [pc.index(encoded.dictionary, name).as_py() for name in _TAKEN_OUT]
    picked = []
    for code in taken:
        where = np.full(n, -1, np.int64)
        mine = np.flatnonzero(codes == code)
        where[rows[mine]] = mine
        picked.append(values.take(pa.array(where, mask=where < 0)))
    kept = ~np.isin(codes, [c for c in taken if c >= 0])
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows[kept], minlength=n), out=map_offsets[1:])
    props = pa.MapArray.from_arrays(
        pa.array(map_offsets),
        names.filter(pa.array(kept)),
        values.filter(pa.array(kept)),
        type=ARROW_SCHEMA.field("properties").type,
    )
    return props, picked


def _repeats(values: np.ndarray, bound: int) -> bool:
    """Whether a value (each in [0, bound)) occurs twice: counted when the range is
    small (the usual few property names), else sorted."""
    if not len(values):
        return False
    if bound <= max(1 << 20, 8 * len(values)):
        return bool(np.bincount(values, minlength=1).max() > 1)
    return len(np.unique(values)) < len(values)


def _offsets(texts: pa.Array) -> np.ndarray:
    """The n + 1 value offsets of a string array, as int64."""
    n = len(texts)
    if not n:
        return np.zeros(1, np.int64)
    raw = np.frombuffer(texts.buffers()[1], np.int32)
    return raw[texts.offset : texts.offset + n + 1].astype(np.int64)


def _inflate(value: bytes, sysflag: int) -> bytes:
    if sysflag & COMPRESSION_TYPE_MASK not in (0, COMPRESSION_ZLIB):
        return value  # LZ4 / ZSTD bodies of 5.x producers are handed over as stored
    try:
        return zlib.decompress(value)
    except zlib.error as exc:
        raise ProtocolError("a compressed message body does not inflate") from exc
