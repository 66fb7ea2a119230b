from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from apogee._util.clock import FakeClock
from apogee.store.config import StoreConfig
from apogee.store.dispatch import DispatchRequest
from apogee.store.file_store import FileMessageStore
from apogee.store.results import GetStatus, PutStatus
from apogee.store.retention import disk_state, expired_count, is_time_to_delete
from apogee.testing.store import message, small_config

HOUR_MS = 3_600_000


def test_delete_when_hours() -> None:
    assert is_time_to_delete("04", 4)
    assert not is_time_to_delete("04", 5)
    assert is_time_to_delete("04;10", 10)
    assert not is_time_to_delete("04;10", 11)


def test_disk_state_thresholds(tmp_path: Path) -> None:
    config = StoreConfig(tmp_path)
    assert disk_state([0.5, 0.1], config) == disk_state([0.5], config)
    calm = disk_state([0.5, 0.5], config)
    assert not (calm.space_to_delete or calm.clean_immediately or calm.disk_full)
    assert disk_state([0.76, 0.1], config).space_to_delete
    assert not disk_state([0.76], config).clean_immediately
    assert disk_state([0.1, 0.86], config).clean_immediately
    full = disk_state([0.91, 0.1], config)
    assert full.disk_full and full.clean_immediately and full.space_to_delete
    assert disk_state([-1.0], config).space_to_delete  # unknown usage: reclaim


def test_expired_count_stops_at_the_first_file_to_keep() -> None:
    times = [0, 10, 100, 20]
    assert expired_count(times, now_ms=60, reserved_ms=50, clean_at_once=False) == 2
    assert expired_count(times, now_ms=60, reserved_ms=50, clean_at_once=True) == 4
    assert expired_count([0] * 30, now_ms=60, reserved_ms=50, clean_at_once=False) == 10


class Disk:
    """Settable disk usage (the real one cannot be filled in a test)."""

    def __init__(self, ratio: float = 0.3) -> None:
        self.ratio = ratio

    def __call__(self, path: Path) -> float:
        return self.ratio


def local_hour_ms(clock: FakeClock, hour: int) -> int:
    """Advance the clock to the next local ``hour:30``."""
    while time.localtime(clock.now_ms() / 1000).tm_hour != hour:
        clock.advance(1800)
    return clock.now_ms()


def fill(store: FileMessageStore, clock: FakeClock, files: int) -> None:
    for _ in range(files * 4):  # four 1000-byte records per 4 KiB file
        assert store.put(message(body=bytes(900))).ok
        clock.advance(60)
    store.dispatch_step(10_000)


def open_store(tmp_path: Path, clock: FakeClock, disk: Disk, **overrides: Any) -> FileMessageStore:
    config = small_config(tmp_path, file_reserved_time_hours=72, **overrides)
    return FileMessageStore.open(config, clock=clock, disk_usage=disk)


def test_expired_files_go_only_at_the_delete_hour(tmp_path: Path) -> None:
    clock = FakeClock()
    local_hour_ms(clock, 1)
    disk = Disk()
    store = open_store(tmp_path, clock, disk)
    fill(store, clock, 5)
    clock.advance(73 * 3600)
    local_hour_ms(clock, 3)
    assert store.clean_step().deleted_commit_log_files == 0
    local_hour_ms(clock, 4)
    report = store.clean_step()
    assert report.reason == "time"
    assert report.deleted_commit_log_files == 4  # never the newest file
    assert store.commit_log_min_offset() == 4 * 4096
    assert report.deleted_consume_queue_files >= 1
    assert store.min_offset_in_queue("TopicTest", 0) == 16
    got = store.get("TopicTest", 0, 3, 32)
    assert (got.status, got.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 16)
    store.close()


def test_unexpired_files_stay_even_at_the_delete_hour(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path, clock, Disk(), delete_when="00;01;02;03;04;05;06;07;08;09;10;11;"
                       "12;13;14;15;16;17;18;19;20;21;22;23")  # fmt: skip
    fill(store, clock, 4)
    clock.advance(71 * 3600)
    assert store.clean_step().deleted_commit_log_files == 0
    clock.advance(2 * 3600)
    assert store.clean_step().deleted_commit_log_files == 3
    store.close()


def test_full_disk_reclaims_at_once_and_refuses_puts_until_it_drops(tmp_path: Path) -> None:
    clock = FakeClock()
    local_hour_ms(clock, 1)
    disk = Disk(0.80)
    store = open_store(tmp_path, clock, disk)
    fill(store, clock, 3)
    assert store.clean_step().deleted_commit_log_files == 0  # nothing expired yet
    clock.advance(73 * 3600)
    local_hour_ms(clock, 12)
    report = store.clean_step()
    assert (report.reason, report.deleted_commit_log_files) == ("space", 2)

    fill(store, clock, 2)
    disk.ratio = 0.86  # above the forcible ratio: unexpired files go too
    assert store.clean_step().deleted_commit_log_files == 2

    disk.ratio = 0.95
    report = store.clean_step()
    assert report.disk_full
    refused = store.put(message())
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "disk" in refused.reason
    disk.ratio = 0.5
    store.clean_step()
    assert store.put(message()).ok
    store.close()


