"""Commit-log replication, the store's side: what a master sends and how a slave keeps it.

Owns: where a master starts streaming for a slave's first report and the
chunks it streams (``transfer_start``, ``ReplicationSource``); the record
boundaries of a log (``record_start``); truncating a slave's store
(``truncate``); and ``ReplicaTail``, the slave's
state machine that checks its tail against the master's stream before it
appends, and truncates what the master no longer has. Sockets are the
broker's; this module only sees offsets and bytes.

Checking the tail. A slave's log may have bytes its master lost: the
master's tail was torn or corrupted and recovery dropped it, and the master
may even have written new records there since. So on every connection the
slave first reports, instead of its end ``S``, the start ``V`` of its last
record, and compares what the master streams from ``V`` with its own bytes::

    slave log   ... | rec | rec | last record |          S = slave's end
                                ^ V (reported first)
    equal up to S            -> append from S on, acknowledging as usual
    first difference at p,   -> the logs part at R, the start of the slave's
      p past the record at V    record holding p: truncate to R, reconnect
    difference inside the    -> the logs part at or before V: step back to
      record at V               a boundary 2x further back, reconnect
    master's end M < V       -> (an Apogee master then sends a heartbeat at
                                M) check from the record before M, then
                                truncate to M

Everything before the truncation point was compared byte for byte, so the
slave's log stays a prefix of the master's. A master that is not Apogee
streams from ``V`` too; if it is behind, it only sends heartbeats at ``V``
and the slave waits, as RocketMQ's own slave would.

Master side: a first report of 0 starts at the beginning of the master's
last commit-log file (RocketMQ's rule); a report beyond the master's end
starts at its end (the slave learns where that is); a chunk never crosses a
file and never includes bytes not yet in the file.
"""

from __future__ import annotations

import enum
import logging
import struct
from dataclasses import dataclass
from typing import Protocol

from apogee.model.message_codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POSITION,
)
from apogee.store.commitlog import CommitLog
from apogee.store.consume_queue import ConsumeQueueTable
from apogee.store.reput import Reput

log = logging.getLogger(__name__)

_SIZE_MAGIC = struct.Struct(">ii")
_MAGICS = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)
_MIN_STEP_BACK = 64 * 1024


# -- master -------------------------------------------------------------------------


def transfer_start(requested: int, min_offset: int, max_offset: int, file_size: int) -> int:
    """Where a master streams from for a slave whose first report is ``requested``."""
    if requested == 0:
        return max(0, max_offset - max_offset % file_size)
    return min(requested, max_offset)


class ReplicationSource:
    """What a master streams: commit-log bytes, one file at a time."""

    def __init__(self, commit_log: CommitLog) -> None:
        self._log = commit_log

    @property
    def min_offset(self) -> int:
        return self._log.min_offset

    @property
    def max_offset(self) -> int:
        """End of the bytes a slave may have (bytes in the file, not pending ones)."""
        return self._log.readable_end

    def start(self, requested: int) -> int:
        log = self._log
        return transfer_start(requested, log.min_offset, log.readable_end, log.queue.segment_size)

    def chunk(self, offset: int, max_bytes: int) -> memoryview | None:
        """Up to ``max_bytes`` written bytes from ``offset`` in one file; None if none."""
        log = self._log
        seg = log.queue.locate(offset)
        if seg is None:
            return None
        end = min(seg.start + seg.wrote, log.readable_end, offset + max_bytes)
        if end <= offset:
            return None
        pos = offset - seg.start
        try:
            return seg.view[pos : pos + end - offset]
        except ValueError:  # unmapped meanwhile (retention)
            return None


class TransferCursor:
    """One slave connection on the master: where its next transfer starts."""

    def __init__(self, source: ReplicationSource, requested: int) -> None:
        self.source = source
        self.requested = requested
        self.next = source.start(requested)
        #: the slave asked for more than this master has: tell it where the log ends
        self.behind_slave = requested > self.next

    def take(self, max_bytes: int) -> tuple[int, memoryview] | None:
        """The next chunk to send as (offset, bytes), or None when the slave has it all."""
        offset = self.next
        view = self.source.chunk(offset, max_bytes)
        if view is None:
            return None
        self.next = offset + len(view)
        return offset, view


# -- record boundaries -----------------------------------------------------------------


