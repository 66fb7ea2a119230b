"""Outcomes of store operations, as values.

Owns: PutStatus / GetStatus (RocketMQ PutMessageStatus / GetMessageStatus)
and the result objects of put, get and query; QueueUnit, one consume-queue unit.

A PutResult with an "is stored" status (PUT_OK and the three timeouts) always
describes bytes that are in the commit log; every other status means nothing
was written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from apogee.model.msgid import create_offset_msg_id, create_offset_msg_ids


class PutStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    # Members are singletons compared by identity: hash them by identity too,
    # in C (Enum.__hash__ hashes the name in Python, on every dict look-up).
    __hash__ = object.__hash__

    @property
    def is_stored(self) -> bool:
        """The message is in the commit log (possibly not yet durable/replicated)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)


class GetStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"

    __hash__ = object.__hash__  # see PutStatus


@dataclass(slots=True)
class PutResult:
    """What one put (single message or batch) did.

    For a batch, ``wrote_offset``/``queue_offset`` are the first message's,
    ``msg_count`` the number appended and ``msg_id`` the comma-joined ids.
    """

    status: PutStatus
    wrote_offset: int = 0  # commit-log offset of the (first) record
    wrote_bytes: int = 0  # bytes appended, blank end-of-file marker excluded
    queue_offset: int = 0  # logical offset of the (first) message
    msg_count: int = 0
    store_timestamp: int = 0
    store_host: bytes = b""  # packed store host, for the ids
    reason: str = ""  # why, for statuses other than PUT_OK
    _msg_ids: str | None = field(default=None, repr=False)
    _offsets: list[int] | None = field(default=None, repr=False)

    @property
    def end_offset(self) -> int:
        """Commit-log offset just past this put's bytes (what a flush must cover)."""
        return self.wrote_offset + self.wrote_bytes

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def msg_id(self) -> str:
        """Offset message id(s), built on first use (they cost more than the append)."""
        if self._msg_ids is None:
            if self._offsets is None:
                self._msg_ids = create_offset_msg_id(self.store_host, self.wrote_offset)
            else:
                self._msg_ids = create_offset_msg_ids(self.store_host, self._offsets)
        return self._msg_ids

    @property
    def offsets(self) -> list[int]:
        """Commit-log offset of every record written."""
        if self._offsets is None:
            return [self.wrote_offset] if self.msg_count else []
        return self._offsets


@dataclass(slots=True)
class GetResult:
    """What one read of a consume queue returned.

    The records are views into the mapped commit log (no copy): send them as
    they are and drop them soon, since a view keeps its file mapped. A read
    makes ``runs``, one view per stretch of records that lie back to back in
    the commit log, and ``sizes``, each record's size in order; ``messages``,
    one view per record, is cut from the runs when first asked for (a filter,
    an admin read), so an answer that sends the runs makes no object per
    record. Whoever changes ``messages`` (a filter) sets ``runs`` to None.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    queue_offsets: list[int] = field(default_factory=list)
    total_bytes: int = 0
    suggest_pulling_from_slave: bool = False
    runs: list[memoryview] | None = None
    sizes: list[int] = field(default_factory=list)
    _messages: list[memoryview] | None = field(default=None, init=False, repr=False)

    @property
    def messages(self) -> list[memoryview]:
        """One view per record (cut from ``runs`` on first use)."""
        if self._messages is None:
            self._messages = _split(self.runs, self.sizes) if self.runs else []
        return self._messages

    @messages.setter
    def messages(self, views: list[memoryview]) -> None:
        self._messages = views

    @property
    def message_count(self) -> int:
        return len(self.sizes) if self._messages is None else len(self._messages)

    @property
    def body(self) -> list[memoryview]:
        """The records to send: ``runs`` when set, else ``messages``."""
        return self.messages if self.runs is None else self.runs

    def release(self) -> None:
        """Drop the views now rather than when the result is collected."""
        if self.runs is not None:
            for view in self.runs:
                view.release()
            self.runs = None
        if self._messages is not None:
            for view in self._messages:
                view.release()
        self._messages = []
        self.sizes = []


def _split(runs: list[memoryview], sizes: list[int]) -> list[memoryview]:
    """The records of ``runs``, one view each, cut at ``sizes`` in order."""
    out: list[memoryview] = []
    it = iter(sizes)
    for run in runs:
        pos, end = 0, run.nbytes
        while pos < end:
            size = next(it)
            out.append(run[pos : pos + size])
            pos += size
    return out


@dataclass(slots=True)
class QueryMessageResult:
    """Records found by key through the index (QUERY_MESSAGE)."""

    messages: list[memoryview]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int

    def release(self) -> None:
        for view in self.messages:
            view.release()
        self.messages.clear()


class QueueUnit(NamedTuple):
    """One consume-queue unit: where its record is in the commit log, and its tag code.

    For SCHEDULE_TOPIC_XXXX the tag code is the delivery time.
    """

    commit_log_offset: int
    size: int
    tag_code: int
