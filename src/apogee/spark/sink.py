"""The ``rocketmq`` writers: at-least-once by default, exactly-once with half messages.

Owns: the sink's input columns and their check, row -> message conversion
(for record batches the columnar way does not take: see
``apogee.spark.columnar``, which also chooses the queues), ``BatchWriter``
and ``StreamWriter`` (Arrow writers: executors get record batches).

Both modes hand rows to the client's loop thread in chunks, one chunk on the
wire while the next is built; a chunk goes out in batch sends per queue.

At-least-once: a task returns only when every send was answered SEND_OK; a
failed send fails the task and Spark runs it again.

Exactly-once (``exactlyOnce=true``): each batch goes out as one transaction
of half messages (see ``Cluster.send_halves``), invisible to consumers,
tagged ``<sink id>/<batch id>/<token>`` (sink id: the
streaming query's id, which survives restarts; token: one per task
attempt). The task returns the half messages it sent; the driver's
``commit`` writes the batch's ledger entry (``apogee.spark.ledger``) and
then commits them, ``abort`` rolls them back, and a batch id that already
has an entry is rolled back instead (a replay). The broker's checks are
answered from the ledger by every process that sent half messages.
"""

from __future__ import annotations

import gc
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from apogee.client.transaction import LocalTransactionState
from apogee.errors import ConfigError
from apogee.model.message import Message
from apogee.spark._io import Cluster, HalfRef, PackedSend, QueueRef
from apogee.spark.ledger import TXN_PROPERTY, Ledger, TxnTag, decide
from apogee.spark.options import SinkOptions
from apogee.spark.row_properties import NO_TOPIC, NULL_BODY, row_properties

if TYPE_CHECKING:  # the batches come from Spark: nothing here calls pyarrow itself
    import pyarrow as pa

_STRING = (StringType,)
_COLUMNS: dict[str, tuple[type[DataType], ...]] = {
    "body": (BinaryType, StringType),
    "topic": _STRING,
    "tags": _STRING,
    "keys": (StringType, ArrayType),
    "properties": (MapType,),
    "delayLevel": (IntegerType, LongType, ShortType),
    "shardingKey": _STRING,
}
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"
#: Test seam: "<point>:<batch id>:<file>" makes the driver's commit touch <file> and
#: stop there (point "before-ledger" or "after-ledger"), so a test can kill the
#: driver at that exact step. Point "after-ledger+close" instead closes the
#: committer's client (its connections to the brokers) right after the ledger
#: entry, so the commit fails past its commit point and Spark calls abort.
PAUSE_ENV = "APOGEE_SPARK_PAUSE_AT"
T = TypeVar("T")


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """The DataFrame must have a body, and a topic unless the option names one."""
    names = {f.name: f.dataType for f in schema.fields}
    for name, kind in names.items():
        allowed = _COLUMNS.get(name)
        if allowed is None:
            raise ConfigError(
                f"column '{name}' is not one the rocketmq sink writes "
                f"({', '.join(_COLUMNS)}); select or drop columns before writing"
            )
        if not isinstance(kind, allowed):
            raise ConfigError(
                f"column '{name}' has type {kind.simpleString()}, which cannot be sent"
            )
        if isinstance(kind, ArrayType) and not isinstance(kind.elementType, StringType):
            raise ConfigError(f"column '{name}' must be a string or an array of strings")
    if "body" not in names:
        raise ConfigError("the rocketmq sink needs a 'body' column (binary or string)")
    if opts.topic is None and "topic" not in names:
        raise ConfigError("the rocketmq sink needs a 'topic' column or the 'topic' option")


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task attempt sent: a row count, and for exactly-once its half messages."""

    rows: int
    sink_id: str = ""
    batch_id: int = 0
    token: str = ""
    halves: list[HalfRef] = field(default_factory=list)


def _rows(batch: pa.RecordBatch, opts: SinkOptions) -> Iterator[tuple[Message, str | None]]:
    cols: dict[str, list[Any]] = {n: batch.column(n).to_pylist() for n in batch.schema.names}
    n = batch.num_rows
    none: list[Any] = [None] * n
    bodies = cols["body"]
    topics = [opts.topic] * n if opts.topic is not None else cols["topic"]
    tags, keys = cols.get("tags", none), cols.get("keys", none)
    props, delays, shards = (
        cols.get("properties", none),
        cols.get("delayLevel", none),
        cols.get("shardingKey", none),
    )
    for i in range(n):
        body, topic = bodies[i], topics[i]
        if body is None:
            raise ValueError(NULL_BODY)
        if not topic:
            raise ValueError(NO_TOPIC)
        properties = row_properties(props[i], tags[i], keys[i], delays[i], shards[i])
        data = body.encode() if isinstance(body, str) else body
        yield Message(topic, data, properties=properties), shards[i]


def _partition_id() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


@dataclass(frozen=True, slots=True)
class _Shipper(Generic[T]):
    """How a task's rows leave: per-row messages, or batch sends already encoded."""

    rows: Callable[[list[tuple[QueueRef, Message]]], Future[T]]
    packed: Callable[[list[PackedSend]], Future[T]]


