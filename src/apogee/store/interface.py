"""The seams of the store: what the broker may call, and what the store calls.

Owns: the MessageStore protocol (the whole surface the broker and its
services use), the IndexHook protocol the store drives an index through, the
shape of an index query result, and the arrival-listener type.

Threading contract: ``put``/``put_batch``/``put_derived``/``append_data``, ``dispatch_step``,
``clean_step`` and the admin operations (``delete_topics``) run on one writer
thread (or the event loop); reads may run on any thread. Futures from
``flush_future`` complete on a store service thread.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from typing import Protocol

from apogee.model.message import MessageExt, StoreBatch, StoreMessage
from apogee.store.dispatch import EntryDispatcher
from apogee.store.results import GetResult, PutResult, PutStatus, QueryMessageResult, QueueUnit

#: (topic, queue id, logical offset of the message, tag code, store timestamp),
#: called on the dispatching thread for each message entering a consume queue.
ArrivalListener = Callable[[str, int, int, int, int], None]


class IndexQueryResultLike(Protocol):
    """What an index query returns (the index defines the concrete class)."""

    @property
    def phy_offsets(self) -> Sequence[int]: ...

    @property
    def index_last_update_timestamp(self) -> int: ...

    @property
    def index_last_update_phy_offset(self) -> int: ...


class IndexHook(EntryDispatcher, Protocol):
    """The index service as the store drives it (it is also a dispatcher)."""

    def load(self, last_exit_ok: bool, checkpoint_index_timestamp_ms: int) -> None:
        """Open index files; after a crash drop those newer than the checkpoint time."""
        ...

    def flush(self) -> int:
        """Make index files durable; return the indexMsgTimestamp for the checkpoint."""
        ...

    def delete_files_below(self, min_phy_offset: int) -> None:
        """Delete index files that only point below the commit log's new minimum."""
        ...

    def retry(self) -> bool:
        """Index what a full disk held back (``DiskFullError`` if still no room);
        True when nothing waits any more."""
        ...

    def query(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> IndexQueryResultLike:
        """Commit-log offsets of messages with ``key`` stored in [begin_ts, end_ts]."""
        ...

    def close(self) -> None: ...


class MessageStore(Protocol):
    """Everything the broker may ask of a message store."""

    # -- writes
    def put(self, msg: StoreMessage) -> PutResult: ...
    def put_batch(self, batch: StoreBatch) -> PutResult: ...
    def put_derived(  # noqa: PLR0917
        self,
        source: memoryview,
        topic: str,
        queue_id: int,
        transaction_type: int,
        prepared: int,
        properties: bytes,
    ) -> PutResult:
        """A copy of the whole v1 record in ``source`` (a ``read_message`` view)
        with these fields replaced; the rest as ``put`` of its decoded form."""
        ...

    def flush_future(self, result: PutResult) -> Future[PutStatus]: ...
    def append_data(self, offset: int, data: bytes | memoryview) -> bool:
        """A master's bytes (slaves): False if ``offset`` is not the log's end;
        StoreError when the store refuses writes."""
        ...

    # -- steps the broker drives
    def dispatch_step(self, max_records: int = 1024) -> int: ...
    def dispatch_behind_bytes(self) -> int: ...
    def clean_step(self) -> object: ...
    def trigger_delete_files(self) -> None: ...

    # -- reads
    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        *,
        max_bytes: int | None = None,
        tag_filter: Collection[int] | None = None,
        group: str | None = None,
    ) -> GetResult: ...
    def read_message(
        self, commit_log_offset: int, size: int | None = None
    ) -> memoryview | None: ...
    def look_message(self, commit_log_offset: int) -> MessageExt | None: ...
    def query_message(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> QueryMessageResult: ...

    # -- offsets and times
    def min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...
    def max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...
    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int: ...
    def earliest_message_time(self, topic: str, queue_id: int) -> int: ...
    def message_store_time(self, topic: str, queue_id: int, offset: int) -> int: ...
    def queue_unit(self, topic: str, queue_id: int, offset: int) -> QueueUnit | None: ...
    def commit_log_min_offset(self) -> int: ...
    def commit_log_max_offset(self) -> int: ...

    # -- topics and figures
    def topics(self) -> dict[str, list[int]]: ...
    def delete_topics(self, topics: Collection[str]) -> int: ...
    def runtime_stats(self) -> dict[str, int]: ...

    # -- lifecycle
    def set_arrival_listener(self, listener: ArrivalListener | None) -> None: ...
    def start(self, *, dispatch_thread: bool = False) -> None: ...
    def close(self) -> None: ...
