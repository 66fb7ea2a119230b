"""The broker's Prometheus metrics, under RocketMQ 5's names and labels.

Owns: ``BrokerMetrics``, which turns the broker's parts into metric
families on each scrape (see ``apogee._util.prom`` for how a scrape reaches
the loop), and ``StorageSize``, the bytes of the store's files (read in the
HTTP thread: it only lists directories). Every family carries ``cluster``,
``node_type="broker"``, ``node_id=<brokerName>`` and the ``metricsLabel``
pairs.

RocketMQ 5's families (BrokerMetricsConstant, DefaultStoreMetricsConstant,
RemotingMetricsConstant):

* traffic: ``rocketmq_messages_in_total`` and ``rocketmq_throughput_in_total``
  (bytes) per topic and message_type; ``rocketmq_messages_out_total`` and
  ``rocketmq_throughput_out_total`` per topic and consumer_group;
  ``rocketmq_message_size`` (histogram, bytes);
* state: ``rocketmq_topic_number``, ``rocketmq_consumer_group_number``,
  ``rocketmq_broker_permission``, ``rocketmq_processor_watermark`` (requests
  waiting per handler group);
* clients: ``rocketmq_producer_connections``, ``rocketmq_consumer_connections``;
* consumption: ``rocketmq_consumer_lag_messages`` and
  ``rocketmq_consumer_lag_latency`` (ms since the oldest unconsumed message
  was stored) per consumer_group and topic, ``rocketmq_send_to_dlq_messages_total``
  (messages the broker moved to a group's %DLQ% topic since it started, per
  consumer_group and original topic: a counter of moves, not the DLQ's
  contents), ``rocketmq_half_messages``;
* store: ``rocketmq_storage_size``, ``rocketmq_storage_flush_behind_bytes``,
  ``rocketmq_storage_dispatch_behind_bytes``, ``rocketmq_storage_message_reserve_time``;
* RPC: ``rocketmq_rpc_latency`` (histogram, ms) per request_code and response_code.

Apogee's own, for what RocketMQ has no name for: ``apogee_store_forced_deleted_files_total``
and ``apogee_store_forced_deleted_messages_total`` (cleaning forced by a full disk),
``apogee_store_disk_full`` (1 while writes wait for room),
``apogee_remoting_refused_connections_total`` (beyond maxConnections),
``apogee_remoting_refused_requests_total`` per request and response code,
``apogee_remoting_connections``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from apogee._util.prom import Families
from apogee.broker.clients import ClientRegistry
from apogee.broker.config import BrokerConfig, parse_metrics_label
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.runtime_stats import BrokerStats, earliest_message_time, version_desc
from apogee.broker.topics import TopicConfigManager
from apogee.broker.traffic import SIZE_BUCKETS
from apogee.broker.transaction_book import TransactionBook
from apogee.model.topic import RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.observe import RequestObserver, request_families, server_families
from apogee.remoting.server import RemotingServer
from apogee.store.interface import MessageStore

#: groups RocketMQ counts as its own (MixAll.CID_RMQ_SYS_PREFIX)
_SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"


def common_labels(config: BrokerConfig) -> dict[str, str]:
    return {
        **parse_metrics_label(config.metrics_label),
        "cluster": config.broker_cluster_name,
        "node_type": "broker",
        "node_id": config.broker_name,
    }


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _is_system(topic: str, group: str = "") -> str:
    return _bool(is_system_topic(topic) or group.lower().startswith(_SYSTEM_GROUP_PREFIX))


class BrokerMetrics:
    """Builds every family above from the broker's parts; runs on the loop."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        store: MessageStore,
        stats: BrokerStats,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        clients: ClientRegistry,
        transactions: TransactionBook,
        permission: BrokerPermission,
        requests: RequestObserver,
        server: RemotingServer,
        table: HandlerTable,
    ) -> None:
        self.f = Families(common_labels(config))
        self._store = store
        self._stats = stats
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._clients = clients
        self._transactions = transactions
        self._permission = permission
        self._requests = requests
        self._server = server
        self._table = table

    def build(self) -> Iterator[Metric]:
        yield from self._traffic()
        yield from self._state()
        yield from self._connections()
        yield from self._consumption()
        yield from self._store_figures()
        yield from request_families(self.f, self._requests)

    def _traffic(self) -> Iterator[Metric]:
        f, traffic = self.f, self._stats.traffic
        in_names = ("topic", "message_type", "is_system")

        def by_topic(table: dict[tuple[str, str], int]) -> Iterable[tuple[tuple[str, ...], float]]:
            return (((t, k, _is_system(t)), n) for (t, k), n in table.items())

        yield f.counter("rocketmq_messages_in_total", "Messages stored, per topic.", in_names,
                        by_topic(traffic.in_msgs))  # fmt: skip
        yield f.counter("rocketmq_throughput_in_total", "Body bytes stored, per topic.", in_names,
                        by_topic(traffic.in_bytes))  # fmt: skip
        yield f.histogram(
            "rocketmq_message_size", "Sizes of the bodies stored, in bytes.", SIZE_BUCKETS,
            names=("topic", "message_type"),
            samples=(((t, k), counts, traffic.in_bytes.get((t, k), 0))
                     for (t, k), counts in traffic.sizes.items()),
        )  # fmt: skip
        out_names = ("topic", "consumer_group", "is_retry", "is_system")

        def out(table: dict[tuple[str, str], int]) -> Iterable[tuple[tuple[str, ...], float]]:
            for (group, topic), n in table.items():
                retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                yield (topic, group, _bool(retry), _is_system(topic, group)), n

        yield f.counter("rocketmq_messages_out_total", "Messages pulled, per topic and group.",
                        out_names, out(traffic.out_msgs))  # fmt: skip
        yield f.counter("rocketmq_throughput_out_total", "Bytes pulled, per topic and group.",
                        out_names, out(traffic.out_bytes))  # fmt: skip

    def _state(self) -> Iterator[Metric]:
        f = self.f
        yield f.gauge("rocketmq_topic_number", "Topics of this broker.",
                      samples=[((), len(self._topics.table))])  # fmt: skip
        yield f.gauge("rocketmq_consumer_group_number", "Subscription groups of this broker.",
                      samples=[((), len(self._groups.table))])  # fmt: skip
        yield f.gauge("rocketmq_broker_permission", "Broker permission (2 W, 4 R, 6 RW).",
                      samples=[((), self._permission.value)])  # fmt: skip
        watermark = [((name,), len(g.waiting)) for name, g in self._table.groups().items()]
        yield f.gauge("rocketmq_processor_watermark", "Requests waiting per handler group.",
                      ("processor",), watermark)  # fmt: skip

    def _connections(self) -> Iterator[Metric]:
        f = self.f
        producers: dict[tuple[str, ...], int] = {}
        for channels in self._clients.producers.values():
            for c in channels.values():
                key = (c.language.lower(), version_desc(c.version).lower(), "remoting")
                producers[key] = producers.get(key, 0) + 1
        yield f.gauge("rocketmq_producer_connections", "Producer connections.",
                      ("language", "version", "protocol_type"), producers.items())  # fmt: skip
        consumers: dict[tuple[str, ...], int] = {}
        for group, info in self._clients.consumers.items():
            mode = info.consume_type.name.lower()
            for c in info.channels.values():
                labels = (group, c.language.lower(), version_desc(c.version).lower(), mode)
                consumers[labels] = consumers.get(labels, 0) + 1
        yield f.gauge(
            "rocketmq_consumer_connections", "Consumer connections, per group.",
            ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"),
            (((*key, "remoting", _is_system("", key[0])), n) for key, n in consumers.items()),
        )  # fmt: skip
        yield from server_families(f, self._server)

    def _consumption(self) -> Iterator[Metric]:
        f, store = self.f, self._store
        now = int(time.time() * 1000)
        lag_names = ("consumer_group", "topic", "is_retry", "is_system")
        lags: list[tuple[tuple[str, ...], float]] = []
        latencies: list[tuple[tuple[str, ...], float]] = []
        for group, topic in sorted(self._offsets.groups_and_topics()):
            if self._topics.select(topic) is None:
                continue
            lag, oldest = 0, 0
            for queue_id, offset in self._offsets.queue_offsets(group, topic).items():
                behind = max(store.max_offset_in_queue(topic, queue_id) - max(offset, 0), 0)
                if behind:
                    lag += behind
                    stored = store.message_store_time(topic, queue_id, max(offset, 0))
                    if stored > 0 and (oldest == 0 or stored < oldest):
                        oldest = stored
            labels = (group, topic, _bool(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                      _is_system(topic, group))  # fmt: skip
            lags.append((labels, lag))
            latencies.append((labels, max(now - oldest, 0) if oldest else 0))
        yield f.gauge("rocketmq_consumer_lag_messages", "Messages not yet consumed.",
                      lag_names, lags)  # fmt: skip
        yield f.gauge("rocketmq_consumer_lag_latency",
                      "Milliseconds since the oldest unconsumed message was stored.",
                      lag_names, latencies)  # fmt: skip
        dlq = (((group, topic, _is_system(topic, group)), n)
               for (group, topic), n in self._stats.traffic.dead_lettered.items())  # fmt: skip
        yield f.counter("rocketmq_send_to_dlq_messages_total",
                        "Messages moved to a group's dead-letter queue.",
                        ("consumer_group", "topic", "is_system"), dlq)  # fmt: skip
        yield f.gauge("rocketmq_half_messages", "Open transactions (half messages).",
                      samples=[((), self._transactions.open_count)])  # fmt: skip

    def _store_figures(self) -> Iterator[Metric]:
        f, figures = self.f, self._store.runtime_stats()
        max_offset = figures.get("commit_log_max_offset", 0)
        flushed = figures.get("commit_log_flushed_offset", max_offset)
        yield f.gauge("rocketmq_storage_flush_behind_bytes", "Commit-log bytes not yet synced.",
                      samples=[((), max(max_offset - flushed, 0))])  # fmt: skip
        yield f.gauge("rocketmq_storage_dispatch_behind_bytes",
                      "Commit-log bytes not yet in consume queues.",
                      samples=[((), figures.get("dispatch_behind_bytes", 0))])  # fmt: skip
        earliest = self._earliest_store_time()
        reserve = int(time.time() * 1000) - earliest if earliest > 0 else 0
        yield f.gauge("rocketmq_storage_message_reserve_time",
                      "Milliseconds since the oldest stored message was stored.",
                      samples=[((), reserve)])  # fmt: skip
        yield f.counter("apogee_store_forced_deleted_files_total",
                        "Commit-log files deleted early because the disk was full.",
                        samples=[((), figures.get("forced_deleted_files", 0))])  # fmt: skip
        yield f.counter("apogee_store_forced_deleted_messages_total",
                        "Messages those files held.",
                        samples=[((), figures.get("forced_deleted_messages", 0))])  # fmt: skip
        yield f.gauge("apogee_store_disk_full", "1 while writes wait for disk room.",
                      samples=[((), figures.get("disk_full", 0))])  # fmt: skip

    def _earliest_store_time(self) -> int:
        return earliest_message_time(self._store)


class StorageSize(Collector):
    """``rocketmq_storage_size``: bytes of the store's files (read on the HTTP thread)."""

    def __init__(self, families: Families, root: Path) -> None:
        self.f = families
        self.root = root

    def collect(self) -> Iterable[Metric]:
        return [self.f.gauge("rocketmq_storage_size", "Bytes of the store's files.",
                             samples=[((), _tree_size(self.root))])]  # fmt: skip


def _tree_size(root: Path) -> int:
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(directory, name)).st_size
            except OSError:  # deleted between the listing and the stat
                continue
    return total