def _in_chunks(
    batches: Iterator[pa.RecordBatch], opts: SinkOptions, cluster: Cluster, ship: _Shipper[T]
) -> tuple[int, list[T]]:
    """Hand the rows to the client's loop thread a chunk at a time; the row count and
    the chunks' results, in order.

    A record batch that ``packable`` accepts becomes batch sends at once
    (``plan_sends``), handed over ``maxInFlight`` sends at a time. Any other
    goes row by row into chunks of eight times ``maxInFlight`` rows, or what
    the record batch had left. One chunk is on the wire while the next is built.
    """
    # numpy and pyarrow load on executors only: the driver's planning processes import
    # this module too
    from apogee.spark.columnar import Router, packable, plan_sends  # noqa: PLC0415

    router = Router(lambda topic: cluster.queues(topic, for_write=True), _partition_id())
    window = max(opts.max_in_flight, 1)
    pending: deque[Future[T]] = deque()
    results: list[T] = []
    rows = 0

    def started(future: Future[T]) -> None:
        pending.append(future)
        while len(pending) > 2:
            results.append(pending.popleft().result(opts.send_timeout_s * 4))

    with _no_cycle_collection():
        for batch in batches:
            if not batch.num_rows:
                continue
            rows += batch.num_rows
            if packable(batch):
                sends = plan_sends(batch, opts.topic, router, opts.batch_size)
                for at in range(0, len(sends), window):
                    started(ship.packed(sends[at : at + window]))
                continue
            chunk: list[tuple[QueueRef, Message]] = []
            for msg, shard in _rows(batch, opts):
                chunk.append((router.queue(msg.topic, shard), msg))
                if len(chunk) >= window * 8:
                    started(ship.rows(chunk))
                    chunk = []
            if chunk:  # what arrived goes out now, not when the task ends
                started(ship.rows(chunk))
        while pending:
            results.append(pending.popleft().result(opts.send_timeout_s * 4))
    return rows, results


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector off while a task writes, on again after.

    A task makes a few objects per row, none in a cycle, and keeps up to
    two chunks of them alive. Collections walked them again and again at the
    row rate: 40 to 55 % of the cost of turning a row into a message, timed
    outside Spark.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _send_at_least_once(batches: Iterator[pa.RecordBatch], opts: SinkOptions) -> SinkCommit:
    cluster = Cluster.of(opts.namesrv, timeout_s=opts.send_timeout_s)
    group = opts.producer_group
    rows, _ = _in_chunks(
        batches,
        opts,
        cluster,
        _Shipper(
            lambda chunk: cluster.send_rows(chunk, group, opts.batch_size),
            lambda sends: cluster.send_packed(sends, group),
        ),
    )
    return SinkCommit(rows)


def _send_halves(
    batches: Iterator[pa.RecordBatch], opts: SinkOptions, sink_id: str, batch_id: int
) -> SinkCommit:
    cluster = Cluster.of(opts.namesrv, timeout_s=opts.send_timeout_s)
    cluster.answer_checks(opts.producer_group, lambda m: decide(cluster, m))
    token = uuid.uuid4().hex
    common = {TXN_PROPERTY: TxnTag(sink_id, batch_id, token).text()}  # every row's, once committed
    group = opts.producer_group
    rows, sent = _in_chunks(
        batches,
        opts,
        cluster,
        _Shipper(
            lambda chunk: cluster.send_halves(chunk, group, opts.batch_size, common),
            lambda sends: cluster.send_packed_halves(sends, group, common),
        ),
    )
    return SinkCommit(rows, sink_id, batch_id, token, [h for halves in sent for h in halves])


