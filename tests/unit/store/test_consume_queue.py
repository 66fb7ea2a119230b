from __future__ import annotations

import struct
from pathlib import Path

from apogee.store.consume_queue import BLANK_UNIT_SIZE, ConsumeQueue, ConsumeQueueTable
from apogee.store.segment import segment_name

FILE = 20 * 4  # four units per file


def make(tmp_path: Path) -> ConsumeQueue:
    return ConsumeQueue(tmp_path, "T", 0, FILE)


def test_units_are_20_bytes_big_endian(tmp_path: Path) -> None:
    cq = make(tmp_path)
    cq.put(0, 1234, 99, -5)
    raw = (tmp_path / "T" / "0" / segment_name(0)).read_bytes()[:20]
    assert raw == struct.pack(">qiq", 1234, 99, -5)
    assert (cq.min_offset, cq.max_offset) == (0, 1)
    assert cq.unit_at(0) == (1234, 99, -5)
    assert cq.unit_at(1) is None
    cq.queue.close()


def test_units_roll_across_files_named_by_byte_offset(tmp_path: Path) -> None:
    cq = make(tmp_path)
    for i in range(10):
        cq.put(i, i * 100, 100, 0)
    names = sorted(p.name for p in (tmp_path / "T" / "0").iterdir())
    assert names == [segment_name(0), segment_name(80), segment_name(160)]
    assert cq.max_offset == 10
    assert cq.unit_at(9) == (900, 100, 0)
    assert cq.max_physic_end == 1000
    view = cq.units_from(5)
    assert view is not None and len(view) == 3 * 20  # to the end of its file only
    view.release()
    cq.queue.close()


def test_rebuilding_the_same_units_is_idempotent_and_a_different_one_replaces(
    tmp_path: Path,
) -> None:
    cq = make(tmp_path)
    for i in range(6):
        cq.put(i, i * 100, 100, 7)
    cq.put(2, 200, 100, 7)
    assert cq.max_offset == 6
    cq.put(3, 999, 50, 1)  # the log says otherwise now: the tail goes
    assert cq.max_offset == 4
    assert cq.unit_at(3) == (999, 50, 1)
    cq.queue.close()


def test_a_gap_is_filled_with_blank_units(tmp_path: Path) -> None:
    cq = make(tmp_path)
    cq.put(0, 0, 10, 0)
    cq.put(3, 300, 10, 0)
    assert cq.unit_at(1) == (0, BLANK_UNIT_SIZE, 0)
    assert cq.unit_at(3) == (300, 10, 0)
    cq.queue.close()


def test_first_file_starting_mid_way_is_prefilled_with_blanks(tmp_path: Path) -> None:
    cq = make(tmp_path)
    cq.put(6, 5000, 10, 0)  # file of units 4..7; units 4 and 5 are blank
    assert [p.name for p in (tmp_path / "T" / "0").iterdir()] == [segment_name(80)]
    assert cq.unit_at(4) == (0, BLANK_UNIT_SIZE, 0)
    assert (cq.min_offset, cq.max_offset) == (6, 7)
    cq.queue.close()
    again = make(tmp_path)
    again.queue.load()
    again.recover()
    again.correct_min_offset(0)  # blank units never count as messages
    assert (again.min_offset, again.max_offset) == (6, 7)
    again.queue.close()


def test_recover_stops_at_the_first_invalid_unit(tmp_path: Path) -> None:
    cq = make(tmp_path)
    for i in range(6):
        cq.put(i, 100 + i * 10, 10, 0)
    seg = cq.queue.segments[1]
    struct.pack_into(">qiq", seg.view, 0, 140, 0, 0)  # unit 4: size 0 is invalid
    cq.queue.close()
    again = make(tmp_path)
    again.queue.load()
    again.recover()
    assert again.max_offset == 4
    assert again.max_physic_end == 140
    assert bytes(again.queue.segments[1].view[:FILE]) == bytes(FILE)  # tail zeroed
    again.queue.close()


def test_truncate_to_commit_log_end(tmp_path: Path) -> None:
    cq = make(tmp_path)
    for i in range(6):
        cq.put(i, i * 100, 100, 0)
    cq.truncate_to_commit_log(350)  # units 3.. end past 350
    assert cq.max_offset == 3
    assert cq.max_physic_end == 300
    assert len(cq.queue.segments) == 1
    cq.queue.close()


def test_delete_expired_files_and_correct_min(tmp_path: Path) -> None:
    cq = make(tmp_path)
    for i in range(10):
        cq.put(i, i * 100, 100, 0)
    assert cq.delete_expired(450) == 1  # file of units 0..3 (last phys 300 < 450)
    assert cq.min_offset == 5  # unit 4 (phys 400) points below 450
    assert cq.queue.min_offset == 80
    cq.queue.close()


def test_offset_by_time_exact_nearest_and_bounds(tmp_path: Path) -> None:
    cq = make(tmp_path)
    times = {0: 1000, 100: 2000, 200: 3000, 300: 4000}
    for i, phys in enumerate(times):
        cq.put(i, phys, 10, 0)

    def store_time(phys: int, size: int) -> int:
        return times[phys]

    assert cq.offset_by_time(3000, store_time, 0) == 2
    assert cq.offset_by_time(2100, store_time, 0) == 1  # nearer to 2000
    assert cq.offset_by_time(2900, store_time, 0) == 2  # nearer to 3000
    assert cq.offset_by_time(10, store_time, 0) == 0
    assert cq.offset_by_time(99_999, store_time, 0) == 3
    assert cq.offset_by_time(1500, store_time, 150) == 2  # units below the log's min skipped
    cq.queue.close()


def test_table_loads_every_topic_queue_and_deletes_topics(tmp_path: Path) -> None:
    table = ConsumeQueueTable(tmp_path, FILE)
    table.get_or_create("A", 0).put(0, 0, 1, 0)
    table.get_or_create("A", 3).put(0, 1, 1, 0)
    table.get_or_create("%RETRY%g", 0).put(0, 2, 1, 0)
    table.close()
    loaded = ConsumeQueueTable(tmp_path, FILE)
    loaded.load()
    assert loaded.topics() == {"%RETRY%g": [0], "A": [0, 3]}
    assert loaded.delete_topic("A") == 2
    assert not (tmp_path / "A").exists()
    assert loaded.topics() == {"%RETRY%g": [0]}
    loaded.close()