def record_start(commit_log: CommitLog, offset: int, hint: int = -1) -> int:
    """Start of the record that holds byte ``offset`` of the log.

    Walks the record sizes from the start of the file, or from ``hint``, a
    known record start at or before ``offset`` in the same file (the
    dispatcher's last record). A blank end record counts as one record
    reaching the end of its file; bytes that are no whole record (a torn
    tail) count as one record from where they begin.

    Raises:
        ValueError: ``offset`` is not in the log.
    """
    queue = commit_log.queue
    seg = queue.locate(offset)
    if seg is None or offset >= commit_log.max_offset:
        raise ValueError(f"offset {offset} is not in the log")
    view = seg.view
    target = offset - seg.start
    pos = hint - seg.start if seg.start <= hint <= offset else 0
    limit = seg.wrote
    unpack = _SIZE_MAGIC.unpack_from
    while pos + 8 <= limit:
        size, magic = unpack(view, pos)
        if magic == BLANK_MAGIC_CODE:
            return seg.start + pos
        if magic not in _MAGICS or size <= 8 or pos + size > limit or target < pos + size:
            return seg.start + pos
        pos += size
    return seg.start + pos


# -- truncation ----------------------------------------------------------------------


def truncate(commit_log: CommitLog, queues: ConsumeQueueTable, reput: Reput, offset: int) -> int:
    """Drop the commit log from ``offset`` (a record boundary) and what was built from
    it: consume-queue units, the dispatch cursor, the next queue offsets. Returns
    how many bytes were dropped.

    Index entries that point past ``offset`` stay in their files; a key query
    keeps only records that claim the offset their entry names
    (``claims_offset``), since after a truncation the same offset may hold
    another record.
    """
    dropped = commit_log.truncate(offset)
    if not dropped:
        return 0
    for cq in queues.queues.values():
        cq.truncate_to_commit_log(offset)
    reput.reput_from = min(reput.reput_from, offset)
    commit_log.topic_queue_table = {
        key: cq.max_offset for key, cq in queues.queues.items() if cq.max_offset > 0
    }
    return dropped


def claims_offset(view: memoryview | None, offset: int) -> memoryview | None:
    """``view`` when the record in it says it is at ``offset``, else None (released)."""
    if view is None:
        return None
    at = PHYSICAL_OFFSET_POSITION
    if len(view) < at + 8 or int.from_bytes(view[at : at + 8], "big") != offset:
        view.release()
        return None
    return view


# -- slave ---------------------------------------------------------------------------


class ReplicaStore(Protocol):
    """What ``ReplicaTail`` needs of a slave's store (``FileMessageStore``)."""

    def commit_log_min_offset(self) -> int: ...
    def commit_log_max_offset(self) -> int: ...
    def read_log(self, offset: int, size: int) -> memoryview | None: ...
    def record_start(self, offset: int) -> int: ...
    def append_data(self, offset: int, data: bytes | memoryview) -> bool: ...
    def truncate_log(self, offset: int) -> int: ...


class Step(enum.Enum):
    """What the connection should do after a frame."""

    CONTINUE = "continue"  # keep reading; report ``ack`` if it moved
    RECONNECT = "reconnect"  # close and connect again (``ReplicaTail.start`` knows where)


@dataclass(slots=True)
class Outcome:
    step: Step
    #: the offset to report (the slave's end) after an append; None: nothing new
    ack: int | None = None
    reason: str = ""


_GO_ON = Outcome(Step.CONTINUE)


