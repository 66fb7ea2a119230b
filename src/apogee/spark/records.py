"""Stored records to Arrow: the source's Arrow schema and its column builder.

Owns: ``ARROW_SCHEMA``, the Arrow twin of ``apogee.spark.schema.SOURCE_SCHEMA``
(the DataFrame a ``rocketmq`` read returns), and ``ColumnBuilder``, which
turns the records of pull bodies (the commit-log layout drawn in
``apogee.model.message_codec``) into columns and hands them out as
``pyarrow.RecordBatch``es, so no per-message object is ever made.

Every record of a pull body is looked at once, in compiled code
(``apogee.spark.scan.scan_records``): its framing checked, its fixed fields
and where its body, tags, keys, unique key and property pairs lie written
into two int64 tables, which numpy reads as structured arrays. Bodies and
strings are copied once, at ``flush``, straight from the pull bodies into the
data buffer of their column (``copy_fields``), without a Python object per
row. ``msgId`` is the producer's unique key (what consumers call msgId), or
the offset message id (hex, built with a lookup table) when the producer set
none.

A TAG subscription is matched on the exact tag here too: the broker filters
on tag hash codes, and two tags may share one.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from apogee.errors import ProtocolError
from apogee.model.message import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB
from apogee.model.subscription import SubscriptionData
from apogee.spark.scan import ENTRY_FIELDS, ROW_FIELDS, copy_fields, scan_records

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

# byte -> its two upper-case hex digits, for offset message ids
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), np.uint8).reshape(256, 2)
_MAX_BINARY_BYTES = (1 << 31) - 1
_ROW = np.dtype([(name, np.int64) for name in ROW_FIELDS])
_ENTRY = np.dtype([(name, np.int64) for name in ENTRY_FIELDS])


@dataclass(slots=True)
class _Chunk:
    """The kept records of one pull body: its row and entry tables (``apogee.spark.scan``)."""

    src: bytes  # the pull body
    # the bodies' source: the pull body, or the inflated bodies back to back when one
    # was compressed (the rows' body cells then point there)
    body_src: bytes
    rows: np.ndarray  # of _ROW
    # of _ENTRY: the map entries of the kept rows, the dropped ones left out (the rows'
    # entry cells count what is left)
    entries: np.ndarray


class ColumnBuilder:
    """Columns for one output partition; ``flush`` turns them into a RecordBatch."""

    def __init__(
        self,
        topic: str,
        broker_name: str,
        queue_id: int,
        columns: tuple[tuple[str, bool], ...] = (),
    ) -> None:
        """``columns``: the ones ``flush`` makes, in order (names of ``ARROW_SCHEMA``,
        each with whether its field is nullable); () makes ``ARROW_SCHEMA``'s."""
        self.topic = topic
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.schema = (
            pa.schema([ARROW_SCHEMA.field(c).with_nullable(null) for c, null in columns])
            if columns
            else ARROW_SCHEMA
        )
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
        rows_raw, n, entries_raw, m, dropped, _, next_offset = scan_records(body, end_offset)
        if not n:
            return next_offset
        rows = np.frombuffer(rows_raw, _ROW, n)
        entries = np.frombuffer(entries_raw, _ENTRY, m)
        if dropped:  # a name given twice (batch sends append the batch's properties)
            live = entries["name_len"] >= 0
            owner = np.repeat(np.arange(n), rows["entries"])
            rows["entries"] = np.bincount(owner[live], minlength=n)
            entries = entries[live]
        if sub is not None and not sub.is_all:
            kept = _matching(body, rows, sub)
            entries = entries[np.repeat(kept, rows["entries"])]
            rows = rows[kept]
        if len(rows):
            self._chunks.append(_Chunk(body, _inflated(body, rows), rows, entries))
            self._rows += len(rows)
        return next_offset

    def flush(self) -> pa.RecordBatch:
        """The rows added since the last flush, as one RecordBatch of ``self.schema``."""
        chunks, n = self._chunks, self._rows
        self._chunks, self._rows = [], 0
        utc = _UTC_US

        def ints(name: str) -> np.ndarray:
            parts = [c.rows[name] for c in chunks]
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)

        def repeated(value: object, kind: pa.DataType) -> pa.Array:
            # empty by nulls(0): pa.array() imports pandas on first use, a cost every
            # worker that only writes would pay
            return pa.repeat(value, n).cast(kind) if n else pa.nulls(0, kind)

        make: dict[str, Callable[[], pa.Array]] = {
            "topic": lambda: repeated(self.topic, pa.string()),
            "brokerName": lambda: repeated(self.broker_name, pa.string()),
            "queueId": lambda: repeated(self.queue_id, pa.int32()),
            "queueOffset": lambda: pa.array(ints("queue_offset"), pa.int64()),
            "msgId": lambda: _msg_ids(chunks),
            "tags": lambda: _strings(chunks, "tags_at"),
            "keys": lambda: _strings(chunks, "keys_at"),
            "body": lambda: _gather([(c.body_src, c.rows) for c in chunks], "body_at", pa.binary()),
            "properties": lambda: _map(chunks, n),
            "bornTimestamp": lambda: pa.array(ints("born") * 1000, utc),  # ms -> Spark's µs
            "storeTimestamp": lambda: pa.array(ints("stored") * 1000, utc),
            "reconsumeTimes": lambda: pa.array(ints("reconsumes"), pa.int32()),
        }
        return pa.RecordBatch.from_arrays([make[f.name]() for f in self.schema], schema=self.schema)


