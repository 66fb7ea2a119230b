from __future__ import annotations

import os
from pathlib import Path

import pytest

from apogee.errors import StoreCorruptionError
from apogee.store.segment import Segment, parse_segment_name, segment_name, written_extents
from apogee.store.segment_queue import SegmentQueue
from tests.harness.smaps import resident_kib, vm_flags

SIZE = 1024


def fill(q: SegmentQueue, n: int, byte: int = 0xAB) -> None:
    """Append n bytes, rolling when a segment is full."""
    seg = q.last_segment()
    while n > 0:
        if seg.is_full():
            seg = q.roll()
        k = min(n, seg.remaining())
        seg.view[seg.wrote : seg.wrote + k] = bytes([byte]) * k
        seg.wrote += k
        n -= k


def test_names_are_20_digit_offsets() -> None:
    assert segment_name(0) == "00000000000000000000"
    assert segment_name(1073741824) == "00000000001073741824"
    assert parse_segment_name("00000000001073741824") == 1073741824
    assert parse_segment_name("abc") is None
    assert parse_segment_name("0000000000107374182x") is None


def test_segment_is_preallocated_and_closes(tmp_path: Path) -> None:
    seg = Segment(tmp_path / segment_name(0), 0, SIZE, create=True)
    assert os.path.getsize(seg.path) == SIZE
    assert seg.remaining() == SIZE
    assert seg.close()
    assert seg.is_closed()


def test_prefault_maps_ahead_keeps_bytes_and_leaves_the_segment_closable(tmp_path: Path) -> None:
    size = 64 * 4096
    seg = Segment(tmp_path / segment_name(0), 0, size, create=True)
    seg.view[0:5] = b"hello"
    if not seg.prefault(16 * 4096):
        pytest.skip("the kernel does not populate mappings")
    assert seg.prefaulted == 16 * 4096
    assert seg.prefault(10 * size)  # clamped to the segment
    assert seg.prefaulted == size
    assert bytes(seg.view[0:6]) == b"hello\0"
    assert seg.close()  # no buffer export left behind
    other = Segment(tmp_path / segment_name(size), size, size, create=True)
    assert other.close()
    assert other.prefault(size)  # a closed segment is left alone
    assert other.prefaulted == 0


def test_a_log_segment_reads_around_its_faults(tmp_path: Path) -> None:
    # the commit log's: a writer that outruns the prefault takes fewer faults so
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 10)
    assert "rr" not in vm_flags(q.segments[0].path)
    q.close()


def test_a_prefault_of_many_chunks_maps_every_page(tmp_path: Path) -> None:
    # populated 4 MiB per call (other threads' mmap calls wait for each)
    size = (9 << 20) + 8 * 4096
    path = tmp_path / segment_name(0)
    seg = Segment(path, 0, size, create=True)
    if not seg.prefault(size):
        pytest.skip("the kernel does not populate mappings")
    assert seg.prefaulted == size
    assert resident_kib(path) == size // 1024
    assert seg.close()


def test_sync_takes_any_range_and_a_closed_segment_is_left_alone(tmp_path: Path) -> None:
    size = 16 * 4096
    seg = Segment(tmp_path / segment_name(0), 0, size, create=True)
    seg.view[5000:5010] = b"0123456789"
    seg.wrote = 5010
    seg.sync(4999, 5010)  # an unaligned start is taken down to its page
    seg.sync()
    seg.truncate_to(5005)  # zeroes past the new end; the next sync covers them too
    seg.sync(seg.flushed, seg.wrote)
    assert bytes(seg.view[5000:5010]) == b"01234\0\0\0\0\0"
    assert seg.close()
    seg.sync(0, 100)


def test_roll_and_locate(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 2 * SIZE + 10)
    assert [s.start for s in q.segments] == [0, SIZE, 2 * SIZE]
    assert q.max_offset == 2 * SIZE + 10
    located = q.locate(SIZE + 5)
    assert located is not None and located.start == SIZE
    assert q.locate(3 * SIZE) is None
    assert q.locate(-1) is None
    q.close()


def test_a_new_segment_reads_no_ahead_until_it_is_full(tmp_path: Path) -> None:
    # without the random-read hint, the first fault on a new, unwritten file
    # zero-fills read_ahead_kb of page cache around it
    q = SegmentQueue(tmp_path, SIZE, random_fill=True)
    fill(q, SIZE + 10)
    first, second = q.segments
    assert "rr" in vm_flags(second.path)
    assert "rr" not in vm_flags(first.path)  # full: read back as old data, with readahead
    assert "wr" in vm_flags(first.path)
    q.close()
    reopened = SegmentQueue(tmp_path, SIZE, random_fill=True)
    reopened.load()
    flags = [vm_flags(s.path) for s in reopened.segments]
    assert len(flags) == 2 and all(flags)  # both mapped again
    assert all("rr" not in f for f in flags)  # existing data: read with readahead
    reopened.close()


