from __future__ import annotations

import dataclasses
import shutil
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from apogee._util.clock import FakeClock
from apogee.model.javahash import java_string_hash
from apogee.model.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchItem,
    StoreBatch,
    string_to_properties,
)
from apogee.store import dispatch
from apogee.store.config import StoreConfig
from apogee.store.dispatch import DispatchRequest, index_fields
from apogee.store.file_store import FileMessageStore
from apogee.testing.store import (
    RecordingDispatcher,
    expected_queues,
    message,
    queue_units,
    small_config,
)


def fill_store(store: FileMessageStore, clock: FakeClock) -> None:
    """A mix of every kind of record the dispatcher treats differently."""
    for i in range(12):
        store.put(message(queue_id=i % 3, body=bytes([i]) * (50 + i), tags=f"T{i % 2}",
                          keys=f"k{i} shared", uniq=f"U{i}"))  # fmt: skip
        clock.advance(0.001)
    store.put(message(sys_flag=TRANSACTION_PREPARED_TYPE, uniq="half"))
    store.put(message(sys_flag=TRANSACTION_COMMIT_TYPE, tags="tx"))
    store.put(message(sys_flag=TRANSACTION_ROLLBACK_TYPE))
    store.put(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=1, extra={"DELAY": "2"}, tags="d"))
    store.put(message(born_host=("::1", 7), store_host=("::1", 10911), tags="v6"))
    store.put(message(body=b"", tags=None, keys=None, uniq=None))
    items = [BatchItem(0, b"b%d" % i, f"TAGS\x01bt\x02UNIQ_KEY\x01B{i}\x02") for i in range(5)]
    store.put_batch(StoreBatch("Batched", 0, items, properties="CLUSTER\x01c\x02"))
    for i in range(20):  # enough to roll several 4 KiB files
        store.put(message(topic="Bulk", queue_id=i % 2, body=bytes(300)))


def open_store(config: StoreConfig, clock: FakeClock, rec: RecordingDispatcher) -> FileMessageStore:
    return FileMessageStore.open(config, clock=clock, dispatchers=[rec])


def test_append_path_and_log_parsing_path_dispatch_identically(tmp_path: Path) -> None:
    clock = FakeClock()
    cfg_a = small_config(tmp_path / "a")
    rec_a = RecordingDispatcher()
    a = open_store(cfg_a, clock, rec_a)
    fill_store(a, clock)
    assert a.dispatch_step(10_000) == len(rec_a.requests) > 40

    # b receives a's bytes raw, as a slave would, and must parse them
    rec_b = RecordingDispatcher()
    b = open_store(small_config(tmp_path / "b"), clock, rec_b)
    for seg in a.commit_log.queue.segments:
        assert b.append_data(seg.start, seg.view[: seg.wrote])
    assert not b.commit_log.handoff
    while b.dispatch_step(7):
        pass
    assert rec_b.requests == rec_a.requests
    units_a = queue_units(a.queues)
    assert queue_units(b.queues) == units_a
    a.close()
    b.close()

    # c rebuilds from the log at open (no consume queues on disk at all)
    shutil.copytree(tmp_path / "a", tmp_path / "c")
    shutil.rmtree(tmp_path / "c" / "consumequeue")
    rec_c = RecordingDispatcher()
    c = open_store(small_config(tmp_path / "c"), clock, rec_c)
    assert rec_c.requests == rec_a.requests
    assert queue_units(c.queues) == units_a == expected_queues(cfg_a)
    c.close()


def test_only_not_and_commit_records_enter_consume_queues(tmp_path: Path) -> None:
    clock = FakeClock()
    rec = RecordingDispatcher()
    store = open_store(small_config(tmp_path), clock, rec)
    store.put(message(sys_flag=TRANSACTION_PREPARED_TYPE))
    store.put(message(sys_flag=TRANSACTION_ROLLBACK_TYPE))
    store.put(message(sys_flag=TRANSACTION_COMMIT_TYPE))
    store.put(message())
    store.dispatch_step()
    assert len(rec.requests) == 4  # extra dispatchers see every record
    assert store.max_offset_in_queue("TopicTest", 0) == 2
    assert [r.consume_queue_offset for r in rec.requests] == [0, 0, 0, 1]
    store.close()