class ReplicaTail:
    """A slave's side of one replication stream; see the module docstring.

    ``start`` at each connection gives the offset to report first;
    ``on_frame`` takes each frame; ``position`` is what to report on the
    periodic heartbeat (the end of the log, or while checking, how far the
    check got).
    """

    def __init__(self, store: ReplicaStore, *, name: str = "slave") -> None:
        self._store = store
        self._name = name
        self.checking = False
        self._check_from: int | None = None  # V, a record start; None: the last record
        self._compared = 0  # c: equal to the master's up to here
        self._step_back = 0
        #: the log ends exactly where this connection's start was learned to be good
        self._trusted_end: int | None = None
        #: where the master said its log ends (an Apogee master's first frame)
        self._master_end: int | None = None
        self.truncations: list[tuple[int, int, str]] = []  # (from, to, why)

    @property
    def position(self) -> int:
        return self._compared if self.checking else self._store.commit_log_max_offset()

    def start(self) -> int:
        """Begin a connection: the offset to report first."""
        store = self._store
        end = store.commit_log_max_offset()
        trusted, self._trusted_end = self._trusted_end, None
        floor = self._floor()
        if end == store.commit_log_min_offset() or trusted == end or floor >= end:
            self.checking = False
            self._master_end = None
            return end
        if self._check_from is None or not floor <= self._check_from < end:
            self._check_from = max(floor, store.record_start(end - 1))
        self.checking = True
        self._compared = self._check_from
        return self._check_from

    def _floor(self) -> int:
        """The lowest offset a check can begin at: the log's first byte, but a report
        of 0 asks a master for its last file, so a log from 0 starts at its 2nd record."""
        low = self._store.commit_log_min_offset()
        if low or self._store.commit_log_max_offset() < 8:
            return low
        head = self._store.read_log(0, 4)
        if head is None:
            return low
        try:
            size = int.from_bytes(head, "big", signed=True)
        finally:
            head.release()
        return max(size, 1)

    def on_frame(self, offset: int, body: memoryview) -> Outcome:
        """One transfer frame (``body`` empty for a heartbeat)."""
        if self.checking:
            return self._check(offset, body)
        store = self._store
        end = store.commit_log_max_offset()
        if offset != end and end != store.commit_log_min_offset():
            return Outcome(
                Step.RECONNECT, reason=f"master sent offset {offset}, this log ends at {end}"
            )
        if not body:
            return _GO_ON
        if not store.append_data(offset, body):
            return Outcome(
                Step.RECONNECT, reason=f"bytes at {offset} do not continue this log at {end}"
            )
        return Outcome(Step.CONTINUE, ack=store.commit_log_max_offset())

    # -- checking the tail ---------------------------------------------------------

    def _check(self, offset: int, body: memoryview) -> Outcome:
        store = self._store
        end = store.commit_log_max_offset()
        c = self._compared
        if offset < c:
            return self._master_behind(offset, end)
        if offset > c:
            return self._master_ahead(offset, end)
        if not body:
            if self._master_end == c:
                return self._truncate(c, f"the master's log ends at {c}")
            return _GO_ON
        n = min(len(body), end - c)
        mine = store.read_log(c, n)
        if mine is None:
            return Outcome(Step.RECONNECT, reason=f"cannot read this log at {c}")
        try:
            theirs = body[:n]
            differs_at = -1 if mine == theirs else c + _first_difference(mine, theirs)
        finally:
            mine.release()
        if differs_at >= 0:
            return self._parted(differs_at)
        self._compared = c = c + n
        if c < end:
            return _GO_ON
        # Equal up to the end: this log is the master's so far; the rest is new.
        self.checking = False
        self._check_from = None
        self._master_end = None
        self._step_back = 0
        log.info("%s: commit log checked against the master up to %d", self._name, end)
        rest = body[n:]
        if not rest:
            return Outcome(Step.CONTINUE, ack=end)
        return self.on_frame(end, rest)

    def _master_behind(self, master_end: int, end: int) -> Outcome:
        """The master streams (or beats) below where the check stands: its log ends there."""
        store = self._store
        self._master_end = master_end
        if master_end <= store.commit_log_min_offset():
            return self._truncate(master_end, f"the master's log ends at {master_end}, "
                                              "before anything kept here")  # fmt: skip
        self._check_from = store.record_start(master_end - 1)
        return Outcome(
            Step.RECONNECT,
            reason=f"the master's log ends at {master_end}, this one at {end}; checking "
            f"from {self._check_from}",
        )

    def _master_ahead(self, offset: int, end: int) -> Outcome:
        """The master streams from past where the check stands: it has no older bytes."""
        if offset < end and self._store.record_start(offset) == offset:
            self._check_from = self._compared = offset  # check from there on
            return _GO_ON
        return Outcome(
            Step.RECONNECT,
            reason=f"the master streams from {offset}, this log needs it from "
            f"{self._compared} (the master no longer has the bytes between)",
        )

    def _parted(self, at: int) -> Outcome:
        store = self._store
        parted = store.record_start(at)
        begun = self._check_from if self._check_from is not None else 0
        if parted > begun:
            return self._truncate(parted, f"the master's bytes differ from offset {at}")
        # The first record compared differs: the logs part at or before it.
        low = store.commit_log_min_offset()
        floor = self._floor()
        if parted <= floor:
            return self._truncate(low, f"the master's bytes differ from offset {at}, near "
                                       "the first byte kept here")  # fmt: skip
        end = store.commit_log_max_offset()
        self._step_back = max(2 * self._step_back, end - parted, _MIN_STEP_BACK)
        target = parted - self._step_back
        self._check_from = store.record_start(target) if target > floor else floor
        return Outcome(
            Step.RECONNECT,
            reason=f"the master's bytes differ from offset {at}; checking from {self._check_from}",
        )

    def _truncate(self, to: int, why: str) -> Outcome:
        store = self._store
        before = store.commit_log_max_offset()
        dropped = store.truncate_log(to)
        self.truncations.append((before, to, why))
        log.warning("%s: truncated the commit log from %d to %d (%d bytes dropped): %s",
                    self._name, before, to, dropped, why)  # fmt: skip
        self._trusted_end = store.commit_log_max_offset()
        self._check_from = None
        self._master_end = None
        self._step_back = 0
        self.checking = False
        return Outcome(Step.RECONNECT, reason=f"truncated to {to}: {why}")


def _first_difference(a: memoryview, b: memoryview) -> int:
    """Index of the first byte where two equal-length views differ (they do)."""
    lo, hi = 0, len(a)
    while hi - lo > 64:  # halve by comparing slices, which runs at memcmp speed
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    for i in range(lo, hi):
        if a[i] != b[i]:
            return i
    return hi
