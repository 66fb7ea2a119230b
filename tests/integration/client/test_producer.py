"""The asyncio Producer against a real name server and broker on 127.0.0.1.

Everything sent is read back with BrokerApi.pull, so each check is about what
the broker stored: bodies byte for byte, properties, queues and offsets.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.client import Message, Producer, SendStatus, select_by_hash
from apogee.client.selectors import java_hash
from apogee.errors import ClientClosedError, ClientError, InvalidMessageError, NoRouteError
from apogee.model.client import MessageQueue
from apogee.model.message import COMPRESSED_FLAG
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.route import TopicRouteData
from apogee.model.topic import SCHEDULE_TOPIC
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.reading import read_queue
from tests.integration.client.helpers import read_topic

Cluster = tuple[str, Broker]
TEXT = b"compressible text, repeated. " * 400  # 11,600 bytes


async def test_send_stores_a_binary_body_with_tags_keys_and_properties(cluster: Cluster) -> None:
    namesrv, broker = cluster
    body = bytes(range(256)) * 4 + b"\x00\x00end\x00"
    async with Producer("pg", namesrv=namesrv) as producer:
        msg = Message("Orders", body, tags="created", keys=["o-1", "o-2"], properties={"ua": "v"})
        result = await producer.send(msg)
        stored = await read_topic(producer.instance.broker_api, broker.address, "Orders")

    assert result.status is SendStatus.SEND_OK
    assert result.msg_id == msg.uniq_key and len(result.msg_id) == 32
    assert result.message_queue.topic == "Orders" and result.message_queue.broker_name == "broker-a"
    [got] = stored
    assert got.body == body
    assert (got.tags, got.keys, got.properties["ua"]) == ("created", "o-1 o-2", "v")
    assert got.uniq_key == result.msg_id
    assert (got.queue_id, got.queue_offset) == (result.message_queue.queue_id, result.queue_offset)
    assert parse_offset_msg_id(result.offset_msg_id).offset == got.commit_log_offset


async def test_large_bodies_travel_compressed_and_come_back_whole(cluster: Cluster) -> None:
    namesrv, broker = cluster
    noise = os.urandom(8000)  # does not shrink: sent as it is
    async with Producer("pg", namesrv=namesrv) as producer:
        await producer.send(Message("Big", TEXT, tags="text"))
        await producer.send(Message("Big", noise, tags="noise"))
        await producer.send(Message("Big", TEXT[:4095], tags="small"))
        stored = {
            m.tags: m for m in await read_topic(producer.instance.broker_api, broker.address, "Big")
        }

    assert stored["text"].body == TEXT  # BrokerApi inflates
    assert stored["text"].store_size < 1000  # stored compressed: 11,600 bytes of body shrink
    assert stored["noise"].body == noise and stored["noise"].store_size > len(noise)
    assert stored["small"].store_size > 4095
    assert not any(m.sys_flag & COMPRESSED_FLAG for m in stored.values())


async def test_compression_can_be_switched_off(cluster: Cluster) -> None:
    namesrv, broker = cluster
    async with Producer("pg", namesrv=namesrv, compress_threshold=None) as producer:
        await producer.send(Message("Plain", TEXT))
        [got] = await read_topic(producer.instance.broker_api, broker.address, "Plain")
    assert got.body == TEXT and got.store_size > len(TEXT)


async def test_oneway_sends_arrive(cluster: Cluster) -> None:
    namesrv, broker = cluster
    async with Producer("pg", namesrv=namesrv) as producer:
        for i in range(8):
            await producer.send_oneway(Message("Quiet", b"oneway-%d" % i))
        api = producer.instance.broker_api

        async def all_there() -> list[bytes] | None:
            got = sorted(m.body for m in await read_topic(api, broker.address, "Quiet"))
            return got if len(got) == 8 else None

        assert await eventually(all_there) == sorted(b"oneway-%d" % i for i in range(8))


async def test_a_batch_is_stored_in_order_with_each_message_id(cluster: Cluster) -> None:
    namesrv, broker = cluster
    msgs = [Message("Batch", b"item\x00%d" % i, keys=f"k{i}") for i in range(20)]
    async with Producer("pg", namesrv=namesrv) as producer:
        [result] = await producer.send_batch(msgs)
        stored = await read_queue(
            producer.instance.broker_api, broker.address, "Batch", result.message_queue.queue_id
        )

    assert [m.body for m in stored] == [m.body for m in msgs]
    assert [m.keys for m in stored] == [f"k{i}" for i in range(20)]
    assert result.msg_id.split(",") == [m.uniq_key for m in stored] == [m.uniq_key for m in msgs]
    assert [m.queue_offset for m in stored] == list(range(20))
    assert len(result.offset_msg_id.split(",")) == 20


async def test_a_batch_over_4_mib_is_split_and_lands_whole(cluster: Cluster) -> None:
    namesrv, broker = cluster
    mib = 1024 * 1024
    msgs = [Message("Huge", bytes([i]) * mib) for i in range(5)]  # 5 MiB of bodies
    async with Producer("pg", namesrv=namesrv) as producer:
        results = await producer.send_batch(msgs)
        stored = await read_topic(producer.instance.broker_api, broker.address, "Huge")

    assert [len(r.msg_id.split(",")) for r in results] == [3, 2]  # 3 x 1 MiB fit in 4 MiB
    assert sorted(m.body[0] for m in stored) == [0, 1, 2, 3, 4]
    assert all(len(m.body) == mib for m in stored)


async def test_small_batch_limit_splits_into_many(cluster: Cluster) -> None:
    namesrv, broker = cluster
    msgs = [Message("Split", b"%03d" % i + b"." * 97) for i in range(30)]
    async with Producer("pg", namesrv=namesrv, max_message_size=1000) as producer:
        results = await producer.send_batch(msgs, queue=MessageQueue("Split", "broker-a", 1))
        stored = await read_queue(producer.instance.broker_api, broker.address, "Split", 1)
    assert len(results) > 3 and sum(len(r.msg_id.split(",")) for r in results) == 30
    assert [m.body for m in stored] == [m.body for m in msgs]  # one queue, in order


async def test_ordered_sends_keep_each_key_in_one_queue_in_order(cluster: Cluster) -> None:
    namesrv, broker = cluster
    keys = [f"order-{i}" for i in range(5)]
    async with Producer("pg", namesrv=namesrv) as producer:
        await producer.send(Message("Ordered", b"warm-up"))  # the topic gets its 4 queues
        await producer.instance.routes.refresh("Ordered")
        for step in range(6):
            for key in keys:
                msg = Message("Ordered", f"{key}/{step}".encode(), keys=key)
                result = await producer.send(msg, selector=select_by_hash, arg=key)
                assert result.message_queue.queue_id == abs(java_hash(key)) % 4
        stored = await read_topic(producer.instance.broker_api, broker.address, "Ordered")

    for key in keys:
        mine = [m for m in stored if m.keys == key]
        assert {m.queue_id for m in mine} == {abs(java_hash(key)) % 4}
        assert [m.body for m in mine] == [f"{key}/{s}".encode() for s in range(6)]


async def test_a_delayed_message_waits_in_the_schedule_topic(cluster: Cluster) -> None:
    namesrv, broker = cluster
    async with Producer("pg", namesrv=namesrv) as producer:
        result = await producer.send(Message("Later", b"in a second", delay_level=1))
        api = producer.instance.broker_api
        scheduled = await read_queue(api, broker.address, SCHEDULE_TOPIC, 0)  # level 1 -> queue 0
        assert [m.body for m in scheduled] == [b"in a second"]
        assert scheduled[0].properties["REAL_TOPIC"] == "Later"

        async def delivered() -> list[bytes] | None:
            got = [m.body for m in await read_topic(api, broker.address, "Later")]
            return got or None

        assert await eventually(delivered, timeout_s=10) == [b"in a second"]
    assert result.status is SendStatus.SEND_OK


async def test_a_new_topic_is_created_from_tbw102_with_the_default_queue_count(
    cluster: Cluster,
) -> None:
    namesrv, _ = cluster
    async with Producer("pg", namesrv=namesrv, default_topic_queue_nums=2) as producer:
        routes = producer.instance.routes
        assert routes.route("Fresh") is None
        results = [await producer.send(Message("Fresh", b"m%d" % i)) for i in range(6)]
        assert {r.message_queue.queue_id for r in results} == {0, 1}
        borrowed = routes.publish["Fresh"]
        assert borrowed.from_default

        async def registered() -> TopicRouteData | None:
            await routes.refresh("Fresh")  # the broker registers the topic it created
            return routes.route("Fresh")

        route = await eventually(registered)
        assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 2)]
        own = routes.publish["Fresh"]
        assert not own.from_default
        assert (await producer.send(Message("Fresh", b"after"))).status is SendStatus.SEND_OK


async def test_without_auto_creation_an_unknown_topic_has_no_route(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path / "ns") as ns:
        addr = f"127.0.0.1:{ns.port}"
        async with (
            run_broker(tmp_path / "store", addr, auto_create_topic_enable=False),
            Producer("pg", namesrv=addr) as producer,
        ):
            with pytest.raises(NoRouteError, match="Nowhere") as info:
                await producer.send(Message("Nowhere", b"x"))
    assert info.value.code == 17


async def test_bad_use_is_refused_with_clear_errors(cluster: Cluster) -> None:
    namesrv, _ = cluster
    producer = Producer("pg", namesrv=namesrv)
    with pytest.raises(ClientClosedError, match="not started"):
        await producer.send(Message("T", b"x"))
    async with producer:
        with pytest.raises(InvalidMessageError, match=r"^body: "):
            await producer.send(Message("T", b""))
        with pytest.raises(InvalidMessageError, match=r"^topic: "):
            await producer.send(Message("no spaces", b"x"))
        with pytest.raises(ClientError, match="not a queue of topic"):
            await producer.send(Message("T", b"x"), queue=MessageQueue("U", "broker-a", 0))
        with pytest.raises(ClientError, match="already started"):
            async with Producer("pg", namesrv=namesrv):
                pass
    with pytest.raises(ClientClosedError):
        await producer.send_batch([Message("T", b"x")])
