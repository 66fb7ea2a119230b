"""IndexFile against RocketMQ's on-disk layout (IndexHeader, hash slots, index entries).

Raw checks read the file with ``struct`` directly, never through IndexFile,
so a layout mistake in the class cannot hide behind its own reader.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from apogee.errors import StoreCorruptionError
from apogee.model.javahash import java_string_hash
from apogee.store.index_file import IndexFile, file_size, index_key_hash
from tests.harness.smaps import vm_flags

SLOTS = 100
ENTRIES = 400
T0 = 1_700_000_000_000  # ms


def _header(path: Path) -> tuple[int, int, int, int, int, int]:
    raw = path.read_bytes()
    fields: tuple[int, int, int, int, int, int] = struct.unpack_from(">qqqqii", raw, 0)
    return fields


def _slot(path: Path, slots: int, key: str) -> int:
    raw = path.read_bytes()
    pos = 40 + (index_key_hash(key) % slots) * 4
    value: int = struct.unpack_from(">i", raw, pos)[0]
    return value


def _entry(path: Path, slots: int, number: int) -> tuple[int, int, int, int]:
    raw = path.read_bytes()
    fields: tuple[int, int, int, int] = struct.unpack_from(
        ">iqii", raw, 40 + slots * 4 + number * 20
    )
    return fields


def _create(path: Path, slots: int = SLOTS, entries: int = ENTRIES) -> IndexFile:
    return IndexFile.create(path, hash_slot_num=slots, index_num=entries)


def test_file_size_matches_the_reference_defaults() -> None:
    assert file_size(5_000_000, 20_000_000) == 420_000_040
    assert file_size(SLOTS, ENTRIES) == 40 + SLOTS * 4 + ENTRIES * 20


def test_key_hash_is_abs_of_java_hash_with_min_value_as_zero() -> None:
    assert index_key_hash("a") == 97
    negative = "a fairly long key whose java hash is negative!"
    assert java_string_hash(negative) < 0
    assert index_key_hash(negative) == -java_string_hash(negative)
    # Math.abs(Integer.MIN_VALUE) stays negative in Java; RocketMQ maps it to 0.
    assert index_key_hash("polygenelubricants") == 0


def test_put_until_full_then_every_key_is_found(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with _create(path) as f:
        # Entry 0 is never used, so a file of ENTRIES entries holds ENTRIES - 1 keys.
        for i in range(ENTRIES - 1):
            assert f.put_key(str(i), i, T0)
        assert f.is_full
        assert not f.put_key(str(ENTRIES), ENTRIES, T0)
        for i in range(ENTRIES - 1):
            assert f.select_phy_offsets(str(i), 10, 0, 2**63 - 1) == [i]
        assert f.select_phy_offsets("60", 10, 0, 2**63 - 1) == [60]
        assert f.select_phy_offsets("not-there", 10, 0, 2**63 - 1) == []


def test_header_after_n_puts_follows_the_layout(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    keys = ["k1", "k2", "k1", "k3", "k2"]
    with _create(path) as f:
        for n, key in enumerate(keys):
            assert f.put_key(key, 1000 + n * 100, T0 + n * 1500)
        f.flush()
        begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = _header(path)
    assert (begin_ts, end_ts) == (T0, T0 + 4 * 1500)
    assert (begin_phy, end_phy) == (1000, 1400)
    distinct_slots = {index_key_hash(k) % SLOTS for k in keys}
    assert slot_count == len(distinct_slots) == 3
    assert index_count == len(keys) + 1
    # Entries are numbered in put order from 1: k1, k2, k1, k3, k2.
    h, phy, diff, prev = _entry(path, SLOTS, 3)  # second "k1"
    assert (h, phy, diff, prev) == (index_key_hash("k1"), 1200, 3, 1)  # 3000 ms -> 3 s
    h, phy, diff, prev = _entry(path, SLOTS, 5)  # second "k2"
    assert (h, phy, diff, prev) == (index_key_hash("k2"), 1400, 6, 2)
    assert _entry(path, SLOTS, 0) == (0, 0, 0, 0)  # never used
    assert _slot(path, SLOTS, "k1") == 3
    assert _slot(path, SLOTS, "k3") == 4


def test_no_fault_reads_around_the_index(tmp_path: Path) -> None:
    # slots are found by hash: a read-around would fill read_ahead_kb per new slot page
    path = tmp_path / "idx"
    with _create(path):
        assert "rr" in vm_flags(path)
    assert vm_flags(path) == []  # closed: unmapped
    with IndexFile.open(path, hash_slot_num=SLOTS, index_num=ENTRIES):
        assert "rr" in vm_flags(path)


def test_fresh_file_header_starts_with_index_count_one(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with IndexFile.create(
        path, hash_slot_num=SLOTS, index_num=ENTRIES, end_phy_offset=777, end_timestamp=T0
    ):
        pass
    assert path.stat().st_size == file_size(SLOTS, ENTRIES)
    assert _header(path) == (T0, T0, 777, 777, 0, 1)


def test_query_respects_time_range_and_max_num(tmp_path: Path) -> None:
    with _create(tmp_path / "idx") as f:
        # Ten messages with the same key, one every 10 s; offsets 0, 100, ... 900.
        for i in range(10):
            assert f.put_key("order-1", i * 100, T0 + i * 10_000)
        everything = f.select_phy_offsets("order-1", 64, 0, 2**63 - 1)
        # The chain is walked newest first.
        assert everything == [900, 800, 700, 600, 500, 400, 300, 200, 100, 0]
        window = f.select_phy_offsets("order-1", 64, T0 + 20_000, T0 + 50_000)
        assert window == [500, 400, 300, 200]
        assert f.select_phy_offsets("order-1", 3, 0, 2**63 - 1) == [900, 800, 700]
        assert f.select_phy_offsets("order-1", 2, T0 + 20_000, T0 + 50_000) == [500, 400]
        assert f.select_phy_offsets("order-1", 64, T0 + 95_000, T0 + 99_000) == []
        assert f.select_phy_offsets("order-1", 0, 0, 2**63 - 1) == []


def test_time_resolution_is_whole_seconds_since_begin(tmp_path: Path) -> None:
    with _create(tmp_path / "idx") as f:
        assert f.put_key("a", 1, T0)
        assert f.put_key("a", 2, T0 + 2_999)  # stored as +2 s
        assert f.select_phy_offsets("a", 10, T0 + 2_000, T0 + 2_000) == [2]
        assert f.select_phy_offsets("a", 10, T0 + 2_500, T0 + 3_000) == []


def test_timestamps_before_begin_clamp_to_zero_diff(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with _create(path) as f:
        assert f.put_key("a", 1, T0)
        assert f.put_key("a", 2, T0 - 60_000)  # clock stepped back
        assert f.put_key("a", 3, T0 + 2**31 * 1000 + 5_000)  # beyond int32 seconds
        f.flush()
    assert _entry(path, SLOTS, 2)[2] == 0
    assert _entry(path, SLOTS, 3)[2] == 2**31 - 1


def test_same_slot_different_hash_is_filtered_and_chain_intact(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with _create(path, slots=1, entries=16) as f:  # every key lands in slot 0
        for i in range(6):
            assert f.put_key("alpha" if i % 2 == 0 else "beta", i, T0)
        assert f.select_phy_offsets("alpha", 10, 0, 2**63 - 1) == [4, 2, 0]
        assert f.select_phy_offsets("beta", 10, 0, 2**63 - 1) == [5, 3, 1]
        f.flush()
    # Walk the chain from the raw bytes: 6 -> 5 -> ... -> 1 -> 0 (end).
    number = _slot(path, 1, "alpha")
    seen = []
    while number:
        seen.append(number)
        number = _entry(path, 1, number)[3]
    assert seen == [6, 5, 4, 3, 2, 1]
    assert _header(path)[4] == 1  # one slot in use


def test_equal_hash_collisions_are_returned_for_both_keys(tmp_path: Path) -> None:
    # "Aa" and "BB" share String.hashCode() 2112: RocketMQ's index cannot tell
    # them apart, so both offsets come back and the caller checks the key.
    assert index_key_hash("Aa") == index_key_hash("BB")
    with _create(tmp_path / "idx", slots=7) as f:
        assert f.put_key("Aa", 10, T0)
        assert f.put_key("BB", 20, T0)
        assert f.put_key("Cc", 30, T0)
        assert f.select_phy_offsets("Aa", 10, 0, 2**63 - 1) == [20, 10]
        assert f.select_phy_offsets("BB", 10, 0, 2**63 - 1) == [20, 10]


def test_reopen_gives_the_same_answers(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    keys = [f"key-{i % 37}" for i in range(300)]
    with _create(path, slots=31) as f:
        for i, key in enumerate(keys):
            assert f.put_key(key, i * 64, T0 + i * 700)
        before = {k: f.select_phy_offsets(k, 64, T0, T0 + 100_000) for k in set(keys)}
        header = (f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset)
    with IndexFile.open(path, hash_slot_num=31, index_num=ENTRIES) as g:
        assert (g.begin_timestamp, g.end_timestamp, g.begin_phy_offset, g.end_phy_offset) == header
        assert g.index_count == 301
        assert {k: g.select_phy_offsets(k, 64, T0, T0 + 100_000) for k in set(keys)} == before
        # A reopened file keeps accepting keys where it left off.
        assert g.put_key("key-0", 99_999, T0 + 300 * 700)
        assert g.select_phy_offsets("key-0", 1, 0, 2**63 - 1) == [99_999]


def test_is_time_matched_is_an_overlap_test(tmp_path: Path) -> None:
    with _create(tmp_path / "idx") as f:
        f.put_key("a", 1, 10_000)
        f.put_key("a", 2, 20_000)
        assert f.is_time_matched(0, 50_000)  # covers the file
        assert f.is_time_matched(15_000, 16_000)  # inside
        assert f.is_time_matched(0, 10_000)  # touches the begin
        assert f.is_time_matched(20_000, 30_000)  # touches the end
        assert not f.is_time_matched(0, 9_999)
        assert not f.is_time_matched(20_001, 30_000)


def test_open_rejects_a_file_of_the_wrong_size(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with _create(path):
        pass
    with pytest.raises(StoreCorruptionError, match="size"):
        IndexFile.open(path, hash_slot_num=SLOTS + 1, index_num=ENTRIES)


def test_open_rejects_an_index_count_beyond_capacity(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with _create(path):
        pass
    with open(path, "r+b") as raw:
        raw.seek(36)
        raw.write(struct.pack(">i", ENTRIES + 1))
    with pytest.raises(StoreCorruptionError, match="index count"):
        IndexFile.open(path, hash_slot_num=SLOTS, index_num=ENTRIES)


def test_a_corrupt_chain_link_stops_the_walk(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with _create(path, slots=1, entries=8) as f:
        for i in range(4):
            f.put_key("k", i, T0)
    # Point entry 2 back at itself-or-later: the walk must stop, not loop.
    with open(path, "r+b") as raw:
        raw.seek(40 + 4 + 2 * 20 + 16)
        raw.write(struct.pack(">i", 3))
    with IndexFile.open(path, hash_slot_num=1, index_num=8) as g:
        assert g.select_phy_offsets("k", 10, 0, 2**63 - 1) == [3, 2, 1]


def test_invalid_sizes_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hash_slot_num"):
        IndexFile.create(tmp_path / "a", hash_slot_num=0, index_num=10)
    with pytest.raises(ValueError, match="index_num"):
        IndexFile.create(tmp_path / "b", hash_slot_num=10, index_num=1)


def test_files_release_their_descriptors(tmp_path: Path) -> None:
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        pytest.skip("needs /proc to count open descriptors")
    before = len(list(fd_dir.iterdir()))
    with _create(tmp_path / "a") as f:
        f.put_key("k", 1, T0)
        f.flush()
    with IndexFile.open(tmp_path / "a", hash_slot_num=SLOTS, index_num=ENTRIES):
        pass
    _create(tmp_path / "b").destroy()
    with pytest.raises(StoreCorruptionError):
        IndexFile.open(tmp_path / "a", hash_slot_num=SLOTS + 1, index_num=ENTRIES)
    assert len(list(fd_dir.iterdir())) == before
    assert sorted(os.listdir(tmp_path)) == ["a"]
