"""Consumer groups across rebalances, against a name server and a broker as ``apogee`` processes.

* Orderly: three consumers (one joining mid-stream) share 8 queues; every key's messages
  are delivered in the order they were sent, each exactly once: a queue changes hands
  only after its owner finished and committed the message in hand and released its lock.
* Concurrent: while messages keep coming, three consumers join and two leave. Delivery is
  at-least-once: nothing is lost; a message is never delivered twice to one consumer; a
  message delivered twice went to two consumers, around a change of membership (the new
  owner of a queue read its offset before the old one had committed what it consumed);
  and once the membership is steady, every message is delivered exactly once.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from apogee.client import Message, Producer, PushConsumer, ReceivedMessage, select_by_hash
from apogee.model.client import MessageQueue
from apogee.model.topic import TopicConfig
from apogee.testing.cluster import broker_processes, eventually

pytestmark = pytest.mark.slow

QUEUES = 8


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with broker_processes(tmp_path_factory.mktemp("groups")) as (namesrv, _):
        yield namesrv


async def create_topic(producer: Producer, topic: str) -> list[MessageQueue]:
    routes = producer.instance.routes
    await routes.get_route("TBW102")
    addr = routes.master_addr("broker-a")
    assert addr is not None
    await producer.instance.broker_api.create_topic(addr, TopicConfig(topic, QUEUES, QUEUES))

    async def routed() -> list[MessageQueue]:
        await routes.refresh(topic)
        return routes.subscribe_queues(topic)

    return await eventually(routed)


async def settled(consumers: list[PushConsumer], queues: list[MessageQueue]) -> None:
    """Wait until the consumers' assignments of ``queues`` partition them."""

    async def partitioned() -> bool:
        owned = [c.assignment() & set(queues) for c in consumers]
        return sum(map(len, owned)) == len(queues) and set().union(*owned) == set(queues)

    await eventually(partitioned, timeout_s=20)


@dataclass(frozen=True)
class Delivery:
    consumer: str
    body: bytes
    queue_id: int
    at: float


def consumer(
    namesrv: str, group: str, name: str, log: list[Delivery], **options: object
) -> PushConsumer:
    async def listener(msg: ReceivedMessage) -> None:
        log.append(Delivery(name, msg.body, msg.queue_id, time.monotonic()))
        await asyncio.sleep(0.001)

    return PushConsumer(
        group,
        namesrv=namesrv,
        listener=listener,
        instance_name=name,
        consume_from="first",
        rebalance_interval=1.0,
        **options,  # type: ignore[arg-type]
    )


async def test_orderly_consumers_keep_every_key_in_order(namesrv: str) -> None:
    keys = [f"key-{i}" for i in range(16)]
    steps = 20
    log: list[Delivery] = []
    async with Producer("pg-orderly", namesrv=namesrv) as producer:
        queues = await create_topic(producer, "OrderGroup")
        members = [consumer(namesrv, "cg-orderly", f"o{i}", log, orderly=True) for i in range(3)]
        for member in members:
            member.subscribe("OrderGroup")

        async def send(step_range: range) -> None:
            for step in step_range:
                for key in keys:
                    msg = Message("OrderGroup", f"{key}/{step}".encode(), keys=key)
                    await producer.send(msg, selector=select_by_hash, arg=key)

        await members[0].start()
        await members[1].start()
        await settled(members[:2], queues)
        await send(range(steps // 2))
        await members[2].start()  # joins while the first half is being consumed
        await send(range(steps // 2, steps))
        await settled(members, queues)
        await eventually(lambda: _all_done(log, len(keys) * steps), timeout_s=30)
        for member in members:
            await member.close()

    by_key: dict[str, list[int]] = defaultdict(list)
    consumers_of: dict[str, set[str]] = defaultdict(set)
    for d in log:
        key, step = d.body.decode().split("/")
        by_key[key].append(int(step))
        consumers_of[key].add(d.consumer)
    assert sorted(by_key) == sorted(keys)
    for key, seen in by_key.items():
        assert seen == list(range(steps)), key  # in order, each once
    assert len({d.consumer for d in log}) == 3  # all three consumed
    assert any(len(c) > 1 for c in consumers_of.values())  # some queue changed hands


async def _all_done(log: list[Delivery], count: int) -> bool:
    return len({d.body for d in log}) >= count


async def test_joining_and_leaving_loses_nothing(namesrv: str) -> None:
    log: list[Delivery] = []
    changes: list[float] = []  # when the membership changed
    sent: list[bytes] = []
    async with Producer("pg-balance", namesrv=namesrv) as producer:
        queues = await create_topic(producer, "Balance")
        stop = asyncio.Event()

        async def keep_sending() -> None:
            n = 0
            while not stop.is_set():
                body = b"flow-%d" % n
                await producer.send(Message("Balance", body))
                sent.append(body)
                n += 1
                await asyncio.sleep(0.003)

        members = {name: consumer(namesrv, "cg-balance", name, log) for name in ("a", "b", "c")}
        for member in members.values():
            member.subscribe("Balance")
        live: list[PushConsumer] = []

        async def change(name: str, join: bool) -> None:
            changes.append(time.monotonic())
            member = members[name]
            if join:
                await member.start()
                live.append(member)
            else:
                live.remove(member)
                await member.close()
            await settled(live, queues)
            await asyncio.sleep(0.3)

        sender = asyncio.ensure_future(keep_sending())
        await change("a", join=True)
        await change("b", join=True)
        await change("c", join=True)
        await change("a", join=False)
        await change("b", join=False)
        stop.set()
        await sender
        steady_from = len(sent)
        for i in range(300):  # steady state: only c, nobody joins or leaves
            body = b"steady-%d" % i
            await producer.send(Message("Balance", body))
            sent.append(body)
        await eventually(lambda: _all_done(log, len(sent)), timeout_s=30)
        await members["c"].close()

    first_seen: dict[bytes, Delivery] = {}
    duplicates: list[tuple[Delivery, Delivery]] = []
    per_consumer: set[tuple[str, bytes]] = set()
    for d in log:
        assert (d.consumer, d.body) not in per_consumer, f"{d.consumer} got {d.body!r} twice"
        per_consumer.add((d.consumer, d.body))
        if d.body in first_seen:
            duplicates.append((first_seen[d.body], d))
        else:
            first_seen[d.body] = d
    assert set(first_seen) == set(sent)  # nothing lost
    for first, again in duplicates:  # each one around a change of membership
        assert first.consumer != again.consumer
        assert any(first.at - 1.0 <= t <= again.at for t in changes), (first, again)
    steady = set(sent[steady_from:])
    assert sum(1 for d in log if d.body in steady) == len(steady)  # each exactly once
