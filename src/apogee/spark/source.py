"""The ``rocketmq`` readers: a batch reader and a micro-batch stream reader.

Owns: ``BatchReader`` (tag pushdown from ``tags = 'x'`` / ``tags IN (...)``
filters, one partition per queue or more with ``minPartitions``) and
``StreamReader`` (offsets in Spark's checkpoint, ReadLimit admission
control, Trigger.AvailableNow, queues found while running, lag, the
optional consumer-group commit).

Everything but ``read`` runs on the driver: the stream reader lives in one
long-lived Python worker for the whole query, so the little state it keeps
(when the last batch was admitted, the latest offsets it saw) is fine
there. With ``consumerGroup``, the offsets where the last finished batch
ended are written to that group at every trigger (never read back).
``read`` runs on executors and keeps no state (``read_range``).

Offsets, as written into the checkpoint: ``{"topic": {"broker": {"queueId":
offset}}}``, the next offset to read per queue. A queue that appears while
the query runs enters the end offset of the next batch at its earliest
offset and is read from the batch after that, so a replay plans the same
ranges.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    In,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from apogee.spark._io import Cluster, QueueRef
from apogee.spark.options import FlatOffsets, SourceOptions
from apogee.spark.planning import (
    Nested,
    Range,
    apportion,
    backlog,
    flatten,
    lag,
    nest,
    split_ranges,
)
from apogee.spark.reading import QueueRange, read_range, resolve_offsets, resolve_queues

if TYPE_CHECKING:  # imported where batches are read (executors), not to plan a query
    import pyarrow as pa

log = logging.getLogger(__name__)


def _key(q: QueueRef) -> tuple[str, str, int]:
    return (q.topic, q.broker_name, q.queue_id)


def _partitions(
    queues: Sequence[QueueRef], start: FlatOffsets, end: FlatOffsets, min_partitions: int | None
) -> list[QueueRange]:
    by_key = {_key(q): q for q in queues}
    ranges = [
        Range(k, start.get(k, end[k]), end[k]) for k in sorted(end) if k in by_key and k in start
    ]
    return [
        QueueRange(by_key[r.queue], r.start, r.end) for r in split_ranges(ranges, min_partitions)
    ]


class BatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Take ``tags = x`` and ``tags IN (...)`` as a broker-side tag expression."""
        for f in filters:
            tags: list[str] | None = None
            if isinstance(f, EqualTo) and f.attribute == ("tags",) and isinstance(f.value, str):
                tags = [f.value]
            elif isinstance(f, In) and f.attribute == ("tags",):
                values = list(f.value)
                if all(isinstance(v, str) for v in values):
                    tags = [str(v) for v in values]
            if tags is None or any("||" in t or not t.strip() for t in tags):
                yield f
                continue
            if self.opts.tags is not None:
                known = {t.strip() for t in self.opts.tags.split("||")}
                tags = [t for t in tags if t in known]
            # an empty intersection still needs a valid expression: it matches nothing
            expression = " || ".join(tags) if tags else "\x00none"
            self.opts = _with_tags(self.opts, expression)

    def partitions(self) -> Sequence[InputPartition]:
        cluster = Cluster.of(self.opts.namesrv)
        queues = resolve_queues(cluster, self.opts)
        start = resolve_offsets(cluster, queues, self.opts.starting, "startingOffsets")
        end = resolve_offsets(cluster, queues, self.opts.ending, "endingOffsets")
        return _partitions(queues, start, end, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        return read_range(partition, self.opts)


def _with_tags(opts: SourceOptions, tags: str) -> SourceOptions:
    return replace(opts, tags=tags)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._queues: list[QueueRef] = []
        self._latest: FlatOffsets = {}
        self._planned_end: FlatOffsets = {}
        self._available_now: FlatOffsets | None = None
        self._last_admit_ms: float | None = None
        self._group_offsets: FlatOffsets = {}

    @property
    def _cluster(self) -> Cluster:
        return Cluster.of(self.opts.namesrv, timeout_s=self.opts.pull_timeout_s)

    def _refresh(self) -> FlatOffsets:
        self._queues = resolve_queues(self._cluster, self.opts)
        self._latest = dict(
            zip(map(_key, self._queues), self._cluster.offsets(self._queues, "max"), strict=True)
        )
        return self._latest

    # -- offsets ----------------------------------------------------------------

    def initialOffset(self) -> Nested:
        self._refresh()
        return nest(
            resolve_offsets(self._cluster, self._queues, self.opts.starting, "startingOffsets")
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: Nested, limit: ReadLimit) -> Nested:
        begin = flatten(start)
        # ``start`` is where the last finished batch ended: progress to show in the group
        # (commit() alone would lag one batch: Spark calls it when the next batch starts)
        self._commit_group(begin)
        latest = self._refresh()
        if self._available_now is not None:
            latest = {
                k: min(v, self._available_now.get(k, begin.get(k, 0))) for k, v in latest.items()
            }
        new = [q for q in self._queues if _key(q) not in begin]
        if new:
            # new queues join at their earliest offset; they are read from the next batch on
            earliest = dict(zip(map(_key, new), self._cluster.offsets(new, "min"), strict=True))
            log.info("queues joined the query: %s", sorted(earliest))
        else:
            earliest = {}
        known = {k: v for k, v in latest.items() if k in begin}
        end = self._admit(begin, known, limit)
        # a queue that left the route keeps its offset: nothing is read from it
        end = {**begin, **end, **earliest}
        self._planned_end = end
        return nest(end)

    def _admit(self, begin: FlatOffsets, latest: FlatOffsets, limit: ReadLimit) -> FlatOffsets:
        if isinstance(limit, ReadAllAvailable):
            return latest
        available = backlog(begin, latest)
        if isinstance(limit, ReadMinRows):
            now = time.monotonic() * 1000
            if self._last_admit_ms is None:
                self._last_admit_ms = now
            waited = now - self._last_admit_ms
            if available < limit.min_rows and waited < self.opts.max_trigger_delay_ms:
                return {k: begin[k] for k in latest}  # not enough yet: no batch
            self._last_admit_ms = now
            if self.opts.max_offsets_per_trigger is not None:
                return apportion(begin, latest, self.opts.max_offsets_per_trigger)
            return latest
        if isinstance(limit, ReadMaxRows):
            return apportion(begin, latest, limit.max_rows)
        raise ValueError(f"the rocketmq source does not support the read limit {limit!r}")

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = dict(self._refresh())

    def reportLatestOffset(self) -> dict[str, object] | None:
        if not self._latest:
            return None
        return {
            "latest": nest(self._latest),
            "offsetsBehindLatest": lag(self._planned_end, self._latest),
        }

    # -- batches --------------------------------------------------------------------

    def partitions(self, start: Nested, end: Nested) -> Sequence[InputPartition]:
        begin, stop = flatten(start), flatten(end)
        if not self._queues or any(k not in {_key(q) for q in self._queues} for k in stop):
            self._refresh()
        return _partitions(self._queues, begin, stop, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        return read_range(partition, self.opts)

    def commit(self, end: Nested) -> None:
        self._commit_group(flatten(end))

    def _commit_group(self, done: FlatOffsets) -> None:
        group = self.opts.consumer_group
        if group is None or not done or done == self._group_offsets:
            return
        if not self._queues:
            self._refresh()
        by_key = {_key(q): q for q in self._queues}
        offsets = [(by_key[k], off) for k, off in sorted(done.items()) if k in by_key]
        topics = sorted({q.topic for q, _ in offsets})
        try:
            self._cluster.commit_group(group, offsets, topics)
            self._group_offsets = dict(done)
        except Exception:
            # the group is a view for operators; the checkpoint stays the truth
            log.exception("could not commit the progress of consumer group %s", group)

    def stop(self) -> None:
        self._cluster.close()
