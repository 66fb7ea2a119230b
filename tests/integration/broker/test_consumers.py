"""Heartbeats, consumer lists, notifications and offsets against a real broker."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

from apogee.broker.broker import Broker
from apogee.codes import RequestCode, ResponseCode
from apogee.model.client import ConsumerData, HeartbeatData, ProducerData
from apogee.model.subscription import SubscriptionData
from apogee.protocol.bodies import decode_consumer_id_list, encode_heartbeat
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.remoting.dispatch import HandlerTable, RequestContext
from apogee.testing.cluster import run_broker
from tests.integration.broker.wire import send

CPP_DATA = Path(__file__).resolve().parents[2] / "data" / "cpp"


def cpp_body(name: str) -> bytes:
    frame = (CPP_DATA / name).read_bytes()
    _, header_length = struct.unpack(">ii", frame[:8])
    return frame[8 + header_length :]


def heartbeat(client_id: str, group: str = "cg", topic: str = "T1") -> RemotingCommand:
    data = HeartbeatData(
        client_id,
        producers=(ProducerData("pg"),),
        consumers=(ConsumerData(group, subscriptions=(SubscriptionData.build(topic, "*"),)),),
    )
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=encode_heartbeat(data))


def consumer_list(group: str = "cg") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


class Listener:
    """A consumer's side: records NOTIFY_CONSUMER_IDS_CHANGED the broker sends it."""

    def __init__(self) -> None:
        self.groups: list[str] = []
        self.changed = asyncio.Event()
        self.table = HandlerTable()
        self.table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self.on_notify)

    def on_notify(self, ctx: RequestContext, request: RemotingCommand) -> None:
        assert request.is_oneway
        self.groups.append(request.ext_fields["consumerGroup"])
        self.changed.set()


async def test_a_cpp_heartbeat_registers_the_group_and_its_retry_topic(
    broker: Broker, client: RemotingClient
) -> None:
    request = RemotingCommand.request(
        RequestCode.HEART_BEAT, body=cpp_body("heart_beat_push_clustering.bin")
    )
    answer = await client.invoke(broker.address, request)

    assert answer.code == ResponseCode.SUCCESS
    assert broker.topics.select("%RETRY%cg1") is not None
    assert broker.groups.get("cg1") is not None
    ids = await client.invoke(broker.address, consumer_list("cg1"))
    assert decode_consumer_id_list(ids.body_bytes()) == ["11100-127.0.0.1@DEFAULT"]
    sub = broker.clients.subscription("cg1", "T1")
    assert sub is not None and sub.tags_set == ("TagA", "TagB")
    assert 0 not in sub.code_set  # the client's atoi codes were replaced


async def test_group_changes_are_pushed_to_the_other_consumers(broker: Broker) -> None:
    first = Listener()
    async with RemotingClient(handlers=first.table) as c1, RemotingClient() as c2:
        await c1.invoke(broker.address, heartbeat("id-1"))
        await asyncio.sleep(0.05)
        first.groups.clear()
        first.changed.clear()

        await c2.invoke(broker.address, heartbeat("id-2"))
        await asyncio.wait_for(first.changed.wait(), 5)
        ids = await c1.invoke(broker.address, consumer_list())
        assert decode_consumer_id_list(ids.body_bytes()) == ["id-1", "id-2"]

        first.changed.clear()
        bye = RemotingCommand.request(
            RequestCode.UNREGISTER_CLIENT,
            {"clientID": "id-2", "producerGroup": "", "consumerGroup": "cg"},
        )
        assert (await c2.invoke(broker.address, bye)).code == ResponseCode.SUCCESS
        await asyncio.wait_for(first.changed.wait(), 5)
        ids = await c1.invoke(broker.address, consumer_list())
        assert decode_consumer_id_list(ids.body_bytes()) == ["id-1"]
    assert first.groups == ["cg", "cg"]


