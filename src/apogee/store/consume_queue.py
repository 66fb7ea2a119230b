"""Consume queues: per topic-queue indexes of 20-byte units into the commit log.

Owns: one ConsumeQueue per (topic, queue id) under
``consumequeue/<topic>/<queueId>/`` and the table of all of them: writing
units at their logical offsets (idempotently), min/max logical offsets,
reading units, finding an offset by store time, recovery (stop at the first
invalid unit), truncation to the commit log's end and deletion of files whose
records are gone. Runs of units are written by ``apogee.store.kernels.write_units``.

Unit (RocketMQ ConsumeQueue, big-endian)::

    int64 commit-log offset | int32 record size | int64 tag code

A file holds ``mapped_file_size_consume_queue_bytes / 20`` units and is named
by its first unit's byte offset (logical offset * 20). A queue whose first
file starts mid-way is pre-filled with blank units (0, 0x7FFFFFFF, 0); a
unit is valid iff offset >= 0 and size > 0.

Invariants: units are written by one dispatcher thread in logical order;
``max_offset`` moves after the unit's bytes are written, so readers on other
threads only see complete units.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from apogee.store import kernels
from apogee.store.dispatch import (
    E_COMMIT_LOG_OFFSET,
    E_CONSUME_QUEUE_OFFSET,
    E_MSG_SIZE,
    E_TAGS_CODE,
    DispatchEntry,
)
from apogee.store.results import QueueUnit
from apogee.store.segment import parse_segment_name
from apogee.store.segment_queue import SegmentQueue

CQ_UNIT_SIZE: Final = 20
BLANK_UNIT_SIZE: Final = 0x7FFFFFFF
UNIT = struct.Struct(">qiq")
assert UNIT.size == CQ_UNIT_SIZE
_BLANK_UNIT: Final = UNIT.pack(0, BLANK_UNIT_SIZE, 0)
_pack_unit = UNIT.pack_into


_write_units: Callable[..., int] = kernels.write_units


def is_blank_unit(phys: int, size: int) -> bool:
    return size == BLANK_UNIT_SIZE and phys == 0


class ConsumeQueue:
    """The units of one topic queue."""

    def __init__(
        self, root: Path, topic: str, queue_id: int, file_size: int, *, readonly: bool = False
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        # the event loop writes its first unit: no 8 MiB read-around on that fault
        self.queue = SegmentQueue(
            root / topic / str(queue_id), file_size, readonly=readonly, random_fill=True
        )
        self.min_logic_bytes = 0  # byte offset of the first unit still readable
        self.max_physic_end = -1  # commit-log end of the last unit's record

    # -- offsets -------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """Next logical offset to be written (exclusive)."""
        return self.queue.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_bytes // CQ_UNIT_SIZE

    # -- writing -------------------------------------------------------------

    def put(self, logical: int, phys: int, size: int, tags_code: int) -> None:
        """Write the unit of the record at ``phys`` at ``logical``.

        A unit already present with the same content is left alone (rebuilds
        are idempotent); a different one, and everything after it, is
        replaced; a gap is filled with blank units.
        """
        segs = self.queue.segments
        if segs:  # the common case: the next unit of a file with room
            seg = segs[-1]
            pos = seg.wrote
            if pos < seg.size and logical * CQ_UNIT_SIZE == seg.start + pos:
                _pack_unit(seg.view, pos, phys, size, tags_code)
                seg.wrote = pos + CQ_UNIT_SIZE
                self.max_physic_end = phys + size
                return
        self._put_slow(logical, phys, size, tags_code)

    def put_run(self, entries: list[DispatchEntry], i: int, j: int) -> int:
        """Write ``entries[i]`` and the entries after it up to ``j`` that continue it.

        ``entries[i]`` must be of this queue and of a queued type. Returns how
        many entries were taken (at least one): a run that continues the last
        file goes in with one call, anything else through :meth:`put`.
        """
        segs = self.queue.segments
        if segs:
            seg = segs[-1]
            n = _write_units(
                seg.view, seg.start, seg.wrote, seg.size, entries, i, j, self.topic, self.queue_id
            )
            if n:
                seg.wrote += n * CQ_UNIT_SIZE
                last = entries[i + n - 1]
                self.max_physic_end = last[E_COMMIT_LOG_OFFSET] + last[E_MSG_SIZE]
                return n
        entry = entries[i]
        self.put(
            entry[E_CONSUME_QUEUE_OFFSET],
            entry[E_COMMIT_LOG_OFFSET],
            entry[E_MSG_SIZE],
            entry[E_TAGS_CODE],
        )
        return 1

    def _put_slow(self, logical: int, phys: int, size: int, tags_code: int) -> None:
        expect = logical * CQ_UNIT_SIZE
        queue = self.queue
        if expect < queue.max_offset:
            if self.unit_at(logical) == (phys, size, tags_code):
                return
            self.truncate_logical(logical)
        if not queue.segments:
            self._start_at(expect)
        cur = queue.max_offset
        while cur < expect:  # a gap: keep positions equal to logical offsets
            self._append(_BLANK_UNIT)
            cur += CQ_UNIT_SIZE
        seg = queue.segments[-1]
        if seg.is_full():
            seg = queue.roll()
        UNIT.pack_into(seg.view, seg.wrote, phys, size, tags_code)
        seg.wrote += CQ_UNIT_SIZE
        self.max_physic_end = phys + size

    def _append(self, unit: bytes) -> None:
        seg = self.queue.segments[-1]
        if seg.is_full():
            seg = self.queue.roll()
        seg.view[seg.wrote : seg.wrote + CQ_UNIT_SIZE] = unit
        seg.wrote += CQ_UNIT_SIZE

    def _start_at(self, expect: int) -> None:
        """First unit of an empty queue: its file may have to start mid-way."""
        seg = self.queue.last_segment(start_if_empty=expect)
        fill = expect - seg.start
        if fill:
            seg.view[0:fill] = _BLANK_UNIT * (fill // CQ_UNIT_SIZE)
        seg.wrote = fill
        self.min_logic_bytes = expect

    # -- reading -------------------------------------------------------------

    def unit_at(self, logical: int) -> QueueUnit | None:
        seg = self.queue.locate(logical * CQ_UNIT_SIZE)
        if seg is None:
            return None
        pos = logical * CQ_UNIT_SIZE - seg.start
        if pos + CQ_UNIT_SIZE > seg.wrote:
            return None
        phys, size, code = UNIT.unpack_from(seg.view, pos)
        return QueueUnit(phys, size, code)

    def units_from(self, logical: int) -> memoryview | None:
        """Written units from ``logical`` to the end of its file (one file at most)."""
        seg = self.queue.locate(logical * CQ_UNIT_SIZE)
        if seg is None:
            return None
        pos = logical * CQ_UNIT_SIZE - seg.start
        end = seg.wrote
        if pos >= end:
            return None
        try:
            return seg.view[pos:end]
        except ValueError:  # unmapped by retention meanwhile
            return None

    def iter_units(self) -> Iterator[tuple[int, int, int, int]]:
        """(logical offset, phys, size, tag code) of every written unit."""
        for seg in self.queue.segments:
            base = seg.start // CQ_UNIT_SIZE
            for i, (phys, size, code) in enumerate(UNIT.iter_unpack(seg.view[: seg.wrote])):
                yield base + i, phys, size, code

    def offset_by_time(
        self, timestamp: int, store_time: Callable[[int, int], int], min_phys: int
    ) -> int:
        """Logical offset of the message stored at ``timestamp``, else the nearer neighbour.

        Binary search over units using each record's store time read from the
        commit log (RocketMQ getOffsetInQueueByTime); units whose record is
        gone count as older than everything. Returns 0 for an empty queue.
        """
        low, high = self.min_offset, self.max_offset - 1
        left = right = -1
        left_time = right_time = -1
        while low <= high:
            mid = (low + high) // 2
            unit = self.unit_at(mid)
            if unit is None:
                return 0
            phys, size, _ = unit
            if phys < min_phys or is_blank_unit(phys, size):
                low = mid + 1
                left = mid
                continue
            t = store_time(phys, size)
            if t < 0:
                return 0
            if t == timestamp:
                return mid
            if t > timestamp:
                high = mid - 1
                right, right_time = mid, t
            else:
                low = mid + 1
                left, left_time = mid, t
        if left_time == -1:
            return right if right != -1 else self.min_offset
        if right_time == -1:
            return left
        return right if abs(timestamp - left_time) > abs(timestamp - right_time) else left

    # -- recovery and cleaning ----------------------------------------------

    def recover(self) -> None:
        """Keep units up to the first invalid one (from the 3rd-last file on)."""
        segs = self.queue.segments
        if not segs:
            return
        first = max(0, len(segs) - 3)
        end = segs[first].start
        last_phys_end = -1
        for seg in segs[first:]:
            written = seg.nonzero_end(0)
            limit = min(seg.size, -(-written // CQ_UNIT_SIZE) * CQ_UNIT_SIZE)
            valid = 0
            for phys, size, _ in UNIT.iter_unpack(seg.view[:limit]):
                if phys < 0 or size <= 0:
                    break
                valid += CQ_UNIT_SIZE
                if not is_blank_unit(phys, size):
                    last_phys_end = phys + size
            end = seg.start + valid
            if valid < seg.size:
                break
        self.queue.truncate(end)
        self.max_physic_end = last_phys_end

    def truncate_logical(self, logical: int) -> None:
        """Drop units at and after ``logical``."""
        self.queue.truncate(logical * CQ_UNIT_SIZE)
        self.min_logic_bytes = min(self.min_logic_bytes, self.queue.max_offset)
        last = self.unit_at(self.max_offset - 1) if self.max_offset > 0 else None
        self.max_physic_end = -1 if last is None else last.commit_log_offset + last.size

    def truncate_to_commit_log(self, clog_end: int) -> None:
        """Drop trailing units whose records end past ``clog_end``."""
        logical = self.max_offset
        while logical > self.min_offset:
            unit = self.unit_at(logical - 1)
            if unit is None:
                break
            phys, size, _ = unit
            if is_blank_unit(phys, size) or phys + size <= clog_end:
                break
            logical -= 1
        if logical < self.max_offset:
            self.truncate_logical(logical)

    def correct_min_offset(self, clog_min: int) -> None:
        """Set the min offset to the first unit whose record is still in the log."""
        for seg in self.queue.segments:
            for i, (phys, size, _) in enumerate(UNIT.iter_unpack(seg.view[: seg.wrote])):
                if phys >= clog_min and not is_blank_unit(phys, size):
                    self.min_logic_bytes = seg.start + i * CQ_UNIT_SIZE
                    return
        self.min_logic_bytes = self.queue.max_offset

    def delete_expired(self, clog_min: int) -> int:
        """Delete files whose last unit points below ``clog_min``; return how many."""
        segs = self.queue.segments
        count = 0
        for seg in segs[:-1]:
            phys, _, _ = UNIT.unpack_from(seg.view, seg.size - CQ_UNIT_SIZE)
            if phys >= clog_min:
                break
            count += 1
        if count:
            self.queue.delete_first(count)
        self.correct_min_offset(clog_min)
        return count


class ConsumeQueueTable:
    """Every consume queue of the store, created on first dispatch."""

    def __init__(self, root: Path, file_size: int, *, readonly: bool = False) -> None:
        self.root = root
        self.file_size = file_size
        self.readonly = readonly
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if not self.root.is_dir():
            return
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if not qdir.name.isdigit() or not qdir.is_dir():
                    continue
                if not any(parse_segment_name(p.name) is not None for p in qdir.iterdir()):
                    continue
                cq = self._make(topic_dir.name, int(qdir.name))
                cq.queue.load()

    def _make(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(self.root, topic, queue_id, self.file_size, readonly=self.readonly)
        self.queues[(topic, queue_id)] = cq
        return cq

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        return cq if cq is not None else self._make(topic, queue_id)

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self.queues):
            out.setdefault(topic, []).append(qid)
        return out

    def max_physic_end(self) -> int:
        return max((cq.max_physic_end for cq in self.queues.values()), default=-1)

    def flush(self, least_pages: int = 0) -> None:
        for cq in list(self.queues.values()):
            cq.queue.flush(least_pages)

    def delete_topic(self, topic: str) -> int:
        """Remove every queue of ``topic`` and its files; return how many queues."""
        gone = [key for key in self.queues if key[0] == topic]
        for key in gone:
            self.queues.pop(key).queue.destroy()
        topic_dir = self.root / topic
        if topic_dir.is_dir() and not any(topic_dir.iterdir()):
            topic_dir.rmdir()
        return len(gone)

    def destroy_all(self) -> None:
        for topic in {key[0] for key in self.queues}:
            self.delete_topic(topic)

    def reap(self) -> int:
        return sum(cq.queue.reap() for cq in self.queues.values())

    def close(self) -> None:
        for cq in self.queues.values():
            cq.queue.close()
