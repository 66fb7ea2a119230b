"""An ordered run of equal-size segments addressed by global offset.

Owns: one directory of segment files (RocketMQ MappedFileQueue): loading it,
locating the segment of an offset, rolling to the next segment (taking the
one preallocated in the background when it is ready), truncating after an
offset, deleting whole segments from the front, and flushing.

Invariants:
- segments are contiguous: ``segments[i + 1].start == segments[i].end``;
- every segment but the last is full as far as appends are concerned;
- ``flushed_offset <= max_offset``; appends happen on one thread, flushes on
  another, reads on any: the list is only ever replaced or appended to, so a
  reader's snapshot stays consistent.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from apogee.errors import StoreCorruptionError
from apogee.store.segment import Segment, parse_segment_name, segment_name

OS_PAGE_SIZE = 4096


class SegmentQueue:
    """Segments of one log directory (commit log, or one consume queue)."""

    def __init__(
        self,
        directory: Path,
        segment_size: int,
        *,
        readonly: bool = False,
        random_fill: bool = False,
    ) -> None:
        if segment_size <= 0:
            raise ValueError("segment size must be positive")
        self.directory = directory
        self.segment_size = segment_size
        self.readonly = readonly
        #: new files read nothing around their faults until full (``Segment``)
        self.random_fill = random_fill
        self.segments: list[Segment] = []
        self.flushed_offset = 0
        self._spare: Segment | None = None
        self._spare_lock = threading.Lock()
        self._zombies: list[Segment] = []  # deleted but still mapped by readers
        #: called after a roll so a background thread can preallocate the next file
        self.on_roll: Callable[[], None] | None = None
        #: called with each segment appends start to use (the first one, each roll)
        self.on_new_segment: Callable[[Segment], None] | None = None

    # -- loading -------------------------------------------------------------

    def load(self) -> None:
        """Map every segment file of the directory, in offset order.

        Raises:
            StoreCorruptionError: a file has the wrong size or there is a gap.
        """
        if not self.directory.is_dir():
            return
        starts = sorted(
            start
            for p in self.directory.iterdir()
            if p.is_file() and (start := parse_segment_name(p.name)) is not None
        )
        for start in starts:
            if start % self.segment_size:
                raise StoreCorruptionError(
                    f"{self.directory / segment_name(start)}: start is not a multiple of "
                    f"the segment size {self.segment_size}"
                )
            if self.segments and self.segments[-1].end != start:
                raise StoreCorruptionError(f"gap in {self.directory} before {segment_name(start)}")
            path = self.directory / segment_name(start)
            seg = Segment(path, start, self.segment_size, create=False, readonly=self.readonly)
            # Loaded segments count as written and flushed; recovery sets the
            # true end of the last one.
            seg.wrote = seg.flushed = self.segment_size
            self.segments.append(seg)
        if self.segments:
            self.flushed_offset = self.max_offset

    # -- offsets -------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        segs = self.segments
        return segs[0].start if segs else 0

    @property
    def max_offset(self) -> int:
        """Offset just past the last written byte."""
        segs = self.segments
        if not segs:
            return 0
        last = segs[-1]
        return last.start + last.wrote

    def locate(self, offset: int) -> Segment | None:
        """The segment holding ``offset``, or None outside the queue."""
        segs = self.segments
        if not segs:
            return None
        index = (offset - segs[0].start) // self.segment_size
        if 0 <= index < len(segs):
            seg = segs[index]
            if seg.start <= offset < seg.end:
                return seg
        return None

    # -- appending -----------------------------------------------------------

    def last_segment(self, start_if_empty: int = 0) -> Segment:
        """The segment appends go to, creating the first one when there is none."""
        if self.segments:
            return self.segments[-1]
        first = (start_if_empty // self.segment_size) * self.segment_size
        seg = self._create(first)
        self.segments.append(seg)
        self.flushed_offset = max(self.flushed_offset, first)
        if self.on_new_segment is not None:
            self.on_new_segment(seg)
        return seg

    def roll(self) -> Segment:
        """Start the next segment after the last (full) one."""
        with self._spare_lock:  # the allocator thread must not create it at the same time
            start = self.segments[-1].end if self.segments else 0
            spare, self._spare = self._spare, None
            seg = spare if spare is not None and spare.start == start else None
            if spare is not None and seg is None:
                spare.delete()
            if seg is None:
                seg = self._create(start)
            if self.random_fill and self.segments:
                self.segments[-1].readahead()
            self.segments = [*self.segments, seg]
        if self.on_new_segment is not None:
            self.on_new_segment(seg)
        if self.on_roll is not None:
            self.on_roll()
        return seg

    def prepare_next(self, prefault: int = 0) -> bool:
        """Preallocate the segment after the last one; True if one was made.

        Runs on a background thread so that a roll finds its file ready, with
        its first ``prefault`` bytes already mapped.
        """
        if self.readonly:
            return False
        with self._spare_lock:
            segs = self.segments
            if not segs:
                return False
            start = segs[-1].end
            if self._spare is not None and self._spare.start == start:
                if prefault:  # made while nothing asked for mapped pages
                    self._spare.prefault(prefault)
                return False
            if self._spare is not None:
                self._spare.delete()
                self._spare = None
            self._spare = self._create(start)
            if prefault:
                self._spare.prefault(prefault)
        return True

    def _create(self, start: int) -> Segment:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / segment_name(start)
        return Segment(path, start, self.segment_size, create=True, random_fill=self.random_fill)

    def prefault_ahead(self, window: int) -> bool:
        """Populate the pages of the next ``window`` bytes after the last write."""
        segs = self.segments
        if not segs or self.readonly or window <= 0:
            return False
        seg = segs[-1]
        target = seg.wrote + window
        target -= target % OS_PAGE_SIZE
        # written pages are left alone (after a restart, or pwrite), not mapped again
        seg.prefaulted = max(seg.prefaulted, seg.wrote - seg.wrote % OS_PAGE_SIZE)
        return seg.prefault(target)

    # -- flushing ------------------------------------------------------------

    def dirty_bytes(self) -> int:
        return self.max_offset - self.flushed_offset

    def flush(self, least_pages: int = 0) -> int:
        """Sync the unflushed bytes of each segment; return the flushed offset.

        Skips the work when fewer than ``least_pages`` pages are dirty.
        """
        target = self.max_offset  # read first: bytes written later may ride along
        flushed = self.flushed_offset
        if target <= flushed:
            return flushed
        if least_pages > 0 and (target - flushed) < least_pages * OS_PAGE_SIZE:
            return flushed
        for seg in self.segments:
            if seg.end > flushed and seg.start < target and not seg.is_closed():
                end = min(seg.size, target - seg.start)
                seg.sync(seg.flushed, end)  # the written range only, not the pages ahead
                seg.flushed = end
        self.flushed_offset = target
        return target

    def mark_flushed(self, offset: int) -> None:
        """Record that a sync outside this queue made every byte before ``offset`` durable."""
        if offset <= self.flushed_offset:
            return
        for seg in reversed(self.segments):
            if seg.end <= self.flushed_offset:
                break  # older segments were marked before
            if seg.start < offset:
                seg.flushed = max(seg.flushed, min(seg.size, offset - seg.start))
        self.flushed_offset = offset

    # -- truncating and deleting --------------------------------------------

    def truncate(self, offset: int, *, zero: bool = True) -> None:
        """Drop every byte at and after ``offset`` (recovery, slave resync).

        ``zero=False`` trusts that the bytes after ``offset`` in its segment
        are already zero.
        """
        keep: list[Segment] = []
        for seg in self.segments:
            if seg.end <= offset:
                keep.append(seg)
            elif seg.start <= offset:
                seg.truncate_to(offset - seg.start, zero=zero)
                keep.append(seg)
            else:
                self._destroy(seg)
        self.segments = keep
        self.flushed_offset = min(self.flushed_offset, offset)

    def detach(self, seg: Segment) -> None:
        """Remove ``seg`` from the queue without deleting its file (it is closed)."""
        self.segments = [s for s in self.segments if s is not seg]
        if not seg.close():
            self._zombies.append(seg)

    def delete_first(self, count: int) -> list[Segment]:
        """Delete the ``count`` oldest segments (never the last one)."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return []
        gone = self.segments[:count]
        self.segments = self.segments[count:]
        for seg in gone:
            self._destroy(seg)
        return gone

    def destroy(self) -> None:
        """Delete every segment file of this queue and the directory if empty."""
        segs, self.segments = self.segments, []
        for seg in segs:
            self._destroy(seg)
        with self._spare_lock:
            if self._spare is not None:
                self._destroy(self._spare)
                self._spare = None
        self.flushed_offset = 0
        with contextlib.suppress(OSError):
            self.directory.rmdir()  # only when empty

    def _destroy(self, seg: Segment) -> None:
        if not seg.delete():
            self._zombies.append(seg)

    def reap(self) -> int:
        """Unmap deleted segments no reader holds any more; return how many remain."""
        self._zombies = [seg for seg in self._zombies if not seg.close()]
        return len(self._zombies)

    def close(self, *, delete_spare: bool = True) -> None:
        """Unmap every segment (deleting an unused preallocated one)."""
        with self._spare_lock:
            if self._spare is not None:
                if delete_spare:
                    self._spare.delete()
                else:
                    self._spare.close()
                self._spare = None
        for seg in self.segments:
            seg.close()
        self.reap()
