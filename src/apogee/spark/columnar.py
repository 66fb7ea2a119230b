"""The sink's way from a record batch to batch sends, column by column.

Owns: ``Router`` (each row's queue), ``packable`` (whether a record batch
can go this way) and ``plan_sends``, which turns a record batch into the
bodies of its batch sends (``apogee.spark._io.PackedSend``) without an object per row: the
rows' own properties (TAGS, KEYS, __SHARDINGKEY) are made as one Arrow
string column with ``pyarrow.compute`` (row by row with
``apogee.spark.row_properties`` when a ``properties`` map is among the
columns), queues are chosen with numpy, and
``apogee.spark.pack.pack_rows`` writes each send's records from the
columns' buffers.

Queues: a row with a sharding key goes to the queue its key hashes to
(RocketMQ's SelectMessageQueueByHash), in order; the other rows take turns
in runs of ``batchSize`` rows, so that a send (and an exactly-once
transaction) holds ``batchSize`` rows, not ``batchSize`` divided among the
queues. A row's properties come in the order the per-row path writes them:
TAGS, KEYS, __SHARDINGKEY, then its UNIQ_KEY.

A record batch with a delay level on some row (a batch send cannot carry
one), or a map entry the client or broker writes itself (``_RESERVED``),
goes the per-row way instead (``apogee.spark.sink``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from apogee.client.uniq_key import uniq_key_block
from apogee.errors import ConfigError
from apogee.model.javahash import java_string_hash
from apogee.model.message import (
    HALF_BATCH_RESERVED,
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    properties_to_string,
)
from apogee.spark._io import BATCH_BYTES, PackedSend, QueueRef
from apogee.spark.pack import RECORD_OVERHEAD, pack_rows
from apogee.spark.row_properties import NO_TOPIC, NULL_BODY, row_properties

#: Map entries that leave a batch to the per-row way: the id (written here for every
#: row), and what a batch of half messages may not set (the per-row way drops them).
_RESERVED = pa.array([PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, *HALF_BATCH_RESERVED], pa.string())


class Router:
    """Picks rows' queues: by sharding key hash, else round robin per topic."""

    def __init__(self, lookup: Callable[[str], list[QueueRef]], start: int) -> None:
        """``lookup`` gives a topic's writable queues (``Cluster.queues``); ``start``
        is the first turn of every topic's round robin (the task's partition)."""
        self.lookup = lookup
        self.start = start
        self._queues: dict[str, list[QueueRef]] = {}
        self._next: dict[str, int] = {}

    def queues(self, topic: str) -> list[QueueRef]:
        """The writable queues of ``topic``, looked up once per task."""
        queues = self._queues.get(topic)
        if queues is None:
            queues = self._queues[topic] = self.lookup(topic)
            if not queues:
                raise ConfigError(
                    f"topic {topic!r} does not exist or has no writable queue; create it "
                    "first (apogee admin updateTopic)"
                )
        return queues

    def queue(self, topic: str, sharding_key: str | None) -> QueueRef:
        """One row's queue (the per-row way): its key's, else the next turn's."""
        queues = self.queues(topic)
        if sharding_key is not None:
            return queues[abs(java_string_hash(sharding_key)) % len(queues)]
        return queues[self.turns(topic, 1) % len(queues)]

    def turns(self, topic: str, count: int) -> int:
        """Take ``count`` turns of ``topic``'s round robin; the first one's number."""
        first = self._next.get(topic, self.start)
        self._next[topic] = first + count
        return first


def packable(batch: pa.RecordBatch) -> bool:
    """Whether ``plan_sends`` takes ``batch``: no row with a delay level, and no
    ``properties`` map that sets a property the client or broker writes itself."""
    names = batch.schema.names
    if "delayLevel" in names and pc.any(pc.not_equal(batch.column("delayLevel"), 0)).as_py():
        return False
    if "properties" in names:
        keys = batch.column("properties").keys  # every entry's, of this slice and around it
        return not pc.any(pc.is_in(keys, value_set=_RESERVED)).as_py()
    return True


def plan_sends(
    batch: pa.RecordBatch, topic: str | None, router: Router, batch_size: int
) -> list[PackedSend]:
    """``batch``'s rows as batch sends of at most ``batch_size`` rows and about 1 MiB.

    ``topic`` (the sink's option) names every row's topic; None: the ``topic``
    column does. Take only ``packable`` batches.

    Raises:
        ValueError: a row has a null body, or no topic.
        ConfigError: a topic does not exist or has no writable queue.
        InvalidMessageError: a row's properties exceed 32767 bytes.
    """
    body = batch.column("body")
    if body.null_count:
        raise ValueError(NULL_BODY)
    body_offsets, body_data = _buffers(body)
    own = _own_properties(batch)
    sizes = body_offsets[1:] - body_offsets[:-1] + RECORD_OVERHEAD
    prop_offsets: np.ndarray | None = None
    prop_data: object | None = None
    if own is not None:
        prop_offsets, prop_data = _buffers(own)
        sizes += prop_offsets[1:] - prop_offsets[:-1]
    shards = batch.column("shardingKey") if "shardingKey" in batch.schema.names else None
    sends: list[PackedSend] = []
    for name, rows in _by_topic(batch, topic):
        queues = router.queues(name)
        chosen = _choose(rows, shards, queues, router.turns, name, batch_size)
        for index, queue in enumerate(queues):
            picked = rows[chosen == index] if len(queues) > 1 else rows
            for start, end in _splits(sizes[picked], batch_size):
                part = np.ascontiguousarray(picked[start:end])
                base, first = uniq_key_block(int(time.time() * 1000), end - start)
                packed = pack_rows(
                    part, body_offsets, body_data, prop_offsets, prop_data, base.encode(), first
                )
                sends.append(PackedSend(queue, packed, end - start))
    return sends


