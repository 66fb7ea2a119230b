from __future__ import annotations

import struct
import threading
from pathlib import Path

import pytest

from apogee._util.clock import FakeClock
from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchItem,
    MessageExt,
    StoreBatch,
    string_to_properties,
)
from apogee.model.message_codec import (
    BLANK_MAGIC_CODE,
    RecordKind,
    check_record,
    decode_record,
    encode_record,
    pack_host,
)
from apogee.model.msgid import create_offset_msg_id
from apogee.store.commitlog import CommitLog
from apogee.store.results import PutStatus
from apogee.store.segment import segment_name
from apogee.testing.store import message, small_config


def open_log(tmp_path: Path, clock: FakeClock | None = None, **overrides: object) -> CommitLog:
    log = CommitLog(small_config(tmp_path, **overrides), clock or FakeClock())
    log.load()
    return log


def test_append_assigns_physical_and_queue_offsets(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    r1 = log.append(message(queue_id=1, body=b"a", tags="TagA"))
    r2 = log.append(message(queue_id=1, body=b"bb"))
    r3 = log.append(message(queue_id=2, body=b"c"))
    assert [r.status for r in (r1, r2, r3)] == [PutStatus.PUT_OK] * 3
    assert (r1.wrote_offset, r2.wrote_offset) == (0, r1.wrote_bytes)
    assert r3.wrote_offset == r1.wrote_bytes + r2.wrote_bytes
    assert [r.queue_offset for r in (r1, r2, r3)] == [0, 1, 0]
    assert log.topic_queue_table == {("TopicTest", 1): 2, ("TopicTest", 2): 1}
    assert log.max_offset == r3.end_offset
    view = log.read_record(r2.wrote_offset)
    assert view is not None
    msg = decode_record(view)
    view.release()
    assert (msg.body, msg.queue_offset, msg.commit_log_offset) == (b"bb", 1, r2.wrote_offset)
    assert msg.store_timestamp == clock.now_ms() == r2.store_timestamp
    assert r2.msg_id == create_offset_msg_id(pack_host(("10.0.0.1", 10911)), r2.wrote_offset)
    log.close()


def test_handoff_entries_carry_tag_code_keys_and_unique_key(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(message(body=b"x", tags="TagA", keys="k1 k2", uniq="U1"))
    (entry,) = log.handoff
    assert entry[0:2] == ("TopicTest", 0)
    assert entry[4] == 84 * 31**3 + 97 * 31**2 + 103 * 31 + 65  # "TagA".hashCode()
    assert entry[7:9] == ("k1 k2", "U1")
    log.close()


def test_blank_end_record_when_record_plus_8_does_not_fit(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    results = [log.append(message(body=bytes(900))) for _ in range(5)]
    size = results[0].wrote_bytes
    per_file = (4096 - 8) // size  # a record needs 8 spare bytes after it
    assert all(r.wrote_offset < 4096 for r in results[:per_file])
    moved = results[per_file]
    assert moved.wrote_offset == 4096
    seg0 = log.queue.segments[0]
    blank_at = per_file * size
    assert struct.unpack_from(">ii", seg0.view, blank_at) == (4096 - blank_at, BLANK_MAGIC_CODE)
    checked = check_record(seg0.view, blank_at, 4096)
    assert checked.kind is RecordKind.BLANK
    assert (tmp_path / "commitlog" / segment_name(4096)).exists()
    log.close()


def test_record_that_exactly_leaves_8_bytes_stays(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_size_bytes=4000)
    first = log.append(message(body=b""))
    fill = 4096 - first.wrote_bytes - 8 - (first.wrote_bytes)
    second = log.append(message(body=bytes(fill)))
    assert second.wrote_offset == first.wrote_bytes
    assert second.end_offset == 4096 - 8
    third = log.append(message(body=b""))
    assert third.wrote_offset == 4096
    log.close()


def test_prepared_records_do_not_take_queue_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    half = log.append(message(sys_flag=TRANSACTION_PREPARED_TYPE))
    normal = log.append(message())
    commit = log.append(message(sys_flag=TRANSACTION_COMMIT_TYPE))
    assert (half.queue_offset, normal.queue_offset, commit.queue_offset) == (0, 0, 1)
    assert log.topic_queue_table[("TopicTest", 0)] == 2
    log.close()


def test_ipv6_hosts_set_the_sys_flag_bits(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    r = log.append(message(born_host=("::1", 1), store_host=("fe80::1", 10911)))
    view = log.read_record(r.wrote_offset)
    assert view is not None
    msg = decode_record(view)
    view.release()
    assert msg.sys_flag & 0x30 == 0x30
    assert msg.store_host == ("fe80::1", 10911)
    assert len(r.msg_id) == 56
    log.close()


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"body": bytes(1025)}, PutStatus.MESSAGE_ILLEGAL),
        ({"topic": "T" * 128}, PutStatus.MESSAGE_ILLEGAL),
        ({"extra": {"P": "x" * 32800}}, PutStatus.PROPERTIES_SIZE_EXCEEDED),
    ],
)
def test_illegal_messages_are_refused_and_nothing_is_written(
    tmp_path: Path, kwargs: dict[str, object], status: PutStatus
) -> None:
    log = open_log(tmp_path)
    result = log.append(message(**kwargs))  # type: ignore[arg-type]
    assert result.status is status
    assert result.reason
    assert log.max_offset == 0 and not log.handoff
    log.close()


