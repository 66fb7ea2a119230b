"""The name server's route tables: pure state, no I/O, no clock of its own.

Owns: which brokers exist (by name, cluster and id), which topics they serve
with how many queues and what permission, and when each broker last spoke.

Tables (as in RocketMQ's RouteInfoManager):

    topic_queue_table   topic       -> {broker name -> QueueData}
    broker_addr_table   broker name -> BrokerData (cluster, {broker id -> addr})
    cluster_addr_table  cluster     -> {broker name}
    broker_live_table   broker addr -> BrokerLive (last heard, timeout, version, channel)
    filter_server_table broker addr -> [filter server addr]

Rules kept here:
* queue data is rebuilt only from a master's registration (id 0), and only
  when it registers for the first time, its DataVersion changed, or it names
  a topic the table does not hold for it;
* a registration that reuses an address under another id replaces the old id
  (a slave promoted to master);
* a broker that is unregistered, expires or whose connection closes loses its
  address; when a broker name has no address left, its queue data goes too.

Callers pass ``now_ms`` in, so expiry is tested without waiting. The name
server runs on one event loop, so no locking is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from apogee.model.route import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicRouteData,
)
from apogee.model.topic import TopicConfig

BROKER_CHANNEL_EXPIRED_MS = 120_000


@dataclass(slots=True)
class BrokerLive:
    """What the name server remembers about one live broker address."""

    cluster: str
    last_update_ms: int
    timeout_ms: int
    data_version: DataVersion
    channel: Hashable | None
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """For slaves: where the master is and where its HA service listens."""

    master_addr: str | None = None
    ha_server_addr: str | None = None


@dataclass(slots=True)
class RouteTable:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLive] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    # -- registration -----------------------------------------------------

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        now_ms: int,
        data_version: DataVersion | None = None,
        topic_configs: Mapping[str, TopicConfig] | None = None,
        filter_server_list: list[str] | None = None,
        channel: Hashable | None = None,
        timeout_ms: int = BROKER_CHANNEL_EXPIRED_MS,
    ) -> RegisterResult:
        """Record a broker's (re-)registration; see the module rules."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        broker = self.broker_addr_table.get(broker_name)
        first = broker is None
        if broker is None:
            broker = BrokerData(cluster, broker_name, {})
            self.broker_addr_table[broker_name] = broker
        addrs = broker.broker_addrs
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]  # the same address now registers under a new role
        first = addrs.get(broker_id) is None or first
        addrs[broker_id] = broker_addr

        version = data_version or DataVersion()
        if topic_configs is not None and broker_id == MASTER_ID:
            changed = first or self._version_changed(broker_addr, version)
            for config in topic_configs.values():
                known = self.topic_queue_table.get(config.topic_name, {})
                if changed or broker_name not in known:
                    self._update_queue_data(broker_name, config)

        self.broker_live_table[broker_addr] = BrokerLive(
            cluster, now_ms, timeout_ms, version, channel, ha_server_addr
        )
        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master = addrs.get(MASTER_ID)
            if master is not None:
                master_live = self.broker_live_table.get(master)
                if master_live is not None:
                    return RegisterResult(master, master_live.ha_server_addr)
        return RegisterResult()

    def _version_changed(self, broker_addr: str, version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != version

    def _update_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        self.topic_queue_table.setdefault(config.topic_name, {})[broker_name] = QueueData(
            broker_name,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
        )

    def query_data_version(self, broker_addr: str, version: DataVersion, now_ms: int) -> bool:
        """QUERY_DATA_VERSION: tell whether ``version`` differs, and refresh liveness."""
        changed = self._version_changed(broker_addr, version)
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = now_ms
        return changed

    def touch(self, broker_addr: str, now_ms: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = now_ms

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker = self.broker_addr_table.get(broker_name)
        if broker is None:
            return
        broker.broker_addrs.pop(broker_id, None)
        if not broker.broker_addrs:
            self._forget_broker_name(broker_name, cluster)

    def _forget_broker_name(self, broker_name: str, cluster: str) -> None:
        self.broker_addr_table.pop(broker_name, None)
        names = self.cluster_addr_table.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster]
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    # -- liveness -----------------------------------------------------------

    def scan_not_active(self, now_ms: int) -> list[str]:
        """Drop brokers silent for longer than their timeout; return their addresses."""
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if live.last_update_ms + live.timeout_ms < now_ms
        ]
        for addr in expired:
            self.remove_broker_addr(addr)
        return expired

    def on_channel_closed(self, channel: Hashable) -> list[str]:
        """A connection closed: forget every broker address registered over it."""
        addrs = [a for a, live in self.broker_live_table.items() if live.channel == channel]
        for addr in addrs:
            self.remove_broker_addr(addr)
        return addrs

    def remove_broker_addr(self, broker_addr: str) -> None:
        live = self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for name, broker in list(self.broker_addr_table.items()):
            for broker_id in [i for i, a in broker.broker_addrs.items() if a == broker_addr]:
                del broker.broker_addrs[broker_id]
            if not broker.broker_addrs:
                self._forget_broker_name(name, live.cluster if live else broker.cluster)

    # -- queries ------------------------------------------------------------

    def route_for(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None when it has no queue data or no broker data."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        brokers: list[BrokerData] = []
        filters: dict[str, list[str]] = {}
        for name in sorted(queues):
            broker = self.broker_addr_table.get(name)
            if broker is None:
                continue
            brokers.append(BrokerData(broker.cluster, name, dict(broker.broker_addrs)))
            for addr in broker.broker_addrs.values():
                if addr in self.filter_server_table:
                    filters[addr] = list(self.filter_server_table[addr])
        if not brokers:
            return None
        queue_datas = tuple(queues[name] for name in sorted(queues))
        return TopicRouteData(queue_datas, tuple(brokers), filters)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {
                name: BrokerData(b.cluster, name, dict(b.broker_addrs))
                for name, b in self.broker_addr_table.items()
            },
            {cluster: sorted(names) for cluster, names in self.cluster_addr_table.items()},
        )

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(
            topic
            for topic, queues in self.topic_queue_table.items()
            if any(name in names for name in queues)
        )

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (RocketMQ's system topic list) and a master address."""
        topics: list[str] = []
        master: str | None = None
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(sorted(names))
        for broker in self.broker_addr_table.values():
            master = master or broker.master_addr()
        return topics, master

    # -- administration -------------------------------------------------------

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the write bit of every queue data of ``broker_name``; count them."""
        return self._change_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm(self, broker_name: str) -> int:
        """Give every queue data of ``broker_name`` read and write; count them."""
        return self._change_perm(broker_name, lambda _perm: PERM_READ | PERM_WRITE)

    def _change_perm(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            data = queues.get(broker_name)
            if data is not None:
                queues[broker_name] = data.with_perm(change(data.perm))
                count += 1
        return count

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Remove a topic, or only its queue data on ``cluster``'s brokers."""
        if cluster is None:
            self.topic_queue_table.pop(topic, None)
            return
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        for name in self.cluster_addr_table.get(cluster, set()):
            queues.pop(name, None)
        if not queues:
            del self.topic_queue_table[topic]

    def broker_names(self) -> Iterable[str]:
        return self.broker_addr_table.keys()
