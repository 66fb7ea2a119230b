"""Where a producer may send a topic's messages, and which queue the next send takes.

Owns: PublishInfo (a topic's writable queues on master brokers, from its
route), ``default_route`` (the TBW102 route narrowed for a topic that has no
route yet) and ``choose_queue`` (round robin, avoiding the broker the last
attempt failed on and, with a LatencyFaultTable, the brokers it marks). Pure.

Rules (Java MQClientInstance.topicRouteData2TopicPublishInfo, TopicPublishInfo,
MQFaultStrategy):
* queues come from the writable queue datas, sorted by broker name, whose
  broker has a master; queue ids 0 .. writeQueueNums - 1 each. A topic with
  an ordering configuration ("brokerA:4;brokerB:4", orderTopicConf) takes
  its queues from it instead, in its order;
* a topic without a route borrows the TBW102 route, each broker's queue
  count cut to min(defaultTopicQueueNums, its read queue count): the first
  send makes the broker create the topic with that many queues;
* round robin starts at a random queue; a retry skips queues of the broker
  that just failed when another broker has one; with fault tolerance, the
  first queue whose broker the table marks available wins, else a queue of
  the least bad broker (``LatencyFaultTable.pick_one_at_least``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from apogee.client.latency import LatencyFaultTable
from apogee.model.client import MessageQueue
from apogee.model.route import TopicRouteData, writeable


@dataclass(slots=True)
class PublishInfo:
    """A topic's queues a producer may write to, and its round-robin position."""

    topic: str
    queues: tuple[MessageQueue, ...]
    #: built from the TBW102 route: the topic itself has no route yet
    from_default: bool = False
    index: int = field(default_factory=lambda: random.randrange(1 << 16))

    @property
    def broker_names(self) -> set[str]:
        return {q.broker_name for q in self.queues}

    def queues_of(self, broker_name: str) -> list[MessageQueue]:
        return [q for q in self.queues if q.broker_name == broker_name]


def publish_info(topic: str, route: TopicRouteData, *, from_default: bool = False) -> PublishInfo:
    """The writable master queues of ``route`` for ``topic``."""
    queues: list[MessageQueue] = []
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, count = item.partition(":")
            if name and count.strip().isdigit():
                queues += (MessageQueue(topic, name, i) for i in range(int(count)))
        return PublishInfo(topic, tuple(queues), from_default)
    with_master = {b.broker_name for b in route.broker_datas if b.master_addr()}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if writeable(qd.perm) and qd.broker_name in with_master:
            queues += (MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return PublishInfo(topic, tuple(queues), from_default)


def default_route(route: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """The TBW102 ``route`` with every broker's queue count cut to ``queue_nums`` at most."""
    datas = tuple(
        replace(qd, read_queue_nums=n, write_queue_nums=n)
        for qd in route.queue_datas
        for n in (min(queue_nums, qd.read_queue_nums),)
    )
    return replace(route, queue_datas=datas)


def choose_queue(
    info: PublishInfo,
    last_broker: str | None = None,
    faults: LatencyFaultTable | None = None,
    now_ms: float = 0.0,
) -> MessageQueue:
    """The queue the next attempt of a send goes to; ``info.queues`` must not be empty."""
    queues = info.queues
    n = len(queues)
    if faults is None and last_broker is None:
        info.index += 1
        return queues[info.index % n]
    if faults is not None:
        for _ in range(n):
            info.index += 1
            mq = queues[info.index % n]
            if mq.broker_name != last_broker and faults.is_available(mq.broker_name, now_ms):
                return mq
        names = info.broker_names
        others = names - {last_broker} if last_broker is not None else names
        least_bad = faults.pick_one_at_least(now_ms, others or names)
        if least_bad is not None:
            own = info.queues_of(least_bad)
            info.index += 1
            return own[info.index % len(own)]
    for _ in range(n):
        info.index += 1
        mq = queues[info.index % n]
        if mq.broker_name != last_broker:
            return mq
    info.index += 1
    return queues[info.index % n]