def test_oversized_properties_are_refused_with_large_files(tmp_path: Path) -> None:
    log = open_log(tmp_path, mapped_file_size_commit_log_bytes=1 << 20)
    result = log.append(message(extra={"P": "x" * 32800}))
    assert result.status is PutStatus.PROPERTIES_SIZE_EXCEEDED
    assert log.max_offset == 0
    log.close()


def read_all(log: CommitLog, offsets: list[int]) -> list[MessageExt]:
    """The records at ``offsets``, decoded."""
    out = []
    for off in offsets:
        view = log.read_record(off)
        assert view is not None
        out.append(decode_record(view))
        view.release()
    return out


def test_batch_gets_consecutive_offsets_and_merged_properties(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(message(queue_id=3))
    batch = StoreBatch(
        "TopicTest",
        3,
        [BatchItem(0, b"one", "TAGS\x01a\x02"), BatchItem(5, b"two", "KEYS\x01k")],
        properties="CLUSTER\x01c1\x02",
        store_host=("10.0.0.1", 10911),
    )
    result = log.append_batch(batch)
    assert result.status is PutStatus.PUT_OK
    assert (result.queue_offset, result.msg_count) == (1, 2)
    assert len(result.offsets) == 2
    assert result.msg_id.split(",") == [
        create_offset_msg_id(pack_host(("10.0.0.1", 10911)), off) for off in result.offsets
    ]
    msgs = read_all(log, result.offsets)
    assert [m.queue_offset for m in msgs] == [1, 2]
    assert [m.flag for m in msgs] == [0, 5]
    assert msgs[0].properties == {"TAGS": "a", "CLUSTER": "c1"}
    assert msgs[1].properties == {"KEYS": "k", "CLUSTER": "c1"}
    assert [e[6] for e in log.handoff][1:] == [1, 2]
    assert log.topic_queue_table[("TopicTest", 3)] == 3
    log.close()


def test_batch_moves_whole_to_the_next_file(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_size_bytes=3000)
    assert log.append(message(body=bytes(2900))).ok
    items = [BatchItem(0, bytes(400), "") for _ in range(3)]
    result = log.append_batch(StoreBatch("TopicTest", 0, items))
    assert result.status is PutStatus.PUT_OK
    assert result.offsets[0] == 4096
    assert all(4096 <= off < 8192 for off in result.offsets)
    log.close()


def test_batch_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    item = BatchItem(0, b"x", "")
    tx = log.append_batch(StoreBatch("T", 0, [item], sys_flag=TRANSACTION_PREPARED_TYPE))
    rollback = log.append_batch(StoreBatch("T", 0, [item], sys_flag=TRANSACTION_ROLLBACK_TYPE))
    delayed = log.append_batch(StoreBatch("T", 0, [item], properties="DELAY\x013\x02"))
    too_big = log.append_batch(StoreBatch("T", 0, [BatchItem(0, bytes(600), "")] * 2))
    empty = log.append_batch(StoreBatch("T", 0, []))
    for r in (tx, rollback, delayed, too_big, empty):
        assert r.status is PutStatus.MESSAGE_ILLEGAL
    assert log.max_offset == 0
    log.close()


def test_a_committed_batch_is_appended_and_counted(tmp_path: Path) -> None:
    # a batch half's commit: one batch append of committed messages
    log = open_log(tmp_path)
    items = [BatchItem(0, b"a", ""), BatchItem(0, b"b", "")]
    done = log.append_batch(StoreBatch("T", 0, items, sys_flag=TRANSACTION_COMMIT_TYPE))
    assert done.status is PutStatus.PUT_OK
    assert (done.queue_offset, done.msg_count) == (0, 2)
    assert log.topic_queue_table[("T", 0)] == 2
    records = read_all(log, done.offsets)
    assert [(r.body, r.queue_offset, r.sys_flag) for r in records] == [
        (b"a", 0, TRANSACTION_COMMIT_TYPE), (b"b", 1, TRANSACTION_COMMIT_TYPE),
    ]  # fmt: skip
    log.close()


def test_schedule_topic_tag_code_is_delivery_time(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    log.append(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=2, extra={"DELAY": "3"}, tags="t"))
    log.append(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=17, extra={"DELAY": "99"}))
    first, second = log.handoff
    assert first[4] == clock.now_ms() + 10_000  # level 3 = 10s
    assert second[4] == clock.now_ms() + 2 * 3_600_000  # clamped to level 18 = 2h
    log.close()


