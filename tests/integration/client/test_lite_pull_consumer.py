"""The LitePullConsumer against a real name server and broker on 127.0.0.1 (in-process).

Assigned queues polled, every kind of seek, commits (explicit and automatic), what the
broker keeps as committed, pausing; subscribed topics shared by the group's consumers.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from apogee.broker.broker import Broker
from apogee.client import LitePullConsumer, Message, Producer
from apogee.errors import ClientError
from apogee.model.client import MessageQueue
from tests.integration.client.helpers import committed_offset

Cluster = tuple[str, Broker]
QUEUE = MessageQueue("Lite", "broker-a", 1)


async def send(namesrv: str, bodies: list[bytes], queue: MessageQueue = QUEUE) -> None:
    async with Producer("pg", namesrv=namesrv) as producer:
        for body in bodies:
            await producer.send(Message(queue.topic, body), queue=queue)


async def poll_bodies(consumer: LitePullConsumer, count: int) -> list[bytes]:
    """Poll until ``count`` messages came (a 5 s limit); their bodies in order."""
    out: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(out) < count and time.monotonic() < deadline:
        out += [m.body for m in await consumer.poll(timeout=0.5)]
    return out


def bodies(first: int, last: int) -> list[bytes]:
    return [b"l%d" % i for i in range(first, last + 1)]


async def test_assigned_queues_are_polled_sought_and_committed(cluster: Cluster) -> None:
    namesrv, _ = cluster
    await send(namesrv, bodies(0, 4))
    await asyncio.sleep(0.3)
    boundary = time.time()  # the message stored nearest to it is l5
    await send(namesrv, bodies(5, 9))

    async with LitePullConsumer(
        "lg", namesrv=namesrv, consume_from="first", auto_commit=False
    ) as consumer:
        consumer.assign([QUEUE])
        assert await poll_bodies(consumer, 10) == bodies(0, 9)
        assert consumer.position(QUEUE) == 10
        assert await consumer.committed(QUEUE) is None  # nothing committed yet
        await consumer.commit()
        assert await consumer.committed(QUEUE) == 10

        await consumer.seek(QUEUE, 3)
        assert await poll_bodies(consumer, 7) == bodies(3, 9)
        await consumer.seek_to_begin(QUEUE)
        first = await consumer.poll(timeout=2, max_messages=4)
        assert [m.body for m in first] == bodies(0, 3)
        assert consumer.position(QUEUE) == 4
        assert await poll_bodies(consumer, 6) == bodies(4, 9)  # the cut batch's rest
        await consumer.seek_by_timestamp(QUEUE, boundary)
        assert await poll_bodies(consumer, 5) == bodies(5, 9)

        await consumer.seek_to_end(QUEUE)
        assert await consumer.poll(timeout=0.2) == []
        await send(namesrv, [b"l10"])
        assert await poll_bodies(consumer, 1) == [b"l10"]
        assert await consumer.committed(QUEUE) == 10  # seeking never commits

        consumer.pause([QUEUE])
        assert consumer.paused() == {QUEUE}
        await send(namesrv, [b"l11"])
        assert await consumer.poll(timeout=0.3) == []
        consumer.resume([QUEUE])
        assert await poll_bodies(consumer, 1) == [b"l11"]

        with pytest.raises(ClientError, match="out of range"):
            await consumer.seek(QUEUE, 99)
        other = MessageQueue("Lite", "broker-a", 0)
        with pytest.raises(ClientError, match="not assigned"):
            await consumer.seek(other, 0)
        with pytest.raises(ClientError, match="subscribe or assign"):
            consumer.subscribe("Lite")
        assert await consumer.fetch_queues("Lite") == [
            MessageQueue("Lite", "broker-a", i) for i in range(4)
        ]
    assert await committed_offset(namesrv, "lg", QUEUE) == 10  # no auto commit at close


async def test_auto_commit_commits_what_earlier_polls_returned(cluster: Cluster) -> None:
    namesrv, _ = cluster
    await send(namesrv, bodies(0, 5))
    async with LitePullConsumer(
        "lg-auto", namesrv=namesrv, consume_from="first", auto_commit_interval=0.05
    ) as consumer:
        consumer.assign([QUEUE])
        assert await poll_bodies(consumer, 6) == bodies(0, 5)
        await asyncio.sleep(0.06)
        assert await consumer.poll(timeout=0.05) == []  # commits the positions
        await consumer.persist_offsets()
        assert await committed_offset(namesrv, "lg-auto", QUEUE) == 6
    await send(namesrv, [b"l6"])
    async with LitePullConsumer("lg-auto", namesrv=namesrv) as consumer:
        consumer.assign([QUEUE])
        assert await poll_bodies(consumer, 1) == [b"l6"]  # goes on from the commit
    assert await committed_offset(namesrv, "lg-auto", QUEUE) == 7  # committed at close


async def test_subscribing_consumers_share_the_topic(cluster: Cluster) -> None:
    namesrv, _ = cluster
    async with Producer("pg", namesrv=namesrv) as producer:
        for i in range(20):
            await producer.send(Message("Shared", b"s%d" % i))
    consumers = [
        LitePullConsumer("lg-shared", namesrv=namesrv, consume_from="first", instance_name=name)
        for name in ("one", "two")
    ]
    for consumer in consumers:
        consumer.subscribe("Shared")
        await consumer.start()
    try:
        for consumer in consumers:
            await consumer.rebalance()  # both see both members now
        got: list[list[bytes]] = [[], []]
        deadline = time.monotonic() + 5
        while sum(map(len, got)) < 20 and time.monotonic() < deadline:
            for i, consumer in enumerate(consumers):
                got[i] += [m.body for m in await consumer.poll(timeout=0.1)]
        assignments = [c.assignment() for c in consumers]
    finally:
        for consumer in consumers:
            await consumer.close()
    assert [len(a) for a in assignments] == [2, 2] and not assignments[0] & assignments[1]
    assert sorted(got[0] + got[1]) == sorted(b"s%d" % i for i in range(20))
    assert got[0] and got[1]
