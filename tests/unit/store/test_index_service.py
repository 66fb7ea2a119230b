"""IndexService: dispatch, rolling, query across files, recovery and retention.

Files are real and tiny (a few entries each) so rolling happens after a
handful of keys. On-disk facts are read with ``struct``, not through the
classes under test.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee._util.clock import FakeClock
from apogee.errors import StoreCorruptionError, StoreError
from apogee.store.dispatch import DispatchEntry, Dispatcher, DispatchRequest
from apogee.store.index_file import IndexFile
from apogee.store.index_service import MAX_MSGS_NUM_BATCH, IndexQueryResult, IndexService

T0 = 1_700_000_000_000
EVERYTHING = (0, 2**63 - 1)
TX_PREPARED, TX_COMMIT, TX_ROLLBACK = 0x4, 0x8, 0xC


def req(
    offset: int,
    *,
    topic: str = "T",
    keys: str | None = None,
    uniq: str | None = None,
    ts: int = T0,
    sys_flag: int = 0,
) -> DispatchRequest:
    return DispatchRequest(
        topic=topic,
        queue_id=0,
        commit_log_offset=offset,
        msg_size=100,
        tags_code=0,
        store_timestamp=ts,
        consume_queue_offset=0,
        keys=keys,
        uniq_key=uniq,
        sys_flag=sys_flag,
        prepared_transaction_offset=0,
    )


def service(
    index_dir: Path,
    *,
    entries: int = 5,
    slots: int = 4,
    clock: FakeClock | None = None,
    last_exit_ok: bool = True,
    checkpoint: int = 0,
) -> IndexService:
    s = IndexService(
        index_dir, max_hash_slot_num=slots, max_index_num=entries, clock=clock or FakeClock(T0)
    )
    s.load(last_exit_ok, checkpoint)
    return s


def names(index_dir: Path) -> list[str]:
    return sorted(p.name for p in index_dir.iterdir())


def raw_header(path: Path) -> tuple[int, int, int, int, int, int]:
    with open(path, "rb") as f:
        fields: tuple[int, int, int, int, int, int] = struct.unpack(">qqqqii", f.read(40))
    return fields


def offsets(s: IndexService, key: str, max_num: int = 64, topic: str = "T") -> list[int]:
    return list(s.query(topic, key, max_num, *EVERYTHING).phy_offsets)


@pytest.fixture
def utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_is_a_dispatcher(tmp_path: Path) -> None:
    s = service(tmp_path)
    dispatcher: Dispatcher = s
    dispatcher.dispatch(req(0, uniq="U"))
    assert offsets(s, "U") == [0]
    s.close()


def test_indexes_the_unique_key_and_each_key_token(tmp_path: Path) -> None:
    s = service(tmp_path, entries=64, slots=16)
    s.dispatch(req(100, keys="order-1  order-2 ", uniq="UNIQ-A"))
    for key in ("order-1", "order-2", "UNIQ-A"):
        assert offsets(s, key) == [100]
    assert offsets(s, "order-1  order-2 ") == []
    assert offsets(s, "") == []
    assert offsets(s, "order-1", topic="Other") == []  # keys are topic#key
    s.close()


def test_records_without_keys_create_no_file(tmp_path: Path) -> None:
    s = service(tmp_path / "index")
    s.dispatch(req(0))
    s.dispatch(req(1, keys="   "))
    assert names(tmp_path / "index") == []
    assert s.query("T", "x", 10, *EVERYTHING) == IndexQueryResult((), 0, 0)
    s.close()


def test_rollback_records_are_skipped(tmp_path: Path) -> None:
    s = service(tmp_path, entries=64)
    s.dispatch(req(1, uniq="P", sys_flag=TX_PREPARED))
    s.dispatch(req(2, uniq="C", sys_flag=TX_COMMIT))
    s.dispatch(req(3, uniq="R", sys_flag=TX_ROLLBACK | 0x1))  # compressed rollback
    s.dispatch(req(4, uniq="N", sys_flag=0x10))
    assert [offsets(s, k) for k in ("P", "C", "R", "N")] == [[1], [2], [], [4]]
    s.close()


def test_rolls_to_new_files_with_unique_ordered_names(tmp_path: Path) -> None:
    clock = FakeClock(T0)  # never advances: every file is created in the same ms
    s = service(tmp_path, clock=clock)
    for i in range(10):  # 4 keys per file (entries=5, entry 0 unused)
        s.dispatch(req(i * 10, uniq=f"u{i}", ts=T0 + i * 1000))
    s.close()
    files = names(tmp_path)
    assert len(files) == 3 == len(set(files))
    assert all(len(n) == 17 and n.isdigit() for n in files)
    headers = [raw_header(tmp_path / n) for n in files]
    # (beginTs, endTs, beginPhy, endPhy, slotCount, indexCount) per file
    assert [(h[2], h[3], h[5]) for h in headers] == [(0, 30, 5), (40, 70, 5), (80, 90, 3)]
    assert [(h[0], h[1]) for h in headers] == [
        (T0, T0 + 3000),
        (T0 + 4000, T0 + 7000),
        (T0 + 8000, T0 + 9000),
    ]


def test_file_names_are_local_creation_time(tmp_path: Path, utc: None) -> None:
    clock = FakeClock(T0 + 123)  # 2023-11-14 22:13:20.123 UTC
    s = service(tmp_path / "b", entries=2, clock=clock)  # one key per file
    s.dispatch(req(0, uniq="a"))
    s.dispatch(req(1, uniq="b"))  # same millisecond: the name moves on by one
    clock.advance(60.0)
    s.dispatch(req(2, uniq="c"))
    s.close()
    assert names(tmp_path / "b") == [
        "20231114221320123",
        "20231114221320124",
        "20231114221420123",
    ]


def test_names_keep_creation_order_when_the_clock_goes_back(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    s = service(tmp_path, entries=2, clock=clock)  # one key per file
    s.dispatch(req(0, uniq="a"))
    clock.advance(-3600.0)  # NTP steps the clock back an hour
    s.dispatch(req(1, uniq="b"))
    s.close()
    files = names(tmp_path)
    assert [raw_header(tmp_path / n)[2] for n in files] == [0, 1]
    assert int(files[1]) == int(files[0]) + 1
    # A restart loads them in name order and keeps appending after offset 1.
    again = service(tmp_path, entries=2, clock=clock)
    again.dispatch(req(1, uniq="b"))
    again.dispatch(req(2, uniq="c"))
    assert offsets(again, "b") == [1]
    assert offsets(again, "c") == [2]
    again.close()


def test_query_walks_files_newest_first_and_sorts(tmp_path: Path) -> None:
    s = service(tmp_path)
    for i in range(10):
        s.dispatch(req(i * 10, keys="k", ts=T0 + i * 1000))
    assert len(names(tmp_path)) == 3
    result = s.query("T", "k", 64, *EVERYTHING)
    assert result.phy_offsets == tuple(range(0, 100, 10))
    assert result.index_last_update_phy_offset == 90
    assert result.index_last_update_timestamp == T0 + 9000
    # With a cap, the newest offsets are kept, still returned in ascending order.
    assert offsets(s, "k", max_num=3) == [70, 80, 90]
    assert offsets(s, "k", max_num=5) == [50, 60, 70, 80, 90]
    s.close()


def test_query_time_range_selects_within_and_across_files(tmp_path: Path) -> None:
    s = service(tmp_path)
    for i in range(12):  # three files: seconds 0-3, 4-7, 8-11
        s.dispatch(req(i, keys="k", ts=T0 + i * 1000))
    window = s.query("T", "k", 64, T0 + 5000, T0 + 6000)
    assert window.phy_offsets == (5, 6)
    spanning = s.query("T", "k", 64, T0 + 2000, T0 + 9000)
    assert spanning.phy_offsets == tuple(range(2, 10))
    assert s.query("T", "k", 64, T0 + 20_000, T0 + 30_000).phy_offsets == ()
    s.close()


def test_max_num_is_capped_at_max_msgs_num_batch(tmp_path: Path) -> None:
    assert MAX_MSGS_NUM_BATCH == 64
    s = service(tmp_path, entries=200, slots=8)
    for i in range(100):
        s.dispatch(req(i, keys="hot"))
    assert offsets(s, "hot", max_num=1000) == list(range(36, 100))
    assert offsets(s, "hot", max_num=0) == []
    s.close()


def test_hash_collisions_come_back_for_the_caller_to_filter(tmp_path: Path) -> None:
    # "Aa" and "BB" have the same String.hashCode, and so do T#Aa and T#BB.
    s = service(tmp_path, entries=16)
    s.dispatch(req(1, keys="Aa"))
    s.dispatch(req(2, keys="BB"))
    assert offsets(s, "Aa") == [1, 2]
    assert offsets(s, "BB") == [1, 2]
    s.close()


def _sum_index_counts(index_dir: Path) -> int:
    return sum(raw_header(index_dir / n)[5] - 1 for n in names(index_dir))


def test_redispatch_is_idempotent(tmp_path: Path) -> None:
    records = [req(i * 10, keys=f"k{i % 3} shared", uniq=f"u{i}") for i in range(9)]
    s = service(tmp_path)
    for r in records:
        s.dispatch(r)
    s.flush()
    before = {k: offsets(s, k) for k in ("k0", "k1", "k2", "shared", "u4")}
    entries_before = _sum_index_counts(tmp_path)
    for r in records:  # the store re-reads the log after a restart
        s.dispatch(r)
    s.flush()
    assert {k: offsets(s, k) for k in before} == before
    assert _sum_index_counts(tmp_path) == entries_before == 27
    assert before["shared"] == [i * 10 for i in range(9)]
    s.close()


def test_a_record_split_across_files_is_not_indexed_twice(tmp_path: Path) -> None:
    s = service(tmp_path)  # 4 keys per file
    s.dispatch(req(0, keys="a b"))
    s.dispatch(req(10, keys="c d e"))  # c, d fill file 1; e opens file 2
    s.dispatch(req(10, keys="c d e"))
    s.dispatch(req(20, keys="f"))
    assert len(names(tmp_path)) == 2
    assert [offsets(s, k) for k in "abcdef"] == [[0], [0], [10], [10], [10], [20]]
    assert _sum_index_counts(tmp_path) == 6
    s.close()


def test_duplicate_keys_of_one_record_are_indexed_once(tmp_path: Path) -> None:
    s = service(tmp_path, entries=16)
    s.dispatch(req(5, keys="x x y", uniq="x"))
    assert offsets(s, "x") == [5]
    assert _sum_index_counts(tmp_path) == 2
    s.close()


def _fill_three_files(index_dir: Path) -> tuple[list[DispatchRequest], IndexService]:
    """Files end at offsets 10, 30 (both full) and 40 (writable, half full)."""
    records = [req(i * 10, uniq=f"u{i}", keys="all", ts=T0 + i * 1000) for i in range(5)]
    s = service(index_dir)  # 4 keys per file, 2 per record
    for r in records:
        s.dispatch(r)
    return records, s


def test_normal_restart_keeps_every_file_and_appends_to_the_last(tmp_path: Path) -> None:
    _, s = _fill_three_files(tmp_path)
    s.close()
    assert len(names(tmp_path)) == 3
    again = service(tmp_path, last_exit_ok=True, checkpoint=0)
    assert offsets(again, "all") == [0, 10, 20, 30, 40]
    again.dispatch(req(50, keys="all"))  # the last file still has room
    assert len(names(tmp_path)) == 3
    assert offsets(again, "all") == [0, 10, 20, 30, 40, 50]
    again.close()


def test_abnormal_exit_drops_files_newer_than_the_checkpoint(tmp_path: Path) -> None:
    records, s = _fill_three_files(tmp_path)
    first = names(tmp_path)[0]
    checkpoint = s.flush()  # file 1 and file 2 are sealed; file 2 ends at T0 + 3000
    assert checkpoint == T0 + 3000
    s.close()
    # Pretend the second file was not flushed before the crash: the checkpoint
    # only covers the first one.
    checkpoint = raw_header(tmp_path / first)[1]
    recovered = service(tmp_path, last_exit_ok=False, checkpoint=checkpoint)
    assert names(tmp_path) == [first]
    assert offsets(recovered, "all") == [0, 10]
    for r in records:  # the store re-dispatches the log from the checkpoint
        recovered.dispatch(r)
    assert offsets(recovered, "all") == [0, 10, 20, 30, 40]
    assert offsets(recovered, "u3") == [30]
    assert _sum_index_counts(tmp_path) == 10
    recovered.close()


def test_flush_reports_the_end_of_the_newest_sealed_file(tmp_path: Path) -> None:
    s = service(tmp_path, checkpoint=T0 - 5)
    assert s.flush() == T0 - 5  # nothing sealed yet: the loaded checkpoint stands
    for i in range(4):  # exactly fills file 1: sealed, no file 2 yet
        s.dispatch(req(i, uniq=f"u{i}", ts=T0 + i * 1000))
    assert s.flush() == T0 + 3000
    s.dispatch(req(9, uniq="later", ts=T0 + 9000))  # opens file 2, the writable one
    assert s.flush() == T0 + 3000
    s.delete_files_below(10**6)  # removes sealed file 1; the value never goes back
    assert s.flush() == T0 + 3000
    s.close()


def test_retention_deletes_only_wholly_covered_files(tmp_path: Path) -> None:
    _, s = _fill_three_files(tmp_path)
    files = names(tmp_path)
    s.delete_files_below(10)  # file 1 ends at 10: not below
    assert names(tmp_path) == files
    s.delete_files_below(25)
    assert names(tmp_path) == files[1:]
    assert offsets(s, "all") == [20, 30, 40]
    s.delete_files_below(10**9)  # the last, writable file is never removed
    assert names(tmp_path) == files[2:]
    assert offsets(s, "all") == [40]
    s.close()


def test_load_removes_interrupted_creations_and_ignores_foreign_files(tmp_path: Path) -> None:
    _, s = _fill_three_files(tmp_path)
    s.close()
    (tmp_path / "20991231235959999.tmp").write_bytes(b"")
    (tmp_path / "README").write_text("not an index file")
    again = service(tmp_path)
    assert "20991231235959999.tmp" not in names(tmp_path)
    assert "README" in names(tmp_path)
    assert offsets(again, "all") == [0, 10, 20, 30, 40]
    again.close()


def test_load_refuses_files_of_another_size(tmp_path: Path) -> None:
    _, s = _fill_three_files(tmp_path)
    s.close()
    other = IndexService(tmp_path, max_hash_slot_num=8, max_index_num=5)
    with pytest.raises(StoreCorruptionError, match="8 slots"):
        other.load(True, 0)
    assert len(names(tmp_path)) == 3  # nothing deleted on the way out
    with pytest.raises(StoreError):
        other.query("T", "all", 1, *EVERYTHING)


def test_destroy_removes_every_file(tmp_path: Path) -> None:
    records, s = _fill_three_files(tmp_path)
    s.destroy()
    assert names(tmp_path) == []
    assert offsets(s, "all") == []
    s.dispatch(records[0])
    assert offsets(s, "all") == [0]
    s.close()


def test_use_before_load_or_after_close_is_an_error(tmp_path: Path) -> None:
    s = IndexService(tmp_path, max_hash_slot_num=4, max_index_num=5)
    with pytest.raises(StoreError):
        s.dispatch(req(0, uniq="a"))
    s.load(True, 0)
    s.close()
    with pytest.raises(StoreError):
        s.query("T", "a", 1, *EVERYTHING)


def test_concurrent_queries_see_consistent_results_while_indexing(tmp_path: Path) -> None:
    s = service(tmp_path, entries=50, slots=7)
    total = 600
    written = [0]  # records dispatched so far (a bound, read without a lock)
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(total):
                s.dispatch(req(i, keys=f"k{i % 5} all", ts=T0 + i))
                written[0] = i + 1
                if i % 97 == 0:
                    s.flush()
                if i % 151 == 0:
                    s.delete_files_below(i - 200)
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                bound = written[0]
                got = s.query("T", f"k{bound % 5}", 64, *EVERYTHING).phy_offsets
                assert list(got) == sorted(set(got))
                assert all(o % 5 == bound % 5 for o in got)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert written[0] == total
    assert offsets(s, "k0", max_num=64)[-1] == 595
    s.close()


def _entry(r: DispatchRequest) -> DispatchEntry:
    return (
        r.topic,
        r.queue_id,
        r.commit_log_offset,
        r.msg_size,
        r.tags_code,
        r.store_timestamp,
        r.consume_queue_offset,
        r.keys,
        r.uniq_key,
        r.sys_flag,
        r.prepared_transaction_offset,
    )


def _file_bytes(index_dir: Path) -> list[tuple[str, bytes]]:
    return [(n, (index_dir / n).read_bytes()) for n in names(index_dir)]


def test_dispatch_entries_writes_what_dispatch_one_by_one_writes(tmp_path: Path) -> None:
    records = [
        req(0, keys="a b", uniq="u0"),
        req(10, keys="c  d e", uniq="u1", ts=T0 + 1500),
        req(10, keys="c d e", uniq="u1"),  # again: skipped as indexed
        req(20, uniq="u2", sys_flag=TX_ROLLBACK),  # not indexed
        req(30, keys=" ", uniq=""),  # no key at all
        req(40, keys="x x y", uniq="x", ts=T0 + 4000, topic="Other"),
        req(50, keys="f g h i j", ts=T0 + 9000),  # rolls in the middle of a record
        req(60, uniq="u6", sys_flag=TX_COMMIT),
    ]
    one_by_one = service(tmp_path / "one", clock=FakeClock(T0))
    for r in records:
        one_by_one.dispatch(r)
    one_by_one.close()
    batched = service(tmp_path / "batch", clock=FakeClock(T0))
    batched.dispatch_entries([_entry(r) for r in records[:3]])
    batched.dispatch_entries([_entry(r) for r in records[3:]])
    batched.close()
    assert len(names(tmp_path / "one")) > 2
    assert _file_bytes(tmp_path / "batch") == _file_bytes(tmp_path / "one")


def test_flush_syncs_sealed_files_and_close_syncs_the_writable_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_flush = IndexFile.flush

    def recording_flush(self: IndexFile) -> None:
        synced.append(self.name)
        real_flush(self)

    monkeypatch.setattr(IndexFile, "flush", recording_flush)
    s = service(tmp_path)  # 4 keys per file
    for i in range(3):
        s.dispatch(req(i * 10, keys=f"a{i} b{i}", ts=T0 + i))
    first, second = names(tmp_path)
    assert s.flush() == T0 + 1
    assert synced == [first]
    synced.clear()
    s.close()
    assert synced == [first, second]