def _msg_ids(chunks: list[_Chunk]) -> pa.Array:
    """The producer's unique key, or the offset message id where the producer set none."""
    uniq = _strings(chunks, "uniq_at")
    if uniq.null_count:
        ids = pa.concat_arrays([_offset_ids(c.src, c.rows) for c in chunks])
        uniq = pc.coalesce(uniq, ids)
    return uniq


def _matching(body: bytes, rows: np.ndarray, sub: SubscriptionData) -> np.ndarray:
    """Which rows have a tag the subscription names exactly."""
    return np.array(
        [
            sub.matches_tag(str(body[a : a + n], "utf-8") if n >= 0 else None)
            for a, n in zip(rows["tags_at"].tolist(), rows["tags_len"].tolist(), strict=True)
        ],
        dtype=bool,
    )


def _inflated(body: bytes, rows: np.ndarray) -> bytes:
    """Where the rows' bodies lie: ``body``, unless one is compressed (rare); then the
    bodies are inflated one by one and laid out back to back, and the rows' body
    cells are made to point there."""
    flags = rows["sys_flag"]
    compressed = (flags & COMPRESSED_FLAG) != 0
    if not compressed.any():
        return body
    starts, lengths = rows["body_at"].tolist(), rows["body_len"].tolist()
    values = [body[a : a + n] for a, n in zip(starts, lengths, strict=True)]
    for i in np.flatnonzero(compressed).tolist():
        values[i] = _inflate(values[i], int(flags[i]))
    body_len = np.array([len(v) for v in values], np.int64)
    rows["body_len"] = body_len
    rows["body_at"] = np.cumsum(body_len) - body_len
    return b"".join(values)


def _strings(chunks: list[_Chunk], at: str) -> pa.Array:
    """The TAGS, KEYS or UNIQ_KEY column (``at`` names its cell), null where a row has none."""
    return _gather([(c.src, c.rows) for c in chunks], at, pa.string())


def _map(chunks: list[_Chunk], n: int) -> pa.Array:
    """The ``properties`` column: each row's pairs but TAGS, KEYS and UNIQ_KEY."""
    runs = [(c.src, c.entries) for c in chunks]
    offsets = np.zeros(n + 1, np.int32)
    if n:
        np.cumsum(np.concatenate([c.rows["entries"] for c in chunks]), out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(offsets)]),
        _gather(runs, "name_at", pa.string()),
        _gather(runs, "value_at", pa.string()),
        type=ARROW_SCHEMA.field("properties").type,
    )


def _gather(runs: list[tuple[bytes, np.ndarray]], at: str, kind: pa.DataType) -> pa.Array:
    """One array of the values a pair of table cells names (``at`` and the length
    after it; a negative length is null), for each (source, table) in order.

    Each value is copied once, into the array's own data buffer
    (``copy_fields``); taking slices in Arrow instead costs a copy for the
    take and another to join the arrays of several pulls. Strings are checked
    to be UTF-8.
    """
    count = sum(len(table) for _, table in runs)
    if not count:
        return pa.nulls(0, kind)
    names = ROW_FIELDS if at in ROW_FIELDS else ENTRY_FIELDS
    column = names.index(at)
    lengths = np.concatenate([table[names[column + 1]] for _, table in runs])
    valid = lengths >= 0
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(np.where(valid, lengths, 0), out=offsets[1:])
    total = int(offsets[-1])
    if total > _MAX_BINARY_BYTES:
        raise ValueError(f"{total} bytes do not fit one Arrow binary array (int32 offsets)")
    # from Arrow's pool, which keeps freed memory for the next batch: a fresh numpy
    # array of this size would be new pages from the kernel, faulted in one by one
    data = pa.allocate_buffer(total)
    end = 0
    for src, table in runs:
        end = copy_fields(src, table, len(names), column, data, end)
    nulls = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(
        kind, count, [nulls, pa.py_buffer(offsets.astype(np.int32)), data]
    )
    if kind == pa.string():
        array.validate(full=True)
    return array


def _offset_ids(body: bytes, rows: np.ndarray) -> pa.Array:
    """STOREHOST + PHYSICALOFFSET in upper-case hex: the offset message id of each row."""
    n = len(rows)
    host_at, host_len, phys_at = rows["host_at"], rows["host_len"], rows["phys_at"]
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


def _inflate(value: bytes, sysflag: int) -> bytes:
    if sysflag & COMPRESSION_TYPE_MASK not in (0, COMPRESSION_ZLIB):
        return value  # LZ4 / ZSTD bodies of 5.x producers are handed over as stored
    try:
        return zlib.decompress(value)
    except zlib.error as exc:
        raise ProtocolError("a compressed message body does not inflate") from exc
