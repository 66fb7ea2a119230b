"""Publish queues from a route, the TBW102 fallback, and the queue each attempt takes."""

from __future__ import annotations

import collections

from apogee.client.latency import LatencyFaultTable
from apogee.client.publish import PublishInfo, choose_queue, default_route, publish_info
from apogee.model.client import MessageQueue
from apogee.model.route import PERM_READ, PERM_RW, BrokerData, QueueData, TopicRouteData


def route(*queues: QueueData, no_master: tuple[str, ...] = ()) -> TopicRouteData:
    brokers = tuple(
        BrokerData("c", q.broker_name, {1: "h:2"} if q.broker_name in no_master else {0: "h:1"})
        for q in queues
    )
    return TopicRouteData(queue_datas=queues, broker_datas=brokers)


def names(info: PublishInfo) -> list[tuple[str, int]]:
    return [(q.broker_name, q.queue_id) for q in info.queues]


def test_writable_master_queues_sorted_by_broker() -> None:
    r = route(
        QueueData("broker-b", 4, 2, PERM_RW),
        QueueData("broker-a", 4, 3, PERM_RW),
        QueueData("broker-c", 4, 4, PERM_READ),  # write permission wiped
        QueueData("broker-d", 4, 4, PERM_RW),  # no master
        no_master=("broker-d",),
    )
    info = publish_info("T", r)
    a_queues = [("broker-a", 0), ("broker-a", 1), ("broker-a", 2)]
    assert names(info) == [*a_queues, ("broker-b", 0), ("broker-b", 1)]
    assert all(q.topic == "T" for q in info.queues)
    assert not info.from_default


def test_order_topic_configuration_decides_the_queues() -> None:
    r = TopicRouteData((), (), order_topic_conf="broker-b:2;broker-a:1")
    assert names(publish_info("T", r)) == [("broker-b", 0), ("broker-b", 1), ("broker-a", 0)]


def test_the_default_route_is_narrowed_to_the_default_queue_count() -> None:
    tbw = route(QueueData("broker-a", 8, 8, 7), QueueData("broker-b", 2, 8, 7))
    info = publish_info("New", default_route(tbw, 4), from_default=True)
    assert names(info) == [*(("broker-a", i) for i in range(4)), ("broker-b", 0), ("broker-b", 1)]
    assert info.from_default


def two_brokers() -> PublishInfo:
    queues = tuple(MessageQueue("T", b, i) for b in ("broker-a", "broker-b") for i in range(2))
    return PublishInfo("T", queues, index=0)


def test_round_robin_visits_every_queue_evenly() -> None:
    info = two_brokers()
    counts = collections.Counter(choose_queue(info) for _ in range(400))
    assert set(counts.values()) == {100}


def test_a_retry_avoids_the_broker_that_failed() -> None:
    info = two_brokers()
    for _ in range(10):
        assert choose_queue(info, last_broker="broker-a").broker_name == "broker-b"
    only_a = PublishInfo("T", (MessageQueue("T", "broker-a", 0),))
    assert choose_queue(only_a, last_broker="broker-a").broker_name == "broker-a"


def test_fault_tolerance_skips_brokers_the_table_avoids() -> None:
    info = two_brokers()
    table = LatencyFaultTable()
    table.update("broker-a", 0, now_ms=1_000, failed=True)
    picks = {choose_queue(info, None, table, 2_000).broker_name for _ in range(10)}
    assert picks == {"broker-b"}
    # once its time is up, broker-a takes its turn again
    later = {choose_queue(info, None, table, 602_000).broker_name for _ in range(10)}
    assert later == {"broker-a", "broker-b"}


def test_when_every_broker_is_avoided_the_least_bad_one_is_used() -> None:
    info = two_brokers()
    table = LatencyFaultTable()
    table.update("broker-a", 0, now_ms=0, failed=True)
    table.update("broker-b", 2_500, now_ms=0, failed=False)  # slow: avoided for 120 s
    picks = {choose_queue(info, None, table, 1_000) for _ in range(10)}
    assert {q.broker_name for q in picks} == {"broker-b"}
    assert {q.queue_id for q in picks} == {0, 1}
    # after a failure on broker-b the other one is tried, avoided or not
    assert choose_queue(info, "broker-b", table, 1_000).broker_name == "broker-a"
