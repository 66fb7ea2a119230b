"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ against a real broker, in the C++ client's own frames too."""

from __future__ import annotations

from pathlib import Path

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.model.client import MessageQueue
from apogee.protocol.bodies import LockBatchRequestBody, decode_lock_batch_response
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder
from apogee.remoting.client import RemotingClient
from tests.integration.broker.wire import send

CPP_DATA = Path(__file__).resolve().parents[2] / "data" / "cpp"
QUEUES = tuple(MessageQueue("T1", "broker-a", i) for i in range(4))


def cpp_request(name: str) -> RemotingCommand:
    (command,) = FrameDecoder().feed((CPP_DATA / name).read_bytes())
    return RemotingCommand.request(command.code, command.ext_fields, command.body_bytes())


async def test_locks_are_granted_refused_renewed_and_released(
    broker: Broker, client: RemotingClient
) -> None:
    api = BrokerApi(client)
    mine = LockBatchRequestBody("cg", "c1", QUEUES[:2])
    theirs = LockBatchRequestBody("cg", "c2", QUEUES)

    assert set(await api.lock_batch(broker.address, mine)) == set(QUEUES[:2])
    assert set(await api.lock_batch(broker.address, theirs)) == set(QUEUES[2:])
    assert set(await api.lock_batch(broker.address, mine)) == set(QUEUES[:2])  # renewal
    await api.unlock_batch(broker.address, LockBatchRequestBody("cg", "c2", QUEUES[:1]))
    assert broker.locks.owner("cg", QUEUES[0]) == "c1"  # not c2's to release
    await api.unlock_batch(broker.address, mine)
    assert set(await api.lock_batch(broker.address, theirs)) == set(QUEUES)


async def test_the_cpp_clients_lock_frames(broker: Broker, client: RemotingClient) -> None:
    answer = await client.invoke(broker.address, cpp_request("lock_batch_mq_single.bin"))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    (locked,) = decode_lock_batch_response(answer.body_bytes())
    assert locked == MessageQueue("%RETRY%cg6", "broker-a", 0)
    assert broker.locks.owner("cg6", locked) == "12418-127.0.0.1@DEFAULT"

    answer = await client.invoke(broker.address, cpp_request("unlock_batch_mq.bin"))
    assert answer.code == ResponseCode.SUCCESS
    assert broker.locks.owner("cg6", locked) == "12418-127.0.0.1@DEFAULT"  # queue 0 not in it


async def test_a_lock_body_that_is_not_json_is_refused_and_the_broker_keeps_serving(
    broker: Broker, client: RemotingClient
) -> None:
    for body in (b"not json", b"", b"[]", b'{"clientId":"c","mqSet":[]}'):
        for code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
            answer = await client.invoke(broker.address, RemotingCommand.request(code, body=body))
            assert answer.code == ResponseCode.SYSTEM_ERROR, (code, body)
            assert answer.remark
    assert broker.locks.table == {}
    assert (await send(client, broker.address, "T1")).code == ResponseCode.SUCCESS