def test_first_segment_can_start_mid_way(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    seg = q.last_segment(start_if_empty=5 * SIZE + 100)
    assert seg.start == 5 * SIZE
    assert q.min_offset == 5 * SIZE
    assert q.locate(5 * SIZE + 1) is seg
    assert q.locate(SIZE) is None
    q.close()


def test_load_restores_order_and_rejects_gaps(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 3 * SIZE)
    q.close()
    loaded = SegmentQueue(tmp_path, SIZE)
    loaded.load()
    assert [s.start for s in loaded.segments] == [0, SIZE, 2 * SIZE]
    loaded.close()

    (tmp_path / segment_name(SIZE)).unlink()
    gap = SegmentQueue(tmp_path, SIZE)
    with pytest.raises(StoreCorruptionError, match="gap"):
        gap.load()
    gap.close()


def test_load_rejects_a_file_larger_than_configured(tmp_path: Path) -> None:
    (tmp_path / segment_name(0)).write_bytes(bytes(SIZE + 1))
    q = SegmentQueue(tmp_path, SIZE)
    with pytest.raises(StoreCorruptionError, match="larger"):
        q.load()
    q.close()


def test_short_file_is_extended_keeping_its_bytes(tmp_path: Path) -> None:
    (tmp_path / segment_name(0)).write_bytes(b"\x01\x02\x03")
    q = SegmentQueue(tmp_path, SIZE)
    q.load()
    seg = q.segments[0]
    assert bytes(seg.view[:4]) == b"\x01\x02\x03\x00"
    assert os.path.getsize(seg.path) == SIZE
    q.close()


def test_truncate_zeroes_the_tail_and_deletes_later_files(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 2 * SIZE + 500)
    q.truncate(SIZE + 100)
    assert [s.start for s in q.segments] == [0, SIZE]
    assert q.max_offset == SIZE + 100
    assert not (tmp_path / segment_name(2 * SIZE)).exists()
    seg = q.segments[1]
    assert bytes(seg.view[99:101]) == b"\xab\x00"
    assert seg.nonzero_end(0) == 100
    q.close()


def test_delete_first_never_removes_the_last(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 3 * SIZE)
    gone = q.delete_first(10)
    assert [s.start for s in gone] == [0, SIZE]
    assert q.min_offset == 2 * SIZE
    assert sorted(p.name for p in tmp_path.iterdir()) == [segment_name(2 * SIZE)]
    q.close()


def test_deleted_segment_stays_mapped_while_a_reader_holds_a_view(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 2 * SIZE)
    view = q.segments[0].view[0:10]
    q.delete_first(1)
    assert not (tmp_path / segment_name(0)).exists()
    assert bytes(view) == b"\xab" * 10  # still readable
    assert q.reap() == 1
    view.release()
    assert q.reap() == 0
    q.close()


def test_roll_takes_the_preallocated_segment(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    rolls: list[int] = []
    q.on_roll = lambda: rolls.append(1)
    fill(q, SIZE)
    assert q.prepare_next()
    assert not q.prepare_next()  # already there
    spare_path = tmp_path / segment_name(SIZE)
    assert spare_path.exists()
    inode = spare_path.stat().st_ino
    seg = q.roll()
    assert seg.start == SIZE and seg.path.stat().st_ino == inode
    assert rolls == [1]
    q.close()


def test_close_deletes_an_unused_spare(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, SIZE)
    fill(q, 10)
    q.prepare_next()
    q.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [segment_name(0)]


def test_flush_honours_least_pages(tmp_path: Path) -> None:
    q = SegmentQueue(tmp_path, 64 * 1024)
    fill(q, 4096)
    assert q.flush(least_pages=4) == 0
    assert q.flush(least_pages=1) == 4096
    assert q.flushed_offset == 4096
    fill(q, 10)
    assert q.flush() == 4106
    q.close()


@pytest.mark.parametrize("where", [0, 4095, 4096, 3 << 20, (8 << 20) - 1])
def test_nonzero_end_finds_a_byte_anywhere_in_a_reserved_file(tmp_path: Path, where: int) -> None:
    """Reserved blocks never written are skipped unread; bytes written through the
    mapping (still only in the page cache) and bytes in files are found."""
    seg = Segment(tmp_path / segment_name(0), 0, 8 << 20, create=True)
    assert seg.nonzero_end(0) == 0
    seg.view[where] = 0x7F  # a dirty page, not yet written back
    assert seg.nonzero_end(0) == where + 1
    assert seg.nonzero_end(where + 1) == where + 1
    seg.close()
    again = Segment(tmp_path / segment_name(0), 0, 8 << 20, create=False)
    assert again.nonzero_end(0) == where + 1
    again.close()


def test_the_extent_map_leaves_out_reserved_blocks_never_written(tmp_path: Path) -> None:
    """After a crash, recovery looks for bytes past the valid end; blocks reserved and never
    written are not read at all, so a 1 GiB segment with little in it opens in milliseconds."""
    size = 64 << 20
    seg = Segment(tmp_path / segment_name(0), 0, size, create=True)
    seg.view[40 << 20] = 0x7F  # a dirty page, not yet written back
    fd = os.open(tmp_path / segment_name(0), os.O_RDONLY)
    try:
        ranges = written_extents(fd, 0, size)
    finally:
        os.close(fd)
    if ranges is not None:  # a file system with an extent map (ext4, xfs, btrfs)
        assert any(start <= 40 << 20 < stop for start, stop in ranges), ranges
        assert sum(stop - start for start, stop in ranges) < size // 2, ranges
    assert seg.nonzero_end(0) == (40 << 20) + 1
    seg.close()
