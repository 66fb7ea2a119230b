"""SEND_MESSAGE / V2 / batch against a real broker over 127.0.0.1, checked against its store."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.codes import RequestCode, ResponseCode
from apogee.model.message import Message
from apogee.model.message_codec import encode_batch
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.route import PERM_READ
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.store.config import FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.testing.cluster import run_broker
from tests.integration.broker.wire import send, send_request


def store_of(broker: Broker) -> FileMessageStore:
    return broker.store


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
async def test_a_send_is_stored_with_the_brokers_additions(
    broker: Broker, client: RemotingClient, code: int
) -> None:
    answer = await send(client, broker.address, "T1", b"payload", tags="TagA", keys="k1", code=code)

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ext = answer.ext_fields
    assert (ext["queueId"], ext["queueOffset"]) == ("0", "0")
    assert (ext["MSG_REGION"], ext["TRACE_ON"]) == ("DefaultRegion", "true")
    where = parse_offset_msg_id(ext["msgId"])
    assert f"{where.host}:{where.port}" == broker.address
    stored = store_of(broker).look_message(where.offset)
    assert stored is not None
    assert (stored.topic, stored.body, stored.tags, stored.keys) == ("T1", b"payload", "TagA", "k1")
    assert stored.properties["CLUSTER"] == "DefaultCluster"
    assert stored.store_host == ("127.0.0.1", broker.port)
    assert stored.born_host[0] == "127.0.0.1"


async def test_an_unknown_topic_is_created_from_tbw102_and_registered(
    broker: Broker, client: RemotingClient
) -> None:
    version = broker.topics.data_version.counter
    answer = await send(client, broker.address, "Fresh", queue_id=3)

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert broker.topics.select("Fresh") == TopicConfig("Fresh", 4, 4)
    assert broker.topics.data_version.counter == version + 1


async def test_a_topic_that_cannot_be_created_is_topic_not_exist(
    broker: Broker, client: RemotingClient
) -> None:
    answer = await send(client, broker.address, "Orphan", default_topic="NoSuchDefault")

    assert answer.code == ResponseCode.TOPIC_NOT_EXIST
    assert "Orphan" in (answer.remark or "")
    assert store_of(broker).commit_log_max_offset() == 0


async def test_without_auto_create_unknown_topics_do_not_exist(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(tmp_path / "s", auto_create_topic_enable=False) as b:
        answer = await send(client, b.address, "Fresh")
        assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        assert "Fresh" not in b.topics


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        ("bad topic", ResponseCode.SYSTEM_ERROR),
        ("x" * 128, ResponseCode.SYSTEM_ERROR),
        ("tópico", ResponseCode.SYSTEM_ERROR),
        ("SCHEDULE_TOPIC_XXXX", ResponseCode.NO_PERMISSION),
        ("SELF_TEST_TOPIC", ResponseCode.NO_PERMISSION),
    ],
)
async def test_topics_a_producer_may_not_use(
    broker: Broker, client: RemotingClient, topic: str, code: int
) -> None:
    await send(client, broker.address, "Good", b"kept")
    before = store_of(broker).commit_log_max_offset()

    answer = await send(client, broker.address, topic)

    assert answer.code == code, answer.remark
    assert store_of(broker).commit_log_max_offset() == before
    assert topic not in broker.topics or topic.startswith(("SCHEDULE", "SELF"))
    # the broker keeps serving
    assert (await send(client, broker.address, "Good", b"more")).code == ResponseCode.SUCCESS


async def test_a_queue_id_beyond_the_topics_queues_is_refused(
    broker: Broker, client: RemotingClient
) -> None:
    await send(client, broker.address, "T1")  # 4 queues
    answer = await send(client, broker.address, "T1", queue_id=4)
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "queueId[4]" in (answer.remark or "")
    assert store_of(broker).max_offset_in_queue("T1", 4) == 0


async def test_a_topic_without_write_permission_is_refused(
    broker: Broker, client: RemotingClient
) -> None:
    broker.topics.update(TopicConfig("ReadOnly", 4, 4, PERM_READ))
    answer = await send(client, broker.address, "ReadOnly")
    assert answer.code == ResponseCode.NO_PERMISSION


async def test_a_broker_without_write_permission_refuses_sends(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(tmp_path / "s", broker_permission=PERM_READ) as b:
        answer = await send(client, b.address, "T1")
        assert answer.code == ResponseCode.NO_PERMISSION


async def test_oversized_body_and_properties_are_message_illegal(
    broker: Broker, client: RemotingClient
) -> None:
    first = await send(client, broker.address, "T1", b"first")
    huge_body = await send(client, broker.address, "T1", b"x" * (4 * 1024 * 1024 + 1))
    huge_props = await send(client, broker.address, "T1", extra={"big": "p" * 33_000})
    last = await send(client, broker.address, "T1", b"last")

    assert (huge_body.code, huge_props.code) == (ResponseCode.MESSAGE_ILLEGAL,) * 2
    assert (first.code, last.code) == (ResponseCode.SUCCESS,) * 2
    store = store_of(broker)
    bodies = [
        store.look_message(parse_offset_msg_id(a.ext_fields["msgId"]).offset) for a in (first, last)
    ]
    assert [m.body for m in bodies if m] == [b"first", b"last"]
    assert last.ext_fields["queueOffset"] == "1"


@pytest.mark.parametrize(
    ("drop", "set_to", "field"),
    [
        ("topic", None, "topic"),
        (None, ("queueId", "one"), "queueId"),
        ("bornTimestamp", None, "bornTimestamp"),
    ],
)
async def test_malformed_headers_are_named(
    broker: Broker,
    client: RemotingClient,
    drop: str | None,
    set_to: tuple[str, str] | None,
    field: str,
) -> None:
    request = send_request("T1")
    if drop:
        del request.ext_fields[drop]
    if set_to:
        request.ext_fields[set_to[0]] = set_to[1]

    answer = await client.invoke(broker.address, request)

    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert field in (answer.remark or "")
    assert store_of(broker).commit_log_max_offset() == 0


async def test_a_batch_is_stored_with_consecutive_offsets(
    broker: Broker, client: RemotingClient
) -> None:
    messages = [
        Message("T1", f"m{i}".encode(), properties={"TAGS": f"t{i}", "UNIQ_KEY": f"U{i}"})
        for i in range(3)
    ]
    answer = await send(client, broker.address, "T1", encode_batch(messages), batch=True,
                        properties="WAIT\x01true\x02")  # fmt: skip

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ids = answer.ext_fields["msgId"].split(",")
    assert len(ids) == 3
    stored = [store_of(broker).look_message(parse_offset_msg_id(i).offset) for i in ids]
    assert [(m.body, m.tags, m.queue_offset) for m in stored if m] == [
        (b"m0", "t0", 0),
        (b"m1", "t1", 1),
        (b"m2", "t2", 2),
    ]
    assert all(m and m.properties["CLUSTER"] == "DefaultCluster" and m.uniq_key for m in stored)


async def test_a_compressed_batch_is_inflated_before_it_is_split(
    broker: Broker, client: RemotingClient
) -> None:
    messages = [Message("T1", bytes([65 + i]) * 3000) for i in range(2)]
    body = zlib.compress(encode_batch(messages), 5)

    answer = await send(client, broker.address, "T1", body, batch=True, sys_flag=1,
                        code=RequestCode.SEND_BATCH_MESSAGE)  # fmt: skip

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    ids = answer.ext_fields["msgId"].split(",")
    stored = [store_of(broker).look_message(parse_offset_msg_id(i).offset) for i in ids]
    assert [(m.body[:1], len(m.body), m.sys_flag & 1) for m in stored if m] == [
        (b"A", 3000, 0),
        (b"B", 3000, 0),
    ]


async def test_a_batch_body_that_is_not_a_batch_is_illegal(
    broker: Broker, client: RemotingClient
) -> None:
    bad = await send(client, broker.address, "T1", b"\x00\x00\x00\x30garbage", batch=True)
    bomb = await send(client, broker.address, "T1", zlib.compress(b"\x00" * (5 << 20)), batch=True,
                      sys_flag=1)  # fmt: skip
    assert (bad.code, bomb.code) == (ResponseCode.MESSAGE_ILLEGAL,) * 2
    assert store_of(broker).commit_log_max_offset() == 0


async def test_a_delayed_message_waits_in_the_schedule_topic(
    broker: Broker, client: RemotingClient
) -> None:
    answer = await send(client, broker.address, "T1", queue_id=2, extra={"DELAY": "3"})

    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert answer.ext_fields["queueId"] == "2"
    stored = store_of(broker).look_message(parse_offset_msg_id(answer.ext_fields["msgId"]).offset)
    assert stored is not None
    assert (stored.topic, stored.queue_id) == ("SCHEDULE_TOPIC_XXXX", 2)
    assert (stored.properties["REAL_TOPIC"], stored.properties["REAL_QID"]) == ("T1", "2")
    assert store_of(broker).max_offset_in_queue("T1", 2) == 0


async def test_a_delay_beyond_the_last_level_is_clamped(
    broker: Broker, client: RemotingClient
) -> None:
    answer = await send(client, broker.address, "T1", extra={"DELAY": "99"})
    stored = store_of(broker).look_message(parse_offset_msg_id(answer.ext_fields["msgId"]).offset)
    assert stored is not None
    assert (stored.queue_id, stored.properties["DELAY"]) == (17, "18")


async def test_sync_flush_answers_once_the_message_is_on_disk(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(tmp_path / "s", store={"flush_disk_type": FlushDiskType.SYNC_FLUSH}) as b:
        store = store_of(b)
        answers = [await send(client, b.address, "T1", b"x" * 100) for _ in range(3)]
        flushed_at_answer = store.commit_log.queue.flushed_offset
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 3
        assert flushed_at_answer >= store.commit_log_max_offset()