def test_page_cache_busy_when_a_writer_holds_the_lock_too_long(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    holding = threading.Event()
    release = threading.Event()

    def stuck_writer() -> None:
        with log.hold_lock():
            holding.set()
            release.wait(5)

    t = threading.Thread(target=stuck_writer)
    t.start()
    holding.wait(5)
    clock.advance(2)  # the lock has now been held for 2 s > 1 s
    result = log.append(message())
    release.set()
    t.join()
    assert result.status is PutStatus.OS_PAGECACHE_BUSY
    assert log.append(message()).status is PutStatus.PUT_OK
    log.close()


def test_roll_failure_reports_create_mapped_file_failed(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(message(body=bytes(1000)))
    # a directory where the next file must go makes its creation fail
    (tmp_path / "commitlog" / segment_name(4096)).mkdir()
    results = [log.append(message(body=bytes(1000))) for _ in range(4)]
    assert results[-1].status is PutStatus.CREATE_MAPPED_FILE_FAILED
    assert all(r.status is PutStatus.PUT_OK for r in results[:2])
    log.close()


def test_raw_append_must_continue_the_log(tmp_path: Path) -> None:
    src = open_log(tmp_path / "a")
    for i in range(6):
        src.append(message(body=bytes(700 + i)))
    data = bytes(src.queue.segments[0].view[:4096]) + bytes(
        src.queue.segments[1].view[: src.queue.segments[1].wrote]
    )
    dst = open_log(tmp_path / "b")
    assert not dst.append_data(10, data)
    assert len(data) > 4500
    assert dst.append_data(0, data[:4500])
    assert not dst.append_data(0, data[4500:])
    assert dst.append_data(4500, data[4500:])
    assert dst.max_offset == src.max_offset
    assert bytes(dst.queue.segments[1].view[:100]) == bytes(src.queue.segments[1].view[:100])
    assert not dst.handoff
    src.close()
    dst.close()


def test_properties_round_trip_through_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    msg = message(tags="标签", keys="a b", extra={"CLUSTER": "c"})
    r = log.append(msg)
    view = log.read_record(r.wrote_offset)
    assert view is not None
    props = decode_record(view).properties
    view.release()
    assert props == string_to_properties(msg.properties)
    assert props == {"TAGS": "标签", "KEYS": "a b", "CLUSTER": "c"}
    log.close()


def test_appended_bytes_equal_the_codec_encoding(tmp_path: Path) -> None:
    clock = FakeClock()
    log = open_log(tmp_path, clock)
    for hosts in [(("10.0.0.7", 1), ("10.0.0.1", 2)), (("::1", 1), ("10.0.0.1", 2))]:
        msg = message(queue_id=5, body=b"payload", tags="T", flag=9, born_timestamp=77,
                      born_host=hosts[0], store_host=hosts[1], reconsume_times=3)  # fmt: skip
        r = log.append(msg)
        view = log.read_record(r.wrote_offset)
        assert view is not None
        expected = encode_record(
            topic=msg.topic, body=b"payload", queue_id=5, flag=9, properties=msg.properties,
            queue_offset=r.queue_offset, physical_offset=r.wrote_offset, born_timestamp=77,
            born_host=hosts[0], store_timestamp=clock.now_ms(), store_host=hosts[1],
            reconsume_times=3,
        )  # fmt: skip
        assert bytes(view) == expected
        view.release()
    log.close()
