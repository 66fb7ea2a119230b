"""BrokerApi against a real broker: send, pull, offsets, lookups, client management."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.errors import BrokerSystemError, ProtocolError, TopicNotExistError
from apogee.model.client import ConsumerData, ConsumeType, HeartbeatData
from apogee.model.message import COMPRESSED_FLAG, Message
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.received import ReceivedMessage
from apogee.model.results import PullStatus, SendStatus
from apogee.model.subscription import SubscriptionData
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker

GROUP = "api-group"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with run_broker(tmp_path / "store") as b:
        yield b


@pytest.fixture
async def api() -> AsyncIterator[BrokerApi]:
    async with RemotingClient() as client:
        yield BrokerApi(client)


def _msg(body: bytes, *, tags: str | None = None, keys: str | None = None) -> Message:
    props = {k: v for k, v in (("TAGS", tags), ("KEYS", keys)) if v is not None}
    return Message("T1", body, properties=props)


async def test_send_pull_and_play_a_consumer(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    msgs = [_msg(b"a", tags="TagA"), _msg(b"b", tags="TagB"), _msg(b"c", tags="TagA")]
    results = [await api.send(addr, "broker-a", m, queue_id=0, producer_group="pg") for m in msgs]
    assert [r.status for r in results] == [SendStatus.SEND_OK] * 3
    assert [r.queue_offset for r in results] == [0, 1, 2]
    assert results[0].message_queue.broker_name == "broker-a"
    assert results[0].msg_id == msgs[0].properties["UNIQ_KEY"]  # set on the caller's message
    assert parse_offset_msg_id(results[1].offset_msg_id).offset > 0

    found = await api.pull(addr, GROUP, "T1", 0, 0, max_nums=10)
    assert found.status is PullStatus.FOUND
    assert [m.body for m in found.messages] == [b"a", b"b", b"c"]
    assert (found.next_begin_offset, found.min_offset, found.max_offset) == (3, 0, 3)
    assert found.messages[0].client_msg_id == results[0].msg_id
    tagged = await api.pull(addr, GROUP, "T1", 0, 0, max_nums=10, expression="TagA")
    assert [m.body for m in tagged.messages] == [b"a", b"c"]
    caught_up = await api.pull(addr, GROUP, "T1", 0, 3)
    assert caught_up.status is PullStatus.NO_NEW_MSG
    moved = await api.pull(addr, GROUP, "T1", 0, 99)
    assert moved.status is PullStatus.OFFSET_ILLEGAL
    assert moved.next_begin_offset == 3

    # the consumer commits, alone and piggy-backed on a pull
    # a new group on a young queue starts at 0: the broker answers SUCCESS, not QUERY_NOT_FOUND
    assert await api.query_consumer_offset(addr, "fresh-group", "T1", 1) == 0
    await api.update_consumer_offset(addr, GROUP, "T1", 0, 2)
    assert await api.query_consumer_offset(addr, GROUP, "T1", 0) == 2
    await api.pull(addr, GROUP, "T1", 0, 2, commit_offset=3)
    assert await api.query_consumer_offset(addr, GROUP, "T1", 0) == 3

    assert await api.get_min_offset(addr, "T1", 0) == 0
    assert await api.get_max_offset(addr, "T1", 0) == 3
    first_store = await api.get_earliest_msg_store_time(addr, "T1", 0)
    assert first_store == found.messages[0].store_timestamp
    assert await api.search_offset(addr, "T1", 0, found.messages[2].store_timestamp + 1) in (2, 3)


async def test_long_poll_wakes_on_arrival(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    await api.send(addr, "broker-a", _msg(b"first"), queue_id=0, producer_group="pg")
    waiting = asyncio.create_task(api.pull(addr, GROUP, "T1", 0, 1, suspend_timeout_ms=20_000))
    await asyncio.sleep(0.2)
    await api.send(addr, "broker-a", _msg(b"second"), queue_id=0, producer_group="pg")
    result = await waiting
    assert [m.body for m in result.messages] == [b"second"]


async def test_batch_view_and_query(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    batch = [_msg(b"x", keys="k1 shared"), _msg(b"y", keys="k2 shared")]
    result = await api.send_batch(addr, "broker-a", batch, queue_id=1, producer_group="pg")
    assert result.queue_offset == 0
    offset_ids = result.offset_msg_id.split(",")
    assert result.msg_id.split(",") == [m.properties["UNIQ_KEY"] for m in batch]
    second = await api.view_message(addr, parse_offset_msg_id(offset_ids[1]).offset)
    assert (second.body, second.queue_offset, second.msg_id) == (b"y", 1, offset_ids[1])
    with pytest.raises(BrokerSystemError):
        await api.view_message(addr, 10**12)

    async def query(key: str, **kw: bool) -> list[bytes]:
        for _ in range(200):  # the index is written by the dispatch step, just after the send
            found = await api.query_message(addr, "T1", key, **kw)
            if found:
                return sorted(m.body for m in found)
            await asyncio.sleep(0.02)
        return []

    assert await query("shared") == [b"x", b"y"]
    assert await query("k2") == [b"y"]
    assert await query(batch[0].properties["UNIQ_KEY"], unique_key=True) == [b"x"]
    assert await api.query_message(addr, "T1", "no-such-key") == []


async def test_client_management_and_errors(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    consumer = ConsumerData(
        GROUP, ConsumeType.CONSUME_ACTIVELY, subscriptions=(SubscriptionData.build("T1", "*"),)
    )
    await api.heartbeat(addr, HeartbeatData("cid-1", consumers=(consumer,)))
    assert await api.get_consumer_ids(addr, GROUP) == ["cid-1"]
    await api.unregister_client(addr, "cid-1", consumer_group=GROUP)
    with pytest.raises(BrokerSystemError, match="no consumer"):
        await api.get_consumer_ids(addr, GROUP)
    with pytest.raises(TopicNotExistError) as missing:
        await api.send(
            addr,
            "broker-a",
            Message("NoSuchTopic", b"x"),
            queue_id=0,
            producer_group="pg",
            default_topic="NoSuchDefault",
        )
    assert missing.value.code == 17


async def test_a_lazy_pull_gives_what_the_full_decode_gives(broker: Broker, api: BrokerApi) -> None:
    addr = broker.address
    big = bytes(range(256)) * 40  # NUL bytes included
    await api.send(addr, "broker-a", _msg(b"\x00one", tags="TagA"), queue_id=0, producer_group="pg")
    await api.send(
        addr,
        "broker-a",
        _msg(zlib.compress(big), tags="TagB", keys="k1 k2"),
        queue_id=0,
        producer_group="pg",
        sys_flag=COMPRESSED_FLAG,
    )
    await api.send(addr, "broker-a", _msg(b"three", tags="TagA"), queue_id=0, producer_group="pg")

    full = await api.pull(addr, GROUP, "T1", 0, 0, max_nums=10)
    lazy = await api.pull(addr, GROUP, "T1", 0, 0, max_nums=10, lazy=True)
    assert [type(m) for m in lazy.messages] == [ReceivedMessage] * 3
    assert [m.to_message_ext() for m in lazy.messages] == full.messages
    assert [m.body for m in lazy.messages] == [b"\x00one", big, b"three"]
    assert lazy.messages[1].keys == "k1 k2"
    assert (lazy.next_begin_offset, lazy.min_offset, lazy.max_offset) == (3, 0, 3)

    tagged = await api.pull(addr, GROUP, "T1", 0, 0, expression="TagA", lazy=True)
    assert [m.queue_offset for m in tagged.messages] == [0, 2]
    assert (await api.pull(addr, GROUP, "T1", 0, 3, lazy=True)).messages == []


async def test_a_compressed_body_that_does_not_inflate_hides_nothing_around_it(
    broker: Broker, api: BrokerApi
) -> None:
    addr = broker.address
    await api.send(addr, "broker-a", _msg(b"before"), queue_id=0, producer_group="pg")
    garbage = b"\x78\x9c this is not a zlib stream"
    await api.send(
        addr, "broker-a", _msg(garbage), queue_id=0, producer_group="pg", sys_flag=COMPRESSED_FLAG
    )
    await api.send(addr, "broker-a", _msg(b"after"), queue_id=0, producer_group="pg")

    full = await api.pull(addr, GROUP, "T1", 0, 0, max_nums=10)
    assert [m.body for m in full.messages] == [b"before", garbage, b"after"]
    assert full.messages[1].sys_flag & COMPRESSED_FLAG  # handed over as stored
    lazy = await api.pull(addr, GROUP, "T1", 0, 0, max_nums=10, lazy=True)
    assert lazy.messages[0].body == b"before" and lazy.messages[2].body == b"after"
    with pytest.raises(ProtocolError):
        _ = lazy.messages[1].body  # the bad one says so when its body is read
