"""The shared ClientInstance against a real name server and brokers: sharing, heartbeats,
goodbyes, name-server rotation, brokers leaving the routes, and the consumer's hooks.

The consumers do not exist here yet, so ``RecordingConsumer`` stands in for one at the
``ConsumerMember`` seam; everything it is driven by is real (broker heartbeat handling,
NOTIFY_CONSUMER_IDS_CHANGED from the broker, requests over the broker's own connection).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from apogee._util.net import free_port
from apogee.broker.broker import Broker
from apogee.client import ClientInstance, InstanceConfig, Message, Producer
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ClientError
from apogee.model.client import ConsumerData, MessageModel, MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.model.subscription import SubscriptionData
from apogee.protocol import bodies
from apogee.protocol.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.testing.cluster import eventually, run_broker, run_namesrv

Cluster = tuple[str, Broker]


class RecordingConsumer:
    """A ConsumerMember that records what the instance asks of it."""

    def __init__(self, group: str, topic: str, expression: str = "*") -> None:
        self.group = group
        self.subscriptions = [SubscriptionData.build(topic, expression)]
        self.persisted = 0
        self.ids_changed = 0
        self.resets: list[tuple[str, dict[MessageQueue, int]]] = []

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, subscriptions=tuple(self.subscriptions))

    async def persist_offsets(self) -> None:
        self.persisted += 1

    def on_consumer_ids_changed(self) -> None:
        self.ids_changed += 1

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        self.resets.append((topic, dict(offsets)))

    def running_info(self) -> Mapping[str, object]:
        return {"properties": {"consumeType": "CONSUME_PASSIVELY"}, "mqTable": {}}

    async def consume_directly(self, msg: ReceivedMessage) -> Mapping[str, object]:
        raise ClientError("a recording consumer consumes nothing directly")


def channels_of(broker: Broker, group: str) -> list[str]:
    return [c.client_id for c in broker.clients.producer_channels(group)]


async def test_producers_share_one_instance_per_name_servers_and_instance_name(
    cluster: Cluster,
) -> None:
    namesrv, _ = cluster
    async with (
        Producer("pg-1", namesrv=namesrv) as one,
        Producer("pg-2", namesrv=namesrv) as two,
        Producer("pg-3", namesrv=namesrv, instance_name="other") as three,
    ):
        assert one.instance is two.instance
        assert three.instance is not one.instance
        assert one.instance.client_id.endswith(f"@{os.getpid()}")
        assert three.instance.client_id.endswith("@other")
        shared = one.instance
        await one.close()
        assert not shared.closed  # two still uses it
    assert shared.closed


async def test_heartbeats_announce_the_group_and_closing_unregisters_it(cluster: Cluster) -> None:
    namesrv, broker = cluster
    producer = Producer("pg-hb", namesrv=namesrv)
    await producer.start()
    client_id = producer.instance.client_id
    assert channels_of(broker, "pg-hb") == [client_id]  # from the start, before any send
    await producer.close()
    assert channels_of(broker, "pg-hb") == []


async def test_a_dead_name_server_in_the_list_is_skipped(cluster: Cluster) -> None:
    namesrv, _ = cluster
    dead = f"127.0.0.1:{free_port()}"
    async with Producer("pg", namesrv=f"{dead};{namesrv}") as producer:
        result = await producer.send(Message("Rotating", b"x"))
    assert result.message_queue.broker_name == "broker-a"


async def test_a_broker_that_leaves_every_route_loses_its_connection(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path / "ns") as ns, contextlib.AsyncExitStack() as stack:
        addr = f"127.0.0.1:{ns.port}"
        a = await stack.enter_async_context(run_broker(tmp_path / "a", addr))
        b_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
        b = await b_stack.enter_async_context(
            run_broker(tmp_path / "b", addr, broker_name="broker-b")
        )
        producer = await stack.enter_async_context(
            Producer("pg", namesrv=addr, poll_namesrv_interval=0.1)
        )
        instance = producer.instance
        sent = [await producer.send(Message("Both", b"x")) for _ in range(8)]
        assert {r.message_queue.broker_name for r in sent} == {"broker-a", "broker-b"}
        assert b.address in instance.remoting._pool
        await b_stack.aclose()  # broker-b stops and unregisters from the name server

        async def dropped() -> bool:
            return b.address not in instance.routes.all_addrs() | set(instance.remoting._pool)

        await eventually(dropped)  # by the periodic route refresh
        assert instance.routes.all_addrs() == {a.address}
        later = [await producer.send(Message("Both", b"y")) for _ in range(4)]
        assert {r.message_queue.broker_name for r in later} == {"broker-a"}


async def test_a_consumer_member_is_heartbeated_persisted_and_told_of_changes(
    cluster: Cluster,
) -> None:
    namesrv, broker = cluster
    config = InstanceConfig(instance_name="c1", persist_offsets_interval_s=0.05)
    first = await ClientInstance.acquire(namesrv, config)
    second = await ClientInstance.acquire(namesrv, InstanceConfig(instance_name="c2"))
    one, two = (
        RecordingConsumer("cg", "Watched", "TagA || TagB"),
        RecordingConsumer("cg", "Watched"),
    )
    try:
        await broker_topic(namesrv)
        await first.register_consumer(one)
        info = broker.clients.consumer_group("cg")
        assert info is not None and info.client_ids() == [first.client_id]
        assert info.message_model is MessageModel.CLUSTERING
        assert info.subscriptions["Watched"].sub_string == "TagA || TagB"

        async def persisted() -> bool:
            return one.persisted >= 3

        await eventually(persisted)

        await second.register_consumer(two)  # the broker tells the first member
        assert sorted(info.client_ids()) == sorted([first.client_id, second.client_id])

        async def told() -> bool:
            return one.ids_changed >= 1

        await eventually(told)

        await second.unregister_consumer("cg")
        assert info.client_ids() == [first.client_id]
        assert two.persisted == 1  # once more on the way out
    finally:
        await second.release()
        await first.release()
    assert one.persisted >= 4 and first.closed
    assert broker.clients.consumer_group("cg") is None


async def broker_topic(namesrv: str) -> None:
    """Create topic Watched through a send, so the consumers have a route."""
    async with Producer("seed", namesrv=namesrv) as producer:
        await producer.send(Message("Watched", b"seed"))
        routes = producer.instance.routes

        async def routed() -> bool:
            await routes.refresh("Watched")
            return routes.route("Watched") is not None

        await eventually(routed)


async def test_broker_requests_reach_the_member_of_their_group(cluster: Cluster) -> None:
    namesrv, broker = cluster
    await broker_topic(namesrv)
    instance = await ClientInstance.acquire(namesrv, InstanceConfig(instance_name="c1"))
    member = RecordingConsumer("cg", "Watched")
    try:
        await instance.register_consumer(member)
        info = broker.clients.consumer_group("cg")
        assert info is not None
        [conn] = [c for c in info.channels if isinstance(c, Connection)]

        asked = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": "cg", "clientId": instance.client_id},
        )
        answer = await conn.invoke(asked, 3)
        assert answer.code == ResponseCode.SUCCESS
        got: dict[str, Any] = orjson.loads(answer.body_bytes())
        assert got["properties"] == {"consumeType": "CONSUME_PASSIVELY"}
        other = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "nobody", "clientId": "x"}
        )
        refused = await conn.invoke(other, 3)
        assert refused.code == ResponseCode.SYSTEM_ERROR and "nobody" in (refused.remark or "")

        mq = MessageQueue("Watched", "broker-a", 2)
        table = b'{"offsetTable":{%s:42}}' % orjson.dumps(bodies.mq_to_json(mq))
        reset = RemotingCommand.oneway(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            {"topic": "Watched", "group": "cg", "timestamp": "0", "isForce": "true"},
            table,
        )
        await conn.invoke_oneway(reset)

        async def was_reset() -> bool:
            return member.resets == [("Watched", {mq: 42})]

        await eventually(was_reset)
    finally:
        await instance.release()
