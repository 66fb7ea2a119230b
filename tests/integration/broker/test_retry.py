"""CONSUMER_SEND_MSG_BACK and the client's retry sends, against a real broker over 127.0.0.1.

The broker runs with one-second delay levels, so a retry comes back about a second after
it was handed back; checks that depend on time compare the records' own store times.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import BrokerResponseError, TopicNotExistError
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import Message, MessageExt
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.results import PullStatus
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import ConsumerSendMsgBackRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker
from apogee.testing.namesrv import get_route, running_namesrv

LEVELS = " ".join(["1s"] * 18)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with run_broker(tmp_path / "store", store={"message_delay_level": LEVELS}) as b:
        yield b


@pytest.fixture
def api(client: RemotingClient) -> BrokerApi:
    return BrokerApi(client, timeout_s=5)


async def produce(api: BrokerApi, broker: Broker, topic: str = "T1", **props: str) -> MessageExt:
    msg = Message(topic, b"payload", properties={"TAGS": "TagA", **props})
    sent = await api.send(broker.address, "broker-a", msg, queue_id=0, producer_group="pg")
    return await api.view_message(broker.address, parse_offset_msg_id(sent.offset_msg_id).offset)


async def read_all(api: BrokerApi, broker: Broker, topic: str) -> list[MessageExt]:
    """Queue 0 of ``topic`` from the start; nothing when the topic does not exist."""
    try:
        result = await api.pull(broker.address, "TOOLS_CONSUMER", topic, 0, 0)
    except TopicNotExistError:
        return []
    return result.messages if result.status is PullStatus.FOUND else []


async def arrive(api: BrokerApi, broker: Broker, topic: str, count: int) -> list[MessageExt]:
    async def check() -> list[MessageExt] | None:
        got = await read_all(api, broker, topic)
        return got if len(got) >= count else None

    return await eventually(check, timeout_s=10)


async def test_a_message_sent_back_returns_in_the_retry_topic_after_its_delay(
    broker: Broker, api: BrokerApi
) -> None:
    original = await produce(api, broker, ua="v1")

    await api.send_back(broker.address, original, "cg")

    # held in SCHEDULE_TOPIC_XXXX at level 3 (= 3 + reconsume times 0) until due
    assert broker.topics.select("%RETRY%cg") is not None
    store = broker.store
    assert store is not None
    assert await eventually(
        lambda: asyncio.sleep(0, store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1)
    )
    (retried,) = await arrive(api, broker, "%RETRY%cg", 1)
    assert retried.body == original.body
    assert retried.reconsume_times == 1
    props = retried.properties
    assert props["RETRY_TOPIC"] == "T1"
    assert props["ORIGIN_MESSAGE_ID"] == original.msg_id
    assert (props["REAL_TOPIC"], props["REAL_QID"]) == ("%RETRY%cg", "0")
    assert (props["TAGS"], props["ua"], props["WAIT"]) == ("TagA", "v1", "false")
    assert "DELAY" not in props
    assert (retried.born_timestamp, retried.born_host) == (
        original.born_timestamp,
        original.born_host,
    )
    assert (retried.flag, retried.sys_flag) == (original.flag, original.sys_flag)
    assert retried.store_timestamp >= original.store_timestamp + 1000


async def test_the_retry_budget_ends_in_the_dead_letter_queue(
    tmp_path: Path, client: RemotingClient, api: BrokerApi
) -> None:
    async with (
        running_namesrv(tmp_path) as (_, ns),
        run_broker(tmp_path / "store", ns, store={"message_delay_level": LEVELS}) as broker,
    ):
        await api.update_subscription_group(
            broker.address, SubscriptionGroupConfig("cg", retry_max_times=2)
        )
        current = await produce(api, broker)
        first_id = current.msg_id
        for attempt in range(1, 3):
            await api.send_back(broker.address, current, "cg")
            current = (await arrive(api, broker, "%RETRY%cg", attempt))[-1]
            assert current.reconsume_times == attempt
            assert current.properties["ORIGIN_MESSAGE_ID"] == first_id

        await api.send_back(broker.address, current, "cg")  # reconsume times 2 = budget

        (dead,) = await read_all(api, broker, "%DLQ%cg")  # not delayed
        assert dead.reconsume_times == 3
        assert dead.properties["ORIGIN_MESSAGE_ID"] == first_id
        assert dead.properties["RETRY_TOPIC"] == "T1"
        assert "DELAY" not in dead.properties
        dlq = broker.topics.select("%DLQ%cg")
        assert dlq is not None and (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (
            1,
            1,
            6,
        )
        route = await eventually(lambda: get_route(client, ns, "%DLQ%cg"))
        assert route.queue_datas[0].perm == 6


async def test_a_negative_delay_level_is_dead_at_once(broker: Broker, api: BrokerApi) -> None:
    original = await produce(api, broker)
    await api.send_back(broker.address, original, "cg", delay_level=-1)
    (dead,) = await read_all(api, broker, "%DLQ%cg")
    assert dead.reconsume_times == 1
    assert await read_all(api, broker, "%RETRY%cg") == []


def raw_send_back(offset: int, version: int, max_times: int | None) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset, "cg", 0, max_reconsume_times=max_times)
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
    request.version = version
    return request


@pytest.mark.parametrize(("version", "dead"), [(63, False), (120, False), (121, True), (401, True)])
async def test_only_clients_from_v3_4_9_choose_their_own_budget(
    broker: Broker, client: RemotingClient, api: BrokerApi, version: int, dead: bool
) -> None:
    original = await produce(api, broker)
    answer = await client.invoke(
        broker.address, raw_send_back(original.commit_log_offset, version, max_times=0)
    )
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert len(await read_all(api, broker, "%DLQ%cg")) == (1 if dead else 0)


async def test_a_retry_send_whose_budget_is_spent_goes_to_the_dead_letter_queue(
    broker: Broker, api: BrokerApi
) -> None:
    await api.update_subscription_group(
        broker.address, SubscriptionGroupConfig("cg", retry_max_times=3)
    )

    async def retry_send(times: int, delay: str) -> None:
        msg = Message("%RETRY%cg", b"again", properties={"DELAY": delay, "RETRY_TOPIC": "T1"})
        await api.send(broker.address, "broker-a", msg, queue_id=0, producer_group="cg",
                       reconsume_times=times)  # fmt: skip

    await retry_send(2, "5")  # within the budget: delayed into the retry topic
    await retry_send(3, "6")  # spent: dead at once, DELAY dropped
    (dead,) = await read_all(api, broker, "%DLQ%cg")
    assert dead.body == b"again" and dead.reconsume_times == 3
    assert "DELAY" not in dead.properties
    (retried,) = await arrive(api, broker, "%RETRY%cg", 1)
    assert retried.reconsume_times == 2

    # a client at V3_4_9+ may set the budget itself
    msg = Message("%RETRY%cg", b"own budget")
    await api.send(broker.address, "broker-a", msg, queue_id=0, producer_group="cg",
                   reconsume_times=1, max_reconsume_times=1)  # fmt: skip
    assert len(await read_all(api, broker, "%DLQ%cg")) == 2


async def test_bad_send_backs_are_refused_and_the_broker_keeps_serving(
    tmp_path: Path, client: RemotingClient, api: BrokerApi
) -> None:
    async with run_broker(tmp_path / "s", auto_create_subscription_group=False) as broker:
        await api.update_subscription_group(broker.address, SubscriptionGroupConfig("cg"))
        original = await produce(api, broker)
        end = original.commit_log_offset + original.store_size
        for offset in (end, end + 10_000, original.commit_log_offset + 7, -1):
            answer = await client.invoke(broker.address, raw_send_back(offset, 401, None))
            assert answer.code == ResponseCode.SYSTEM_ERROR, offset
            assert f"look message by offset failed, {offset}" == answer.remark
        unknown = ConsumerSendMsgBackRequestHeader(original.commit_log_offset, "nobody", 0)
        answer = await client.invoke(
            broker.address,
            RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, unknown.to_ext()),
        )
        assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        missing_field = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "cg"})
        answer = await client.invoke(broker.address, missing_field)
        assert answer.code == ResponseCode.SYSTEM_ERROR and "offset" in (answer.remark or "")
        with pytest.raises(BrokerResponseError):
            await api.send(broker.address, "broker-a", Message("%RETRY%nobody", b"x"),
                           queue_id=0, producer_group="pg")  # fmt: skip
        assert await read_all(api, broker, "%RETRY%cg") == []

        await api.send_back(broker.address, original, "cg")  # still serving
        assert broker.store.max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
