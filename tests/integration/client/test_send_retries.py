"""The producer's retries on answers, not transport faults: a broker that refuses (a
retriable code) and a broker that stores but answers a not-OK status, with two real
brokers and one name server in process.

broker-a is the one that misbehaves; broker-b serves normally. Both carry TOPIC with
4 queues, so round robin reaches broker-a about every other send.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from apogee.broker.broker import Broker
from apogee.client import Message, Producer, SendResult, SendStatus
from apogee.client.broker_api import BrokerApi
from apogee.errors import NoPermissionError
from apogee.model.message import MessageExt
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.store.config import BrokerRole
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.reading import read_queue

TOPIC = "Retried"
Pair = tuple[str, Broker, Broker]


@contextlib.asynccontextmanager
async def pair(tmp_path: Path, role_a: BrokerRole) -> AsyncIterator[Pair]:
    """A name server, broker-a in ``role_a`` (no slave) and broker-b, both serving TOPIC."""
    async with (
        run_namesrv(tmp_path / "ns") as ns,
        run_broker(tmp_path / "a", f"127.0.0.1:{ns.port}", store={"broker_role": role_a}) as a,
        run_broker(tmp_path / "b", f"127.0.0.1:{ns.port}", broker_name="broker-b") as b,
        RemotingClient() as client,
    ):
        api = BrokerApi(client)
        for broker in (a, b):
            await api.create_topic(broker.address, TopicConfig(TOPIC, 4, 4))
        yield f"127.0.0.1:{ns.port}", a, b


async def stored(broker: Broker) -> list[MessageExt]:
    async with RemotingClient() as client:
        api = BrokerApi(client)
        return [m for q in range(4) for m in await read_queue(api, broker.address, TOPIC, q)]


async def routed_to_both(producer: Producer) -> bool:
    sent = [await producer.send(Message(TOPIC, b"warm-up")) for _ in range(8)]
    return {r.message_queue.broker_name for r in sent} == {"broker-a", "broker-b"}


async def test_a_retriable_refusal_is_retried_on_the_other_broker(tmp_path: Path) -> None:
    async with (
        pair(tmp_path, BrokerRole.ASYNC_MASTER) as (namesrv, a, b),
        RemotingClient() as client,
        Producer("pg", namesrv=namesrv) as producer,
    ):
        await eventually(lambda: routed_to_both(producer), timeout_s=10)
        # broker-a stops taking writes itself; the producer's route still says it does
        await BrokerApi(client).update_broker_config(a.address, {"brokerPermission": "4"})
        before = len(await stored(a))
        results = [await producer.send(Message(TOPIC, b"m%d" % i)) for i in range(12)]
        assert {r.status for r in results} == {SendStatus.SEND_OK}
        assert {r.message_queue.broker_name for r in results} == {"broker-b"}
        assert len(await stored(a)) == before  # NO_PERMISSION stored nothing there
        assert {r.msg_id for r in results} <= {m.uniq_key for m in await stored(b)}


async def test_not_stored_ok_is_the_result_unless_asked_to_retry(tmp_path: Path) -> None:
    """A SYNC_MASTER without a slave stores each message and answers SLAVE_NOT_AVAILABLE."""
    async with pair(tmp_path, BrokerRole.SYNC_MASTER) as (namesrv, a, b):
        async with Producer("pg", namesrv=namesrv) as plain:
            results = [await plain.send(Message(TOPIC, b"plain-%d" % i)) for i in range(8)]
        on_a = [r for r in results if r.message_queue.broker_name == "broker-a"]
        assert on_a and {r.status for r in on_a} == {SendStatus.SLAVE_NOT_AVAILABLE}

        async with Producer(
            "pg2", namesrv=namesrv, retry_another_broker_when_not_store_ok=True
        ) as retrying:
            retried: list[SendResult] = [
                await retrying.send(Message(TOPIC, b"retried-%d" % i)) for i in range(8)
            ]
        assert {r.status for r in retried} == {SendStatus.SEND_OK}
        assert {r.message_queue.broker_name for r in retried} == {"broker-b"}
        # every attempt on broker-a stored a copy; its retry on broker-b carries the same id
        copies_a = {m.uniq_key: m.body for m in await stored(a) if m.body.startswith(b"retried")}
        copies_b = {m.uniq_key: m.body for m in await stored(b) if m.body.startswith(b"retried")}
        assert copies_a, "no send of the retrying producer reached broker-a"
        assert copies_a.items() <= copies_b.items()
        assert set(copies_b) == {r.msg_id for r in retried}


async def test_without_retries_a_refusal_is_raised(tmp_path: Path) -> None:
    async with (
        pair(tmp_path, BrokerRole.ASYNC_MASTER) as (namesrv, a, _),
        RemotingClient() as client,
        Producer("pg", namesrv=namesrv, retries=0) as producer,
    ):
        await eventually(lambda: routed_to_both(producer), timeout_s=10)
        await BrokerApi(client).update_broker_config(a.address, {"brokerPermission": "4"})
        ok, refused = 0, 0
        for i in range(8):
            try:
                await producer.send(Message(TOPIC, b"x%d" % i))
                ok += 1
            except NoPermissionError:
                refused += 1
    assert ok and refused  # round robin met both brokers, and broker-a's refusal came back