async def test_a_closed_connection_leaves_its_groups(
    broker: Broker, client: RemotingClient
) -> None:
    async with RemotingClient() as leaving:
        await leaving.invoke(broker.address, heartbeat("id-gone"))
    await asyncio.sleep(0.1)
    answer = await client.invoke(broker.address, consumer_list())
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "no consumer for this group" in (answer.remark or "")
    assert broker.clients.producer_channels("pg") == []


def offset_request(code: int, **fields: object) -> RemotingCommand:
    return RemotingCommand.request(code, {k: str(v) for k, v in fields.items()})


async def query_offset(client: RemotingClient, broker: Broker, topic: str, queue_id: int = 0,
                       group: str = "cg") -> RemotingCommand:  # fmt: skip
    request = offset_request(
        RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup=group, topic=topic, queueId=queue_id
    )
    return await client.invoke(broker.address, request)


async def test_committed_offsets_are_answered(broker: Broker, client: RemotingClient) -> None:
    update = offset_request(
        RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup="cg", topic="T1", queueId=2,
        commitOffset=17,
    )  # fmt: skip
    assert (await client.invoke(broker.address, update)).code == ResponseCode.SUCCESS

    answer = await query_offset(client, broker, "T1", 2)

    assert (answer.code, answer.ext_fields["offset"]) == (ResponseCode.SUCCESS, "17")


async def test_a_new_group_on_a_young_queue_starts_at_zero(
    broker: Broker, client: RemotingClient
) -> None:
    await send(client, broker.address, "T1")
    answer = await query_offset(client, broker, "T1")
    assert (answer.code, answer.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")


async def test_a_new_group_on_a_queue_out_of_memory_is_not_found(
    tmp_path: Path, client: RemotingClient
) -> None:
    # a machine with 100 bytes of RAM: every record counts as on disk
    async with run_broker(tmp_path / "s", store={"total_physical_memory_bytes": 100}) as b:
        await send(client, b.address, "T1")
        await send(client, b.address, "T1")
        answer = await query_offset(client, b, "T1")
        assert answer.code == ResponseCode.QUERY_NOT_FOUND


async def test_queue_offsets_and_times(broker: Broker, client: RemotingClient) -> None:
    before = int(time.time() * 1000) - 1
    for _ in range(3):
        await send(client, broker.address, "T1")

    def ask(code: int, **fields: object) -> RemotingCommand:
        return offset_request(code, topic="T1", queueId=0, **fields)

    max_offset = await client.invoke(broker.address, ask(RequestCode.GET_MAX_OFFSET))
    min_offset = await client.invoke(broker.address, ask(RequestCode.GET_MIN_OFFSET))
    earliest = await client.invoke(broker.address, ask(RequestCode.GET_EARLIEST_MSG_STORETIME))
    by_time = await client.invoke(
        broker.address, ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=before)
    )
    unknown = await client.invoke(
        broker.address, offset_request(RequestCode.GET_MAX_OFFSET, topic="None", queueId=0)
    )

    assert max_offset.ext_fields["offset"] == "3"
    assert min_offset.ext_fields["offset"] == "0"
    assert before <= int(earliest.ext_fields["timestamp"]) <= int(time.time() * 1000)
    assert by_time.ext_fields["offset"] == "0"
    assert unknown.ext_fields["offset"] == "0"


async def test_a_malformed_heartbeat_is_refused_and_changes_nothing(
    broker: Broker, client: RemotingClient
) -> None:
    topics = len(broker.topics)
    for body in (b"not json", b'{"consumerDataSet":[{"groupName":"cg"}]}', b"[]"):
        request = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
        answer = await client.invoke(broker.address, request)
        assert answer.code == ResponseCode.SYSTEM_ERROR, body
    assert len(broker.topics) == topics
    assert broker.clients.consumer_group("cg") is None
    assert (await client.invoke(broker.address, heartbeat("id-ok"))).code == ResponseCode.SUCCESS