def _commit_halves(
    opts: SinkOptions, messages: Sequence[WriterCommitMessage | None], batch_id: int
) -> None:
    done = [m for m in messages if isinstance(m, SinkCommit) and m.halves]
    if not done:
        return
    cluster = Cluster.of(opts.namesrv, timeout_s=opts.send_timeout_s)
    cluster.answer_checks(opts.producer_group, lambda m: decide(cluster, m))
    ledger = Ledger(cluster)
    sink_id = done[0].sink_id
    halves = [h for m in done for h in m.halves]
    if ledger.lookup(sink_id, batch_id) is not None:
        # replay of a batch committed before: its first delivery stands
        cluster.end_transactions(
            halves, opts.producer_group, LocalTransactionState.ROLLBACK_MESSAGE
        )
        return
    _pause("before-ledger", batch_id, cluster)
    ledger.write(sink_id, batch_id, [m.token for m in done])
    _pause("after-ledger", batch_id, cluster)
    cluster.end_transactions(halves, opts.producer_group, LocalTransactionState.COMMIT_MESSAGE)


def _abort_halves(
    opts: SinkOptions,
    messages: Sequence[WriterCommitMessage | None],
    sink_id: str | None,
    batch_id: int,
) -> None:
    """Roll back the halves of the tasks that reported, unless the batch was committed.

    Spark also aborts when ``commit`` itself failed: past the commit point
    (the ledger entry) the entry's halves must still commit, not be rolled back.
    ``sink_id`` is given for a batch write, whose id is never used again: its
    empty ledger entry makes the broker's checks roll back the halves of every
    attempt, the failed ones too, at their next check.
    """
    done = [m for m in messages if isinstance(m, SinkCommit)]
    sid = sink_id or next((m.sink_id for m in done if m.halves), None)
    if sid is None:
        return  # a stream's batch of which no task sent anything
    cluster = Cluster.of(opts.namesrv, timeout_s=opts.send_timeout_s)
    # the failed attempts' workers may be gone: this process answers their checks too
    cluster.answer_checks(opts.producer_group, lambda m: decide(cluster, m))
    ledger = Ledger(cluster)
    tokens = ledger.lookup(sid, batch_id)
    if tokens is None and sink_id is not None:
        ledger.write(sink_id, batch_id, [])
    kept = set(tokens or ())
    commit = [h for m in done if m.token in kept for h in m.halves]
    rollback = [h for m in done if m.token not in kept for h in m.halves]
    if commit:
        cluster.end_transactions(commit, opts.producer_group, LocalTransactionState.COMMIT_MESSAGE)
    if rollback:
        cluster.end_transactions(
            rollback, opts.producer_group, LocalTransactionState.ROLLBACK_MESSAGE
        )


def _pause(point: str, batch_id: int, cluster: Cluster) -> None:
    wanted = os.environ.get(PAUSE_ENV, "")
    parts = wanted.split(":", 2)
    if len(parts) != 3 or parts[1] != str(batch_id):
        return
    if parts[0] == point:
        Path(parts[2]).write_text(f"{point} {batch_id}\n")
        while True:  # held here until the test kills the driver
            time.sleep(1)
    if parts[0] == f"{point}+close":
        Path(parts[2]).write_text(f"{parts[0]} {batch_id}\n")
        cluster.close()  # as if its connections were lost: the next request fails


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.sink_id = f"batch-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            return _send_halves(iterator, self.opts, self.sink_id, 0)
        return _send_at_least_once(iterator, self.opts)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            _commit_halves(self.opts, messages, 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            _abort_halves(self.opts, messages, self.sink_id, 0)


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.run_id = f"run-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not self.opts.exactly_once:
            return _send_at_least_once(iterator, self.opts)
        ctx = TaskContext.get()
        query_id = ctx.getLocalProperty(_QUERY_ID) if ctx is not None else None
        batch_text = ctx.getLocalProperty(_BATCH_ID) if ctx is not None else None
        if not query_id or batch_text is None:
            raise RuntimeError("the exactly-once sink runs inside a streaming query only")
        return _send_halves(iterator, self.opts, query_id, int(batch_text))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _commit_halves(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            # no ledger entry here: a restarted query runs this batch id again
            _abort_halves(self.opts, messages, None, batchId)
