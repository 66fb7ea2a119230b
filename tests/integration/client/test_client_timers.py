"""The client's timers against a name server and a broker run as ``apogee`` processes.

* heartbeats: with a short interval the broker hears from the client again and again, and
  a broker restarted on the same port and store learns the consumer from the next
  heartbeat, the consumer running on untouched;
* orderly lock renewal: an orderly consumer renewing its queue locks every 0.3 s keeps
  them across several of the broker's 1 s lock lifetimes, so that a second orderly
  consumer of its group, asking for the same queues five times a second, gets none of
  them until the first one stops.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from apogee.admin.admin_client import AdminClient
from apogee.admin.operations import all_producers
from apogee.client import Message, MessageQueue, Producer, PushConsumer, ReceivedMessage
from apogee.client.broker_api import BrokerApi
from apogee.errors import ApogeeError
from apogee.testing.cluster import broker_processes, eventually


async def consumer_ids(api: BrokerApi, addr: str, group: str) -> set[str]:
    """The client ids the broker at ``addr`` lists for ``group`` (none: empty)."""
    try:
        found = await api.get_consumer_connections(addr, group)
    except ApogeeError:  # CONSUMER_NOT_ONLINE
        return set()
    return {c.client_id for c in found.connections}


async def test_heartbeats_repeat_and_reach_a_restarted_broker(tmp_path: Path) -> None:
    with broker_processes(tmp_path) as (namesrv, broker):
        consumer = PushConsumer(
            "cg-beat",
            namesrv=namesrv,
            listener=lambda _m: None,
            instance_name="beat",
            heartbeat_interval=0.3,
            poll_namesrv_interval=600,  # no route refresh: brokers are met by heartbeats only
        )
        # the producer shares the consumer's client instance (started after it: the first
        # user's settings win), so its heartbeats: the broker shows when it last heard
        # from a producer
        producer = Producer("pg-beat", namesrv=namesrv, instance_name="beat")
        async with consumer, producer:
            await producer.send(Message("Beat", b"creates the topic"))
            consumer.subscribe("Beat")
            client_id = consumer.instance.client_id
            heard: set[int] = set()
            async with AdminClient(namesrv) as admin:

                async def heard_often() -> bool:
                    for p in (await all_producers(admin)).get("pg-beat", []):
                        heard.add(p.last_update_timestamp)
                    return len(heard) >= 4

                await eventually(heard_often, timeout_s=5, interval_s=0.05)
                api = admin.broker
                assert client_id in await consumer_ids(api, broker.address, "cg-beat")

                assert broker.stop() == 0, broker.log_text()
                broker.start()  # same port and store: it knows no client now
                started = time.monotonic()

                async def known_again() -> bool:
                    return client_id in await consumer_ids(api, broker.address, "cg-beat")

                await eventually(known_again, timeout_s=5, interval_s=0.05)
                assert time.monotonic() - started < 3  # a heartbeat round, not a restart
            assert consumer.started and consumer.instance.client_id == client_id


def every_queue(
    group: str, client_id: str, queues: Sequence[MessageQueue], client_ids: Sequence[str]
) -> list[MessageQueue]:
    """An allocation giving each consumer every queue: both ask for the same locks."""
    return sorted(queues)


async def test_an_orderly_consumer_keeps_its_locks_past_the_broker_lock_lifetime(
    tmp_path: Path,
) -> None:
    properties = {"rocketmq.broker.rebalance.lockMaxLiveTime": "1000"}
    with broker_processes(tmp_path, properties) as (namesrv, _):
        logs: dict[str, list[bytes]] = {"first": [], "second": []}

        def orderly(name: str, lock_interval: float, rebalance_interval: float) -> PushConsumer:
            def listener(msg: ReceivedMessage) -> None:
                logs[name].append(msg.body)

            consumer = PushConsumer(
                "cg-locks",
                namesrv=namesrv,
                listener=listener,
                orderly=True,
                consume_from="first",
                allocate=every_queue,
                lock_interval=lock_interval,
                rebalance_interval=rebalance_interval,
                instance_name=name,
            )
            consumer.subscribe("Locked")
            return consumer

        async with Producer("pg-locks", namesrv=namesrv) as producer:
            sent: list[bytes] = []

            async def send(body: bytes) -> None:
                await producer.send(Message("Locked", body))
                sent.append(body)

            await send(b"m0")  # creates the topic: 4 queues
            # the first renews its locks only by its lock timer: rebalancing rarely
            first = orderly("first", lock_interval=0.3, rebalance_interval=60)
            second = orderly("second", lock_interval=0.2, rebalance_interval=0.2)
            await first.start()
            try:
                await eventually(lambda: _have(logs["first"], 1), timeout_s=10)
                await second.start()
                until = time.monotonic() + 3.5  # three and a half lock lifetimes
                n = 1
                while time.monotonic() < until:
                    await send(b"m%d" % n)
                    n += 1
                    await asyncio.sleep(0.05)
                await eventually(lambda: _have(logs["first"], len(sent)), timeout_s=5)
                assert logs["second"] == []
                locked = {MessageQueue("Locked", "broker-a", q) for q in range(4)}
                assert first.assignment() & locked == locked
                assert not second.assignment() & locked  # it never got a lock
            finally:
                await first.close()  # unlocks its queues
            try:
                await send(b"after")
                await eventually(lambda: _have(logs["second"], 1), timeout_s=5)
            finally:
                await second.close()
    assert sorted(logs["first"]) == sorted(sent[:-1])  # each once, none lost
    assert logs["second"] == [b"after"]  # the first committed all it consumed


async def _have(items: list[bytes], count: int) -> bool:
    return len(items) >= count
