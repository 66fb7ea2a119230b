"""The producer across two real ``apogee broker`` processes and one name server: a broker
killed mid-stream (SIGKILL), a broker whose write permission is wiped, and the route
refresh a failed send asks for at once, long before the periodic one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.client import Message, Producer, SendResult
from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.model.route import TopicRouteData
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually

pytestmark = pytest.mark.slow

TOPIC = "Spread"
Brokers = tuple[str, BrokerProcess, BrokerProcess]


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    """A name server and broker-a, broker-b (processes), each serving TOPIC with 4 queues."""
    with NamesrvProcess(tmp_path / "ns") as ns:
        started: list[BrokerProcess] = []
        try:
            for name in ("broker-a", "broker-b"):
                proc = BrokerProcess(tmp_path / name, ns.address, properties={"brokerName": name})
                proc.start()
                started.append(proc)
            yield ns.address, started[0], started[1]
        finally:
            for proc in started:
                proc.stop()


async def serve_topic(namesrv: str, *procs: BrokerProcess) -> None:
    """Create TOPIC on each broker and wait until the name server routes it to all of them."""
    async with RemotingClient() as client:
        api, ns = BrokerApi(client), NamesrvApi(client, [namesrv])
        for proc in procs:
            await api.create_topic(proc.address, TopicConfig(TOPIC, 4, 4))

        async def routed() -> bool:
            route = await ns.get_route(TOPIC)
            return len(route.queue_datas) == len(procs)

        await eventually(routed, timeout_s=10)


def where(results: list[SendResult]) -> set[str]:
    return {r.message_queue.broker_name for r in results}


async def test_a_killed_broker_costs_one_retry_and_is_avoided_for_ten_minutes(
    brokers: Brokers, caplog: pytest.LogCaptureFixture
) -> None:
    namesrv, a, b = brokers
    await serve_topic(namesrv, a, b)
    caplog.set_level(logging.INFO, logger="apogee.client.producer")
    async with Producer("pg", namesrv=namesrv, latency_fault_tolerance=True) as producer:
        before = [await producer.send(Message(TOPIC, b"before-%d" % i)) for i in range(16)]
        assert where(before) == {"broker-a", "broker-b"}
        stop = asyncio.Event()
        after: list[SendResult] = []

        async def keep_sending() -> None:
            i = 0
            while not stop.is_set():
                after.append(await producer.send(Message(TOPIC, b"after-%d" % i)))
                i += 1

        sender = asyncio.ensure_future(keep_sending())
        await eventually(lambda: _at_least(after, 10))
        b.kill()  # mid-stream
        killed_at = len(after)
        await eventually(lambda: _at_least(after, killed_at + 40), timeout_s=20)
        stop.set()
        await sender  # raises if any send failed

        table = producer.fault_table
        assert table is not None
        left = table.unavailable_for_ms("broker-b", time.monotonic() * 1000)
        assert 590_000 < left <= 600_000
        assert table.is_available("broker-a", time.monotonic() * 1000)
    failed = [
        r for r in caplog.records if "send to" in r.getMessage() and "failed" in r.getMessage()
    ]
    assert len(failed) == 1, [r.getMessage() for r in failed]
    assert "broker-b" in failed[0].getMessage()
    assert where(after[killed_at + 1 :]) == {"broker-a"}


async def _at_least(items: list[SendResult], count: int) -> bool:
    return len(items) >= count


async def test_a_wiped_write_permission_moves_every_send_within_one_route_refresh(
    brokers: Brokers,
) -> None:
    namesrv, a, b = brokers
    await serve_topic(namesrv, a, b)
    async with Producer("pg", namesrv=namesrv, poll_namesrv_interval=0.2) as producer:
        routes = producer.instance.routes
        assert where([await producer.send(Message(TOPIC, b"x")) for _ in range(8)]) == {
            "broker-a",
            "broker-b",
        }
        async with RemotingClient() as client:
            wiped = await NamesrvApi(client, [namesrv]).wipe_write_perm("broker-b")
        assert wiped[namesrv] >= 1  # every topic of broker-b, system topics included
        # broker-b itself still takes writes: only the next route refresh moves the sends
        rounds = routes.rounds

        async def refreshed() -> bool:
            return routes.rounds >= rounds + 2  # one whole round began after the wipe

        await eventually(refreshed)
        later = [await producer.send(Message(TOPIC, b"y")) for _ in range(20)]
    assert where(later) == {"broker-a"}
    assert {r.message_queue.queue_id for r in later} == {0, 1, 2, 3}


async def test_a_failed_send_refreshes_the_route_at_once(brokers: Brokers) -> None:
    namesrv, a, b = brokers
    await serve_topic(namesrv, a, b)
    # no periodic refresh within the test, and no latency table steering sends away:
    # only the refresh a failed send asks for can take broker-b out of the round robin
    async with Producer("pg", namesrv=namesrv, poll_namesrv_interval=600) as producer:
        routes = producer.instance.routes
        assert where([await producer.send(Message(TOPIC, b"x")) for _ in range(8)]) == {
            "broker-a",
            "broker-b",
        }
        rounds = routes.rounds
        b.kill()  # the name server drops it as its connection closes

        async def unrouted() -> bool:
            async with RemotingClient() as client:
                route = await NamesrvApi(client, [namesrv]).get_route(TOPIC)
            return {q.broker_name for q in route.queue_datas} == {"broker-a"}

        await eventually(unrouted, timeout_s=10)
        assert {q.broker_name for q in _cached(producer).queue_datas} == {"broker-a", "broker-b"}
        # round robin over the 8 queues: one of the next 8 sends tries broker-b, fails, and
        # is sent again to broker-a
        first = [await producer.send(Message(TOPIC, b"y")) for _ in range(8)]

        async def refreshed() -> bool:
            return {q.broker_name for q in _cached(producer).queue_datas} == {"broker-a"}

        await eventually(refreshed)
        later = [await producer.send(Message(TOPIC, b"z")) for _ in range(20)]
        assert routes.rounds == rounds  # not the periodic refresh
    assert where(first) == where(later) == {"broker-a"}
    assert {r.message_queue.queue_id for r in later} == {0, 1, 2, 3}


def _cached(producer: Producer) -> TopicRouteData:
    route = producer.instance.routes.route(TOPIC)
    assert route is not None
    return route