def test_manual_delete_ignores_the_hour(tmp_path: Path) -> None:
    clock = FakeClock()
    local_hour_ms(clock, 1)
    store = open_store(tmp_path, clock, Disk())
    fill(store, clock, 3)
    clock.advance(80 * 3600)
    local_hour_ms(clock, 13)
    assert store.clean_step().deleted_commit_log_files == 0
    store.trigger_delete_files()
    assert store.clean_step().deleted_commit_log_files == 2
    store.close()


def test_a_file_read_by_someone_is_unmapped_once_they_let_go(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path, clock, Disk(0.86))
    fill(store, clock, 2)
    got = store.get("TopicTest", 0, 0, 1)
    assert got.status is GetStatus.FOUND
    assert store.clean_step().deleted_commit_log_files == 1
    assert bytes(got.messages[0][4:8]) == bytes.fromhex("DAA320A7")  # still readable
    assert store.commit_log.queue.reap() == 1
    got.release()
    assert store.commit_log.queue.reap() == 0
    store.close()


@dataclass
class FakeIndexResult:
    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


@dataclass
class FakeIndex:
    """Stands in for the index service, which lives on another branch."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    by_key: dict[str, list[int]] = field(default_factory=dict)

    def load(self, last_exit_ok: bool, checkpoint_index_timestamp_ms: int) -> None:
        self.calls.append(("load", last_exit_ok, checkpoint_index_timestamp_ms))

    def dispatch(self, request: DispatchRequest) -> None:
        if request.uniq_key:
            self.by_key.setdefault(request.uniq_key, []).append(request.commit_log_offset)

    def flush(self) -> int:
        self.calls.append(("flush",))
        return 1234

    def delete_files_below(self, min_phy_offset: int) -> None:
        self.calls.append(("delete_below", min_phy_offset))

    def query(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> Any:
        return FakeIndexResult(self.by_key.get(key, [])[:max_num], 77, 88)

    def close(self) -> None:
        self.calls.append(("close",))


def test_index_hooks_are_driven_by_the_store(tmp_path: Path) -> None:
    clock = FakeClock()
    index = FakeIndex()
    store = FileMessageStore.open(small_config(tmp_path), clock=clock, index=index)
    assert index.calls == [("load", True, 0)]
    r = store.put(message(uniq="U-1", body=b"find me"))
    store.dispatch_step()
    found = store.query_message("TopicTest", "U-1", 32, 0, clock.now_ms())
    assert len(found.messages) == 1 and bytes(found.messages[0][-30:]).find(b"U-1") >= 0
    assert (found.index_last_update_timestamp, found.index_last_update_phy_offset) == (77, 88)
    found.release()
    assert r.ok
    store.trigger_delete_files()
    store.clean_step()
    assert ("delete_below", 0) in index.calls
    store.close()
    assert index.calls[-2:] == [("flush",), ("close",)]
    assert store.checkpoint.index_msg_timestamp == 1234
    index2 = FakeIndex()
    (tmp_path / "abort").write_text("1")
    again = FileMessageStore.open(small_config(tmp_path), clock=clock, index=index2)
    assert index2.calls == [("load", False, 1234)]
    again.close()


def test_forced_cleaning_says_which_messages_it_took(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    store = open_store(tmp_path, clock, Disk(0.86))  # above the forcible ratio
    fill(store, clock, 3)  # nothing near its 72 h
    with caplog.at_level(logging.WARNING, logger="apogee.store.retention"):
        report = store.clean_step()
    assert report.deleted_commit_log_files == report.forced_files == 2
    assert report.forced_losses == [("TopicTest", 0, 0, 8)]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "2 commit-log file(s) deleted before their 72 h were up" in line
    assert "8 message(s) in 1 queue(s) lost: TopicTest/0 [0, 8)" in line
    stats = store.runtime_stats()
    assert (stats["forced_deleted_files"], stats["forced_deleted_messages"]) == (2, 8)
    store.close()


def test_expired_files_are_not_counted_as_forced(tmp_path: Path) -> None:
    clock = FakeClock()
    local_hour_ms(clock, 1)
    store = open_store(tmp_path, clock, Disk())
    fill(store, clock, 3)
    clock.advance(73 * 3600)
    local_hour_ms(clock, 4)
    report = store.clean_step()
    assert report.deleted_commit_log_files == 2
    assert (report.forced_files, report.forced_losses) == (0, [])
    store.close()