def _buffers(column: pa.Array) -> tuple[np.ndarray, object]:
    """A binary or string column's offsets (int64, one per row and one more) and data."""
    wide = pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)
    kind = np.int64 if wide else np.int32
    _, offsets, data = column.buffers()[:3]
    width = 8 if wide else 4
    at = np.frombuffer(offsets, dtype=kind, count=len(column) + 1, offset=column.offset * width)
    return at.astype(np.int64), data if data is not None else b""


def _own_properties(batch: pa.RecordBatch) -> pa.Array | None:
    """Each row's property pairs but its id, as one string column; None: no row has any."""
    names = batch.schema.names
    if "properties" in names:  # a map: the per-row rule, row by row
        return _by_row(batch)
    pairs: list[pa.Array] = []
    if "tags" in names:
        pairs.append(_pair(PROPERTY_TAGS, _non_empty(batch.column("tags"))))
    if "keys" in names:
        keys = batch.column("keys")
        if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
            keys = _joined(keys)
        pairs.append(_pair(PROPERTY_KEYS, _non_empty(keys)))
    if "shardingKey" in names:
        pairs.append(_pair(PROPERTY_SHARDING_KEY, batch.column("shardingKey")))
    pairs = [p for p in pairs if p.null_count < len(p)]
    if not pairs:
        return None
    return pc.binary_join_element_wise(*pairs, "", null_handling="replace", null_replacement="")


def _by_row(batch: pa.RecordBatch) -> pa.Array:
    """The property strings ``row_properties`` gives, one per row (a batch with a map)."""
    n = batch.num_rows
    none: list[None] = [None] * n

    def cells(name: str) -> list[Any]:
        return batch.column(name).to_pylist() if name in batch.schema.names else none

    rows = zip(cells("properties"), cells("tags"), cells("keys"), cells("shardingKey"), strict=True)
    return pa.array(
        [properties_to_string(row_properties(p, t, k, None, s)) for p, t, k, s in rows],
        pa.string(),
    )


def _non_empty(column: pa.Array) -> pa.Array:
    """``column`` with its empty strings made null (an empty tag or key is none)."""
    return pc.if_else(pc.greater(pc.binary_length(column), 0), column, pa.scalar(None, column.type))


def _pair(name: str, values: pa.Array) -> pa.Array:
    """``name`` 0x01 value 0x02 per row; null where the value is null."""
    return pc.binary_join_element_wise(f"{name}\x01", values, "\x02", "")


def _joined(keys: pa.Array) -> pa.Array:
    """An array<string> of keys as RocketMQ stores them: space-separated, null and empty
    ones left out."""
    values = keys.flatten()
    parents = pc.list_parent_indices(keys).to_numpy(zero_copy_only=False)
    keep = pc.fill_null(pc.greater(pc.binary_length(values), 0), False)
    counts = np.bincount(parents[keep.to_numpy(zero_copy_only=False)], minlength=len(keys))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), values.filter(keep))
    return pc.binary_join(lists, " ")


def _by_topic(batch: pa.RecordBatch, topic: str | None) -> list[tuple[str, np.ndarray]]:
    """The rows of each topic, in order."""
    if topic is not None:
        return [(topic, np.arange(batch.num_rows, dtype=np.int64))]
    column = batch.column("topic")
    if column.null_count or pc.any(pc.equal(pc.binary_length(column), 0)).as_py():
        raise ValueError(NO_TOPIC)
    encoded = pc.dictionary_encode(column)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    return [
        (name, np.flatnonzero(indices == k).astype(np.int64))
        for k, name in enumerate(encoded.dictionary.to_pylist())
    ]


def _choose(  # noqa: PLR0917  # the pieces of one topic's rows
    rows: np.ndarray,
    shards: pa.Array | None,
    queues: list[QueueRef],
    turns: Callable[[str, int], int],
    topic: str,
    batch_size: int,
) -> np.ndarray:
    """Each row's queue index: its sharding key's, else round robin in runs."""
    count = len(queues)
    chosen = np.empty(len(rows), dtype=np.int64)
    free = np.ones(len(rows), dtype=bool)
    if shards is not None:
        keys = shards.take(pa.array(rows))
        free = keys.is_null().to_numpy(zero_copy_only=False)
        encoded = pc.dictionary_encode(keys)
        by_key = np.array(
            [abs(java_string_hash(k)) % count for k in encoded.dictionary.to_pylist()],
            dtype=np.int64,
        )
        keyed = ~free
        indices = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
        chosen[keyed] = by_key[indices[keyed]]
    left = int(free.sum())
    if left:
        runs = -(-left // batch_size)
        first = turns(topic, runs)
        chosen[free] = (first + np.arange(left) // batch_size) % count
    return chosen


def _splits(sizes: np.ndarray, batch_size: int) -> list[tuple[int, int]]:
    """Where the sends of one queue's rows start and end: at most ``batch_size`` rows
    and ``BATCH_BYTES`` each, one row at least."""
    ends = np.cumsum(sizes)
    out: list[tuple[int, int]] = []
    start, done = 0, 0
    while start < len(sizes):
        end = int(np.searchsorted(ends, done + BATCH_BYTES, side="right"))
        end = max(start + 1, min(end, start + batch_size))
        out.append((start, end))
        done = int(ends[end - 1])
        start = end
    return out
