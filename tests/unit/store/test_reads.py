from __future__ import annotations

import mmap
import time
from pathlib import Path
from typing import Any

from apogee._util.clock import FakeClock
from apogee.model.javahash import java_string_hash
from apogee.model.message_codec import decode_record, iter_records
from apogee.store.config import BrokerRole
from apogee.store.file_store import FileMessageStore
from apogee.store.results import GetStatus
from apogee.testing.store import message, small_config


def open_store(
    tmp_path: Path, clock: FakeClock | None = None, **overrides: Any
) -> FileMessageStore:
    return FileMessageStore.open(small_config(tmp_path, **overrides), clock=clock or FakeClock())


def put_many(store: FileMessageStore, n: int, queue_id: int = 0, **kwargs: Any) -> None:
    for i in range(n):
        assert store.put(message(queue_id=queue_id, body=b"m%03d" % i, **kwargs)).ok
    store.dispatch_step(10_000)


def test_found_returns_views_of_the_stored_records(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    put_many(store, 5)
    got = store.get("TopicTest", 0, 1, 3)
    assert got.status is GetStatus.FOUND
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (4, 0, 5)
    assert got.queue_offsets == [1, 2, 3]
    assert all(isinstance(v.obj, mmap.mmap) for v in got.messages)  # no copy
    body = b"".join(bytes(v) for v in got.messages)
    assert got.total_bytes == len(body)
    assert [m.body for m in iter_records(body)] == [b"m001", b"m002", b"m003"]
    assert not got.suggest_pulling_from_slave
    got.release()
    store.close()


def test_records_back_to_back_come_as_one_run(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    put_many(store, 3, queue_id=0)
    put_many(store, 2, queue_id=1)  # splits queue 0 into two runs
    put_many(store, 3, queue_id=0)
    got = store.get("TopicTest", 0, 1, 32)
    assert got.queue_offsets == [1, 2, 3, 4, 5]
    assert got.runs is not None and len(got.runs) == 2
    assert got.body is got.runs
    assert all(isinstance(v.obj, mmap.mmap) for v in got.runs)  # no copy
    joined = b"".join(bytes(v) for v in got.messages)
    assert b"".join(bytes(v) for v in got.runs) == joined
    assert [len(v) for v in got.runs] == [
        sum(len(v) for v in got.messages[:2]),
        sum(len(v) for v in got.messages[2:]),
    ]
    got.release()
    assert got.body == []  # runs dropped, messages cleared
    # a tag filter that skips records leaves gaps between the runs
    codes = {java_string_hash("odd")}
    store.put(message(queue_id=2, tags="odd"))
    store.put(message(queue_id=2, tags="even"))
    store.put(message(queue_id=2, tags="odd"))
    store.dispatch_step(10_000)
    odd = store.get("TopicTest", 2, 0, 32, tag_filter=codes)
    assert odd.queue_offsets == [0, 2]
    assert odd.runs is not None and len(odd.runs) == 2
    assert b"".join(map(bytes, odd.runs)) == b"".join(map(bytes, odd.messages))
    nothing = store.get("TopicTest", 2, 3, 32)
    assert nothing.runs is None and nothing.body == []
    store.close()


def test_records_are_cut_from_the_runs_only_when_asked_for(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    put_many(store, 3, queue_id=0)
    put_many(store, 1, queue_id=1)
    put_many(store, 2, queue_id=0)
    got = store.get("TopicTest", 0, 0, 32)
    assert got.message_count == 5 and got.sizes == [len(v) for v in got.messages]
    # each view is one whole record, in queue order
    assert [decode_record(bytes(v)).queue_offset for v in got.messages] == [0, 1, 2, 3, 4]
    assert [decode_record(bytes(v)).body for v in got.messages] == [
        b"m000", b"m001", b"m002", b"m000", b"m001"
    ]  # fmt: skip
    del got.messages[3:]  # a caller that trims the records trims the count with them
    assert got.message_count == 3
    got.release()
    assert got.message_count == 0 and got.messages == []
    store.close()


def test_statuses_at_the_edges_of_a_queue(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    put_many(store, 3)
    unknown = store.get("Nope", 0, 5, 32)
    assert (unknown.status, unknown.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
    store.queues.get_or_create("Empty", 0)
    empty = store.get("Empty", 0, 4, 32)
    assert (empty.status, empty.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    caught_up = store.get("TopicTest", 0, 3, 32)
    assert (caught_up.status, caught_up.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 3)
    beyond = store.get("TopicTest", 0, 9, 32)
    assert (beyond.status, beyond.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 3)
    assert not (caught_up.messages or beyond.messages)
    store.close()


def test_tag_filter_and_no_matched_message(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for i in range(6):
        store.put(message(body=bytes([i]), tags="A" if i % 3 == 0 else "B"))
    store.dispatch_step()
    code_a = java_string_hash("A")
    got = store.get("TopicTest", 0, 0, 32, tag_filter={code_a})
    assert got.status is GetStatus.FOUND
    assert got.queue_offsets == [0, 3]
    assert got.next_begin_offset == 6
    got.release()
    none = store.get("TopicTest", 0, 0, 32, tag_filter={java_string_hash("C")})
    assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 6)
    everything = store.get("TopicTest", 0, 0, 32, tag_filter=set())
    assert everything.message_count == 6
    everything.release()
    store.close()


def test_count_and_byte_limits(tmp_path: Path) -> None:
    store = open_store(
        tmp_path,
        mapped_file_size_commit_log_bytes=1 << 20,
        mapped_file_size_consume_queue_bytes=2000,
    )
    put_many(store, 40)
    capped = store.get("TopicTest", 0, 0, 10)
    assert capped.message_count == 10 and capped.next_begin_offset == 10
    capped.release()
    in_memory = store.get("TopicTest", 0, 0, 64)
    assert in_memory.message_count == 32  # maxTransferCountOnMessageInMemory
    assert in_memory.next_begin_offset == 32
    in_memory.release()
    size = store.get("TopicTest", 0, 0, 1).total_bytes
    by_bytes = store.get("TopicTest", 0, 0, 64, max_bytes=3 * size)
    assert by_bytes.message_count == 3
    by_bytes.release()
    store.close()


def test_cold_data_reads_with_disk_limits_and_suggests_the_slave(tmp_path: Path) -> None:
    # pretend the machine has 2 KiB of RAM: 40 % of it is 819 bytes of "hot" log
    store = open_store(
        tmp_path,
        mapped_file_size_commit_log_bytes=1 << 20,
        mapped_file_size_consume_queue_bytes=2000,
        total_physical_memory_bytes=2048,
    )
    put_many(store, 40)
    cold = store.get("TopicTest", 0, 0, 32)
    assert cold.message_count == 8  # maxTransferCountOnMessageInDisk
    assert cold.suggest_pulling_from_slave
    cold.release()
    hot = store.get("TopicTest", 0, 39, 32)
    assert hot.message_count == 1 and not hot.suggest_pulling_from_slave
    hot.release()
    store.close()


def test_offset_too_small_after_retention_and_slave_keeps_offsets(tmp_path: Path) -> None:
    clock = FakeClock()
    hour = time.localtime(clock.now_ms() / 1000 + 2 * 3600).tm_hour
    store = open_store(tmp_path, clock, delete_when=f"{hour:02d}", file_reserved_time_hours=1)
    for _ in range(12):
        store.put(message(body=bytes(900)))
    store.dispatch_step()
    clock.advance(2 * 3600)
    store.put(message(body=b"late"))
    store.dispatch_step()
    report = store.clean_step()
    assert report.deleted_commit_log_files >= 2
    low = store.min_offset_in_queue("TopicTest", 0)
    assert low > 0
    small = store.get("TopicTest", 0, 0, 32)
    assert (small.status, small.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
    store.close()

    slave = FileMessageStore.open(
        small_config(tmp_path, broker_role=BrokerRole.SLAVE, delete_when="04"), clock=clock
    )
    kept = slave.get("TopicTest", 0, 0, 32)
    assert (kept.status, kept.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 0)
    slave.close()


def test_message_was_removing_when_log_files_go_before_the_queue_knows(tmp_path: Path) -> None:
    store = open_store(tmp_path, mapped_file_size_consume_queue_bytes=8 * 20)
    for _ in range(9):
        store.put(message(body=bytes(900)))
    store.dispatch_step()
    store.commit_log.queue.delete_first(1)  # the window before consume queues catch up
    got = store.get("TopicTest", 0, 0, 32)
    assert got.status is GetStatus.FOUND  # the records of the deleted file are skipped
    assert got.queue_offsets[0] == 4
    got.release()
    store.commit_log.queue.delete_first(1)
    only_gone = store.get("TopicTest", 0, 0, 2)
    assert only_gone.status is GetStatus.MESSAGE_WAS_REMOVING
    assert only_gone.next_begin_offset == 8  # every unit of both deleted files scanned
    store.close()


def test_lookups_by_offset_and_time(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path, clock)
    start = clock.now_ms()
    offsets = []
    for i in range(5):
        offsets.append(store.put(message(body=b"t%d" % i)).wrote_offset)
        clock.advance(1)
    store.dispatch_step()
    assert store.offset_by_time("TopicTest", 0, start + 2000) == 2
    assert store.offset_by_time("TopicTest", 0, start + 2400) == 2
    assert store.offset_by_time("TopicTest", 0, start + 2600) == 3
    assert store.offset_by_time("TopicTest", 0, start - 10_000) == 0
    assert store.offset_by_time("Nope", 0, start) == 0
    assert store.earliest_message_time("TopicTest", 0) == start
    assert store.message_store_time("TopicTest", 0, 3) == start + 3000
    assert store.earliest_message_time("Nope", 0) == -1
    found = store.look_message(offsets[3])
    assert found is not None and found.body == b"t3" and found.queue_offset == 3
    assert store.look_message(offsets[3] + 1) is None
    assert store.look_message(10**9) is None
    view = store.read_message(offsets[1])
    assert view is not None and decode_record(view).body == b"t1"
    view.release()
    assert store.min_offset_in_queue("Nope", 0) == -1
    assert store.max_offset_in_queue("Nope", 0) == 0
    assert store.topics() == {"TopicTest": [0]}
    store.close()


def test_deleting_a_topic_drops_its_queues_and_restarts_its_offsets(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    put_many(store, 3, queue_id=0)
    put_many(store, 2, queue_id=1)
    store.put(message(topic="Other"))
    store.dispatch_step()
    assert store.delete_topics(["TopicTest"]) == 2
    assert store.topics() == {"Other": [0]}
    assert not (tmp_path / "consumequeue" / "TopicTest").exists()
    gone = store.get("TopicTest", 0, 0, 32)
    assert gone.status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    again = store.put(message(queue_id=0, body=b"fresh"))
    assert again.queue_offset == 0
    store.dispatch_step()
    got = store.get("TopicTest", 0, 0, 32)
    assert got.status is GetStatus.FOUND and got.queue_offsets == [0]
    got.release()
    stats = store.runtime_stats()
    assert stats["put_ok"] == 7 and stats["consume_queues"] == 2
    assert stats["get_found"] == 1 and stats["get_miss"] == 1
    store.close()
