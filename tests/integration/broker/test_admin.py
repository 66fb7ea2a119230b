"""Admin requests against a real broker and name server over 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.codes import LanguageCode, RequestCode, ResponseCode
from apogee.errors import BrokerResponseError, TopicNotExistError
from apogee.model.client import ConsumerData, HeartbeatData, MessageQueue, ProducerData
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import Message
from apogee.model.route import PERM_READ
from apogee.model.subscription import SubscriptionData
from apogee.model.topic import TopicConfig
from apogee.protocol import admin_bodies, bodies
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.store.config import BrokerRole
from apogee.testing.cluster import eventually, run_broker
from apogee.testing.namesrv import get_route, running_namesrv


@dataclass
class Cluster:
    broker: Broker
    namesrv: str
    client: RemotingClient
    api: BrokerApi

    @property
    def addr(self) -> str:
        return self.broker.address

    async def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        return await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body))

    async def send(self, topic: str, queue_id: int = 0, count: int = 1) -> None:
        for i in range(count):
            msg = Message(topic, b"m%d" % i, properties={"TAGS": "t"})
            await self.api.send(self.addr, "broker-a", msg, queue_id=queue_id, producer_group="pg")


@pytest.fixture
async def cluster(tmp_path: Path, client: RemotingClient) -> AsyncIterator[Cluster]:
    async with running_namesrv(tmp_path) as (_, ns), run_broker(tmp_path / "store", ns) as b:
        yield Cluster(b, ns, client, BrokerApi(client, timeout_s=5))


def create_header(topic: str, **fields: object) -> dict[str, str]:
    values: dict[str, object] = {
        "topic": topic, "default_topic": "TBW102", "read_queue_nums": 4, "write_queue_nums": 4,
        "perm": 6, "topic_filter_type": "SINGLE_TAG", **fields,
    }  # fmt: skip
    return CreateTopicRequestHeader(**values).to_ext()  # type: ignore[arg-type]


async def test_a_created_topic_is_routed_when_the_answer_comes(cluster: Cluster) -> None:
    await cluster.api.create_topic(cluster.addr, TopicConfig("Orders", 8, 6))
    route = await get_route(cluster.client, cluster.namesrv, "Orders")  # no waiting
    assert route is not None
    q = route.queue_datas[0]
    assert (q.read_queue_nums, q.write_queue_nums, q.perm) == (8, 6, 6)
    assert cluster.broker.topics.select("Orders") == TopicConfig("Orders", 8, 6)
    topics_json = cluster.broker.config_dir / "topics.json"

    async def persisted() -> bool:
        return topics_json.exists() and b'"Orders"' in topics_json.read_bytes()

    await eventually(persisted)

    await cluster.api.create_topic(cluster.addr, TopicConfig("Orders", 2, 2, PERM_READ))
    route = await get_route(cluster.client, cluster.namesrv, "Orders")
    assert route is not None
    assert (route.queue_datas[0].write_queue_nums, route.queue_datas[0].perm) == (2, PERM_READ)
    wrapper = await cluster.api.get_all_topic_config(cluster.addr)
    assert wrapper.topic_config_table["Orders"] == TopicConfig("Orders", 2, 2, PERM_READ)
    assert "TBW102" in wrapper.topic_config_table
    assert wrapper.data_version == cluster.broker.topics.data_version


@pytest.mark.parametrize(
    ("fields", "remark"),
    [
        ({"topic": "a b"}, "characters outside"),
        ({"topic": "x" * 128}, "longer than 127"),
        ({"topic": "TBW102"}, "The topic[TBW102] is conflict with system topic."),
        ({"topic": "SCHEDULE_TOPIC_XXXX"}, "conflict with system topic"),
        ({"topic": "rmq_sys_mine"}, "conflict with system topic"),
        ({"perm": 9}, "perm must be 0..7, not 9"),
        ({"read_queue_nums": 0}, "readQueueNums must be"),
        ({"write_queue_nums": -1}, "writeQueueNums must be"),
        ({"topic_filter_type": "ALL_TAGS"}, "topicFilterType"),
    ],
)
async def test_bad_topic_creation_is_refused(
    cluster: Cluster, fields: dict[str, object], remark: str
) -> None:
    topic = str(fields.pop("topic", "Fine"))
    answer = await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_header(topic, **fields))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert remark in (answer.remark or "")
    assert topic not in cluster.broker.topics or topic == "TBW102" or "SCHEDULE" in topic
    missing = await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"})
    assert missing.code == ResponseCode.SYSTEM_ERROR and "defaultTopic" in (missing.remark or "")
    await cluster.send("StillServing")


async def test_deleting_a_topic_drops_config_queues_and_offsets(cluster: Cluster) -> None:
    await cluster.api.create_topic(cluster.addr, TopicConfig("Gone", 2, 2))
    await cluster.send("Gone", queue_id=1, count=3)
    await cluster.api.update_consumer_offset(cluster.addr, "cg", "Gone", 1, 2)
    await cluster.api.update_consumer_offset(cluster.addr, "cg", "Kept", 0, 5)
    store = cluster.broker.store
    assert store is not None
    cluster.broker.dispatch.drain()
    assert store.max_offset_in_queue("Gone", 1) == 3

    await cluster.api.delete_topic(cluster.addr, "Gone")

    assert "Gone" not in cluster.broker.topics
    assert store.max_offset_in_queue("Gone", 1) == 0
    assert "Gone" not in store.topics()
    assert cluster.broker.offsets.query("cg", "Gone", 1) == -1
    assert cluster.broker.offsets.query("cg", "Kept", 0) == 5
    with pytest.raises(TopicNotExistError):
        await cluster.api.get_topic_stats(cluster.addr, "Gone")


async def test_deleting_unknown_system_or_bad_topics(cluster: Cluster) -> None:
    version = cluster.broker.topics.data_version
    await cluster.api.delete_topic(cluster.addr, "NeverWas")  # RocketMQ answers 0
    assert cluster.broker.topics.data_version == version
    for topic, remark in (("TBW102", "conflict with system topic"), ("a/b", "characters")):
        answer = await cluster.call(
            RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic).to_ext()
        )
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert remark in (answer.remark or "")
    assert "TBW102" in cluster.broker.topics


async def test_subscription_groups_are_created_listed_and_deleted(cluster: Cluster) -> None:
    config = SubscriptionGroupConfig("cg", retry_max_times=3, consume_broadcast_enable=False)
    await cluster.api.update_subscription_group(cluster.addr, config)
    await cluster.api.update_consumer_offset(cluster.addr, "cg", "T1", 0, 4)
    answer = await cluster.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    table = bodies.decode_subscription_group_wrapper(answer.body_bytes()).subscription_group_table
    groups_json = cluster.broker.config_dir / "subscriptionGroup.json"

    async def persisted() -> bool:
        return groups_json.exists() and b'"retryMaxTimes":3' in groups_json.read_bytes()

    await eventually(persisted)
    assert (table["cg"].retry_max_times, table["cg"].consume_broadcast_enable) == (3, False)
    assert "TOOLS_CONSUMER" in table

    await cluster.api.delete_subscription_group(cluster.addr, "cg")  # offsets kept
    assert cluster.broker.groups.get("cg") is None
    assert cluster.broker.offsets.query("cg", "T1", 0) == 4
    await cluster.api.update_subscription_group(cluster.addr, config)
    await cluster.api.delete_subscription_group(cluster.addr, "cg", clean_offset=True)
    assert cluster.broker.offsets.query("cg", "T1", 0) == -1
    await cluster.api.delete_subscription_group(cluster.addr, "never")  # fine

    for body in (b"{oops", b'{"retryMaxTimes":2}', b'{"groupName":"bad name"}'):
        answer = await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        assert answer.code == ResponseCode.SYSTEM_ERROR, body
        assert answer.remark
    assert set(cluster.broker.groups.table) == set(table) - {"cg"}


async def test_runtime_info_has_the_figures_tools_read(cluster: Cluster) -> None:
    await cluster.send("T1", count=3)
    await cluster.api.pull(cluster.addr, "cg", "T1", 0, 0)
    cluster.broker.stats.sample()
    info = await cluster.api.get_broker_runtime_info(cluster.addr)
    store = cluster.broker.store
    assert store is not None
    assert (info["brokerVersionDesc"], info["brokerVersion"]) == ("V4_9_4", "401")
    assert (info["msgPutTotalTodayNow"], info["msgGetTotalTodayNow"]) == ("3", "3")
    assert info["msgPutTotalTodayMorning"] == info["msgPutTotalYesterdayMorning"] == "0"
    assert info["commitLogMinOffset"] == "0"
    assert info["commitLogMaxOffset"] == str(store.commit_log_max_offset())
    assert int(info["dispatchBehindBytes"]) >= 0
    assert int(info["earliestMessageTimeStamp"]) > 0
    assert info["runtime"].startswith("[ 0 days, 0 hours, 0 minutes, ")
    for key in ("putTps", "getTotalTps", "getTransferedTps", "getFoundTps", "getMissTps"):
        assert [float(x) for x in info[key].split(" ")], key
        assert len(info[key].split(" ")) == 3
    assert 0 <= float(info["commitLogDiskRatio"]) <= 1
    assert info["commitLogDirCapacity"].startswith("Total : ")
    assert info["scheduleMessageOffset_18"] == "0,0"
    assert int(info["bootTimestamp"]) <= store.clock.now_ms()


async def test_topic_stats_and_consume_stats(cluster: Cluster) -> None:
    await cluster.api.create_topic(cluster.addr, TopicConfig("S", 2, 2))
    await cluster.send("S", queue_id=1, count=3)
    cluster.broker.dispatch.drain()
    stats = await cluster.api.get_topic_stats(cluster.addr, "S")
    q1 = stats.offset_table[MessageQueue("S", "broker-a", 1)]
    assert (q1.min_offset, q1.max_offset) == (0, 3)
    assert q1.last_update_timestamp > 0
    assert stats.offset_table[MessageQueue("S", "broker-a", 0)].max_offset == 0

    await cluster.api.pull(cluster.addr, "cg", "S", 1, 0)
    await cluster.api.update_consumer_offset(cluster.addr, "cg", "S", 1, 2)
    consume = await cluster.api.get_consume_stats(cluster.addr, "cg")
    w = consume.offset_table[MessageQueue("S", "broker-a", 1)]
    assert (w.broker_offset, w.consumer_offset, w.diff) == (3, 2, 1)
    assert 0 < w.last_timestamp <= q1.last_update_timestamp
    assert consume.total_diff() == 1
    assert consume.offset_table.keys() == {MessageQueue("S", "broker-a", i) for i in range(2)}
    by_topic = await cluster.api.get_consume_stats(cluster.addr, "cg", "Unknown")
    assert by_topic.offset_table == {}
    with pytest.raises(TopicNotExistError):
        await cluster.api.get_topic_stats(cluster.addr, "Unknown")


async def test_connection_lists(cluster: Cluster) -> None:
    beat = HeartbeatData(
        "10.0.0.9@x",
        producers=(ProducerData("pg"),),
        consumers=(ConsumerData("cg", subscriptions=(SubscriptionData.build("T1", "A || B"),)),),
    )
    await cluster.api.heartbeat(cluster.addr, beat)
    consumers = await cluster.api.get_consumer_connections(cluster.addr, "cg")
    (conn,) = consumers.connections
    assert conn.client_id == "10.0.0.9@x"
    assert conn.client_addr.startswith("127.0.0.1:")
    assert conn.language is LanguageCode.PYTHON
    assert set(consumers.subscription_table["T1"].tags_set) == {"A", "B"}

    answer = await cluster.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
    assert answer.code == ResponseCode.SUCCESS
    (producer,) = admin_bodies.decode_producer_connection(answer.body_bytes())
    assert producer == conn

    with pytest.raises(BrokerResponseError) as info:
        await cluster.api.get_consumer_connections(cluster.addr, "nobody")
    assert info.value.code == ResponseCode.CONSUMER_NOT_ONLINE
    answer = await cluster.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "no"})
    assert answer.code == ResponseCode.SYSTEM_ERROR


async def test_broker_config_is_properties_text_with_a_version(cluster: Cluster) -> None:
    answer = await cluster.call(RequestCode.GET_BROKER_CONFIG)
    assert answer.code == ResponseCode.SUCCESS
    lines = answer.body_bytes().decode().splitlines()
    props = dict(line.split("=", 1) for line in lines)
    assert props["brokerName"] == "broker-a"
    assert props["listenPort"] == str(cluster.broker.port)
    assert props["messageDelayLevel"].startswith("1s 5s 10s")
    assert props["flushDiskType"] == "ASYNC_FLUSH"
    assert props["autoCreateTopicEnable"] == "true"
    version = orjson.loads(answer.ext_fields["version"])
    assert set(version) >= {"counter", "timestamp"}


async def test_a_slave_refuses_topic_and_group_changes(
    tmp_path: Path, client: RemotingClient
) -> None:
    async with run_broker(
        tmp_path / "s", broker_id=1, store={"broker_role": BrokerRole.SLAVE}
    ) as b:
        api = BrokerApi(client)
        for call in (
            api.create_topic(b.address, TopicConfig("T", 1, 1)),
            api.delete_topic(b.address, "T"),
            api.update_subscription_group(b.address, SubscriptionGroupConfig("g")),
            api.delete_subscription_group(b.address, "g"),
        ):
            with pytest.raises(BrokerResponseError) as info:
                await call
            assert "slave" in str(info.value)
        assert "T" not in b.topics and b.groups.get("g") is None
        assert b.schedule is not None and not b.schedule.running  # its master delivers
