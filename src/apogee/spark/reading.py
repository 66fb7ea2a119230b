"""What both readers share: resolving queues and offsets, and reading one range.

Owns: ``QueueRange`` (the InputPartition of a read: one queue's offsets
[start, end) and the broker that serves it), ``resolve_queues``,
``resolve_offsets`` (earliest / latest / timestamp / JSON -> per-queue
offsets) and ``read_range``, the stateless executor-side read that turns
pulls of one range into Arrow record batches.

``read_range`` keeps one pull in flight while it decodes the previous one.
Offsets the broker no longer has (retention) are data loss: with
``failOnDataLoss`` they fail the task, without it they are skipped with a
warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import InputPartition

from apogee.errors import ConfigError
from apogee.spark._io import Cluster, QueueRef
from apogee.spark.options import EARLIEST, LATEST, FlatOffsets, OffsetSpec, SourceOptions

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

_ROWS_PER_BATCH = 8192
_BYTES_PER_BATCH = 16 << 20
_SYSTEM_PREFIXES = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_", "SCHEDULE_TOPIC", "TBW102")


class DataLossError(RuntimeError):
    """Offsets a query needs are gone from the broker (retention, topic deleted)."""


class QueueRange(InputPartition):
    """Offsets [start, end) of one queue: one Spark partition."""

    def __init__(self, queue: QueueRef, start: int, end: int) -> None:
        super().__init__((queue.topic, queue.broker_name, queue.queue_id, start, end))
        self.queue = queue
        self.start = start
        self.end = end


def resolve_queues(cluster: Cluster, opts: SourceOptions) -> list[QueueRef]:
    """The readable queues of the source's topics (or of the topics matching its pattern)."""
    if opts.topic_pattern is not None:
        topics = [
            t for t in cluster.topics() if not t.startswith(_SYSTEM_PREFIXES) and opts.matches(t)
        ]
    else:
        topics = list(opts.topics)
    return [q for topic in topics for q in cluster.queues(topic)]


def resolve_offsets(
    cluster: Cluster, queues: Sequence[QueueRef], spec: OffsetSpec, option: str
) -> FlatOffsets:
    """Per queue: the offset ``spec`` names (JSON's -2/-1 and missing queues resolved)."""
    keys = [(q.topic, q.broker_name, q.queue_id) for q in queues]
    if spec.kind == "timestamp":
        return dict(zip(keys, cluster.offsets_for_time(queues, spec.timestamp_ms), strict=True))
    if spec.kind == "earliest":
        return dict(zip(keys, cluster.offsets(queues, "min"), strict=True))
    if spec.kind == "latest":
        return dict(zip(keys, cluster.offsets(queues, "max"), strict=True))
    wanted = spec.per_queue()
    unknown = sorted(set(wanted) - set(keys))
    if unknown:
        names = ", ".join(f"{t}/{b}/{i}" for t, b, i in unknown)
        raise ConfigError(f"option '{option}' names queues the topics do not have: {names}")
    low = dict(zip(keys, cluster.offsets(queues, "min"), strict=True))
    high = dict(zip(keys, cluster.offsets(queues, "max"), strict=True))
    default = EARLIEST if option.startswith("starting") else LATEST
    out: FlatOffsets = {}
    for key in keys:
        value = wanted.get(key, default)
        out[key] = low[key] if value == EARLIEST else high[key] if value == LATEST else value
    return out


def read_range(part: QueueRange, opts: SourceOptions) -> Iterator[pa.RecordBatch]:
    """Pull [start, end) of one queue and yield it as Arrow record batches."""
    # numpy and pyarrow load where rows are read (executors), not where a query is planned
    from apogee.spark.records import ColumnBuilder  # noqa: PLC0415

    cluster = Cluster.of(opts.namesrv, timeout_s=opts.pull_timeout_s)
    q = part.queue
    sub = opts.subscription(q.topic)
    builder = ColumnBuilder(q.topic, q.broker_name, q.queue_id, opts.columns)
    offset, end = part.start, part.end
    if offset >= end:
        return
    batch = opts.pull_batch_size
    pending = cluster.pull(q, offset, min(batch, end - offset), opts.tags)
    since_flush = 0
    while offset < end:
        got = pending.result(opts.pull_timeout_s * 2)
        nxt = got.next_begin_offset
        if got.offset_moved or (got.found and got.min_offset > offset):
            lost_to = max(nxt, got.min_offset) if got.offset_moved else got.min_offset
            _data_loss(opts, q, offset, lost_to)
            offset = lost_to
            if offset < end:
                pending = cluster.pull(q, offset, min(batch, end - offset), opts.tags)
            continue
        if not got.found:
            if nxt <= offset:
                # the broker has nothing at an offset below what the plan saw as written
                _data_loss(opts, q, offset, end)
                break
            offset = nxt  # everything up to nxt was filtered out by the tag expression
            if offset < end:
                pending = cluster.pull(q, offset, min(batch, end - offset), opts.tags)
            continue
        if nxt < end:
            pending = cluster.pull(q, nxt, min(batch, end - nxt), opts.tags)
        before = builder.bytes_read
        builder.add(got.body, end, sub)
        since_flush += builder.bytes_read - before
        offset = nxt
        if len(builder) >= _ROWS_PER_BATCH or since_flush >= _BYTES_PER_BATCH:
            yield builder.flush()
            since_flush = 0
    if len(builder):
        yield builder.flush()


def _data_loss(opts: SourceOptions, q: QueueRef, start: int, end: int) -> None:
    text = (
        f"offsets {start}..{end} of {q.topic}/{q.broker_name}/{q.queue_id} are no longer on "
        "the broker (removed by retention, or the topic was deleted and created again)"
    )
    if opts.fail_on_data_loss:
        raise DataLossError(
            text + "; set the option failOnDataLoss=false to skip them with a warning"
        )
    log.warning("%s; skipped (failOnDataLoss=false)", text)
