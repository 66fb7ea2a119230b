"""ScheduleMessageService rounds on a real store with a FakeClock, and the delay offset file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee._util.clock import FakeClock
from apogee.broker.schedule import schedule_placement
from apogee.broker.schedule_service import (
    DelayOffsetTable,
    ScheduleMessageService,
    ScheduleSettings,
)
from apogee.errors import ProtocolError
from apogee.model.message import properties_to_string
from apogee.model.topic import SCHEDULE_TOPIC
from apogee.store.file_store import FileMessageStore
from apogee.testing.store import message, small_config

LEVELS = "1s 5s 10s"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[FileMessageStore]:
    config = small_config(tmp_path, message_delay_level=LEVELS, max_message_size_bytes=4096)
    with FileMessageStore.open(config, clock=clock) as s:
        yield s


def service(
    store: FileMessageStore, clock: FakeClock, offsets: DelayOffsetTable | None = None
) -> tuple[ScheduleMessageService, list[int]]:
    kicks: list[int] = []
    svc = ScheduleMessageService(
        store,
        offsets or DelayOffsetTable(3),
        ScheduleSettings(store.config.delay_levels_ms, batch=4),
        clock,
        on_stored=lambda: kicks.append(1),
    )
    return svc, kicks


def put_delayed(store: FileMessageStore, body: bytes, level: int, **props: str) -> None:
    text = properties_to_string({"DELAY": str(level), "TAGS": "tg", **props})
    placed = schedule_placement("Real", 2, text, 3)
    assert placed is not None
    store.put(message(placed.topic, placed.queue_id, body, extra=dict(_pairs(placed.properties))))
    store.dispatch_step()


def _pairs(text: str) -> list[tuple[str, str]]:
    return [tuple(p.split("\x01", 1)) for p in text.split("\x02") if p]  # type: ignore[misc]


def real(store: FileMessageStore) -> list[bytes]:
    store.dispatch_step()
    out = []
    for offset in range(store.max_offset_in_queue("Real", 2)):
        unit = store.queue_unit("Real", 2, offset)
        assert unit is not None
        msg = store.look_message(unit[0])
        assert msg is not None
        out.append(msg.body)
    return out


def test_nothing_is_delivered_before_its_time_and_everything_at_it(
    store: FileMessageStore, clock: FakeClock
) -> None:
    svc, kicks = service(store, clock)
    put_delayed(store, b"a", 2)
    clock.advance(1)
    put_delayed(store, b"b", 2)

    assert svc.deliver_level(2) == 0.1  # polled again soon
    clock.advance(3.999)
    svc.deliver_level(2)
    assert real(store) == []
    clock.advance(0.001)  # a is due now, b in 1 s
    assert svc.deliver_level(2) == 0.1
    assert real(store) == [b"a"]
    clock.advance(1)
    svc.deliver_level(2)
    assert real(store) == [b"a", b"b"]
    assert (svc.delivered, len(kicks)) == (2, 2)
    assert svc.deliver_level(1) == svc.deliver_level(3) == 0.1  # other levels are empty


def test_a_backlog_is_delivered_in_batches_in_order(
    store: FileMessageStore, clock: FakeClock
) -> None:
    offsets = DelayOffsetTable(3)
    svc, _ = service(store, clock, offsets)
    for i in range(10):
        put_delayed(store, b"%d" % i, 1)
    clock.advance(1)
    assert svc.deliver_level(1) == 0.0  # batch of 4 full: more to do at once
    assert offsets.get(1) == 4 and offsets.dirty
    while svc.deliver_level(1) == 0.0:
        pass
    assert real(store) == [b"%d" % i for i in range(10)]
    assert offsets.get(1) == 10


def test_a_delivery_time_beyond_one_full_delay_counts_as_now(
    store: FileMessageStore, clock: FakeClock
) -> None:
    svc, _ = service(store, clock)
    put_delayed(store, b"from the future", 1)
    clock.advance(-3600)  # the wall clock went back an hour
    svc.deliver_level(1)
    assert real(store) == [b"from the future"]


def test_the_delivered_record_keeps_its_properties_but_delay(
    store: FileMessageStore, clock: FakeClock
) -> None:
    svc, _ = service(store, clock)
    put_delayed(store, b"x", 1, ua="v", KEYS="k1")
    clock.advance(1)
    svc.deliver_level(1)
    store.dispatch_step()
    unit = store.queue_unit("Real", 2, 0)
    assert unit is not None
    msg = store.look_message(unit[0])
    assert msg is not None
    assert msg.properties == {
        "TAGS": "tg", "ua": "v", "KEYS": "k1", "REAL_TOPIC": "Real", "REAL_QID": "2",
        "WAIT": "false",
    }  # fmt: skip
    assert msg.born_host == ("10.0.0.7", 50001)
    assert unit[2] != 0  # the tag code is the tag's hash again, not a delivery time


def test_unusable_records_are_skipped_and_a_refusing_store_holds_the_level(
    store: FileMessageStore, clock: FakeClock
) -> None:
    offsets = DelayOffsetTable(3)
    svc, _ = service(store, clock, offsets)
    store.put(message(SCHEDULE_TOPIC, 0, b"no destination", extra={"DELAY": "1"}))
    store.put(message(SCHEDULE_TOPIC, 0, b"to the half topic", extra={
        "DELAY": "1", "REAL_TOPIC": "RMQ_SYS_TRANS_HALF_TOPIC", "REAL_QID": "0"}))  # fmt: skip
    put_delayed(store, b"fine", 1)
    clock.advance(1)
    svc.deliver_level(1)
    assert svc.skipped == 2
    assert real(store) == [b"fine"]
    assert offsets.get(1) == 3

    # a destination the store refuses (topic over 127 bytes) holds the level back
    store.put(message(SCHEDULE_TOPIC, 0, b"refused", extra={
        "DELAY": "1", "REAL_TOPIC": "R" * 200, "REAL_QID": "0"}))  # fmt: skip
    put_delayed(store, b"behind it", 1)
    clock.advance(1)
    assert svc.deliver_level(1) == 10.0
    assert offsets.get(1) == 3
    assert real(store) == [b"fine"]


def test_offsets_are_brought_into_the_queue_on_start(
    store: FileMessageStore, clock: FakeClock
) -> None:
    for i in range(3):
        put_delayed(store, b"%d" % i, 1)
    offsets = DelayOffsetTable(3)
    offsets.set(1, 99)
    offsets.set(2, 5)  # level 2 has no queue yet: left alone
    svc, _ = service(store, clock, offsets)
    svc.correct_offsets()
    assert (offsets.get(1), offsets.get(2)) == (3, 5)


def test_the_offset_file_round_trips_and_accepts_rocketmq_s_bare_keys() -> None:
    table = DelayOffsetTable(3)
    table.set(2, 15)
    assert table.encode() == b'{"offsetTable":{"1":0,"2":15,"3":0}}'
    assert not table.dirty
    other = DelayOffsetTable(3)
    other.load(b'{"offsetTable":{1:4,2:15}}')
    assert other.table == {1: 4, 2: 15, 3: 0}
    other.load(None)
    assert other.get(1) == 4


@pytest.mark.parametrize(
    "text",
    [b"[]", b'{"offsetTable":[]}', b'{"offsetTable":{"x":1}}', b'{"offsetTable":{"1":-1}}',
     b'{"offsetTable":{"1":true}}', b"{not json"],
)  # fmt: skip
def test_a_bad_offset_file_is_a_protocol_error(text: bytes) -> None:
    with pytest.raises(ProtocolError):
        DelayOffsetTable(3).load(text)