def test_arrival_listener_hears_each_queued_message(tmp_path: Path) -> None:
    clock = FakeClock()
    heard: list[tuple[str, int, int, int, int]] = []
    store = FileMessageStore.open(
        small_config(tmp_path), clock=clock, arrival=lambda *a: heard.append(a)
    )
    store.put(message(queue_id=2, tags="TagA"))
    store.put(message(sys_flag=TRANSACTION_PREPARED_TYPE))
    store.put(message(queue_id=2))
    assert heard == []  # nothing before dispatch
    store.dispatch_step()
    now = clock.now_ms()
    assert heard == [
        ("TopicTest", 2, 0, 84 * 31**3 + 97 * 31**2 + 103 * 31 + 65, now),
        ("TopicTest", 2, 1, 0, now),
    ]
    store.close()


def test_dispatch_step_honours_its_budget_and_reports_lag(tmp_path: Path) -> None:
    store = FileMessageStore.open(small_config(tmp_path), clock=FakeClock())
    results = [store.put(message()) for _ in range(5)]
    assert store.dispatch_behind_bytes() == results[-1].end_offset
    assert store.dispatch_step(2) == 2
    assert store.dispatch_behind_bytes() == results[-1].end_offset - results[2].wrote_offset
    assert store.max_offset_in_queue("TopicTest", 0) == 2
    assert store.dispatch_step(100) == 3
    assert store.dispatch_behind_bytes() == 0
    assert store.dispatch_step(100) == 0
    store.close()


def test_a_dispatch_thread_woken_by_puts_feeds_the_queues(tmp_path: Path) -> None:
    heard: list[int] = []
    store = FileMessageStore.open(small_config(tmp_path))
    store.set_arrival_listener(lambda topic, qid, offset, code, ts: heard.append(offset))
    store.start(dispatch_thread=True)
    for _ in range(20):
        store.put(message())
    for _ in range(500):
        if store.max_offset_in_queue("TopicTest", 0) == 20:
            break
        threading.Event().wait(0.01)
    assert store.max_offset_in_queue("TopicTest", 0) == 20
    assert heard == list(range(20))
    store.close()


def test_each_entry_position_is_named_for_its_request_field_in_order() -> None:
    fields = [f.name for f in dataclasses.fields(DispatchRequest)]
    named = {name: getattr(dispatch, name) for name in dir(dispatch) if name.startswith("E_")}
    assert sorted(named.values()) == list(range(len(fields)))
    by_position = {position: name for name, position in named.items()}
    spelled = {"E_PREPARED_OFFSET": "prepared_transaction_offset"}
    for position, field in enumerate(fields):
        name = by_position[position]
        assert spelled.get(name, name.removeprefix("E_").lower()) == field


_PIECES = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XKEYS", "3", "a b", "\x01", "\x02"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_index_fields_agree_with_the_full_property_parse(text: str) -> None:
    props = string_to_properties(text)
    tags = props.get("TAGS")
    expected = (java_string_hash(tags) if tags else 0, props.get("KEYS"), props.get("UNIQ_KEY"))
    assert index_fields("T", text, 0, ()) == expected


def test_queue_unit_gives_the_delivery_time_of_a_delayed_record(tmp_path: Path) -> None:
    clock = FakeClock()
    with FileMessageStore.open(small_config(tmp_path), clock=clock) as store:
        put = store.put(message(topic="SCHEDULE_TOPIC_XXXX", queue_id=1, extra={"DELAY": "2"}))
        store.put(message(topic="T", tags="a"))
        store.dispatch_step()
        assert store.queue_unit("SCHEDULE_TOPIC_XXXX", 1, 0) == (
            put.wrote_offset,
            put.wrote_bytes,
            clock.now_ms() + store.config.delay_levels_ms[1],
        )
        plain = store.queue_unit("T", 0, 0)
        assert plain is not None
        assert (plain[0], plain[2]) == (put.end_offset, java_string_hash("a"))
        missing = [("SCHEDULE_TOPIC_XXXX", 1, 1), ("SCHEDULE_TOPIC_XXXX", 1, -1), ("T", 3, 0)]
        for topic, queue_id, offset in [*missing, ("Nope", 0, 0)]:
            assert store.queue_unit(topic, queue_id, offset) is None
