"""Broker settings: one frozen dataclass with RocketMQ's key names and defaults.

Owns: BrokerConfig (identity, listen address, name servers, topic and group
auto-creation, long polling, property filters, timers, access control) holding the store's
StoreConfig and the TLS settings, and the loader that reads them from one ``broker.conf``.

Every key of a broker.conf must be claimed: by a BrokerConfig field (its file
key is in the field's comment or is the camelCase of its name), by the store
(``store.config.STORE_PROPERTY_KEYS``), by the TLS settings (``tls.*``,
``remoting.tls.TlsConfig``), or by :data:`IGNORED_KEYS`, the
RocketMQ settings that have no meaning here (thread pools, Netty buffers) and
are accepted so that an operator's existing file works. Anything else is a
ConfigError naming the key.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from apogee._util.props import bind, camel, load_properties, reject_unknown
from apogee.errors import ConfigError
from apogee.model.route import MASTER_ID, perm_is_valid
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.tls import TlsConfig, tls_config_from_properties
from apogee.store.config import STORE_PROPERTY_KEYS, BrokerRole, StoreConfig

DEFAULT_LISTEN_PORT = 10911
#: metricsExporterType values served here (RocketMQ also has OTLP_GRPC and LOG)
METRICS_EXPORTER_TYPES = frozenset({"DISABLE", "PROM"})


def parse_metrics_label(text: str) -> dict[str, str]:
    """``metricsLabel`` ("k1:v1,k2:v2") as a dict; ConfigError naming a bad pair."""
    labels: dict[str, str] = {}
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        key, sep, value = pair.partition(":")
        if not sep or not key.strip().isidentifier():
            raise ConfigError(f"metricsLabel: {pair!r} is not name:value")
        labels[key.strip()] = value.strip()
    return labels


#: RocketMQ broker.conf keys accepted and ignored: executor sizes and queue
#: capacities (Apogee serves every request on one event loop), Netty socket
#: tuning, and store switches whose behaviour Apogee has fixed.
IGNORED_KEYS = frozenset(
    {
        # executors and their queues
        "sendMessageThreadPoolNums",
        "pullMessageThreadPoolNums",
        "processReplyMessageThreadPoolNums",
        "queryMessageThreadPoolNums",
        "adminBrokerThreadPoolNums",
        "clientManageThreadPoolNums",
        "consumerManageThreadPoolNums",
        "heartbeatThreadPoolNums",
        "endTransactionThreadPoolNums",
        "sendThreadPoolQueueCapacity",
        "pullThreadPoolQueueCapacity",
        "replyThreadPoolQueueCapacity",
        "queryThreadPoolQueueCapacity",
        "clientManagerThreadPoolQueueCapacity",
        "consumerManagerThreadPoolQueueCapacity",
        "heartbeatThreadPoolQueueCapacity",
        "endTransactionPoolQueueCapacity",
        "waitTimeMillsInSendQueue",
        "waitTimeMillsInPullQueue",
        "waitTimeMillsInHeartbeatQueue",
        "waitTimeMillsInTransactionQueue",
        # Netty
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "serverPooledByteBufAllocatorEnable",
        "useEpollNativeSelector",
        # store switches with one fixed behaviour here
        "useReentrantLockWhenPutMessage",
        "transientStorePoolEnable",
        "transientStorePoolSize",
        "warmMapedFileEnable",
        "flushLeastPagesWhenWarmMapedFile",
        "fastFailIfNoBufferInStorePool",
        "duplicationEnable",
        # metrics: deltas and cardinality are OpenTelemetry settings; Prometheus pulls totals
        "metricsInDelta",
        "metricsOtelCardinalityLimit",
        # environment
        "rocketmqHome",
        "fetchNamesrvAddrByAddressServer",
    }
)

#: Store sub-directories RocketMQ lets an operator place elsewhere; Apogee
#: keeps them under storePathRootDir and accepts only those very paths.
_FIXED_STORE_PATHS = {
    "storePathCommitLog": "commitlog",
    "storePathConsumeQueue": "consumequeue",
    "storePathIndex": "index",
}


@dataclass(frozen=True)
class BrokerConfig:
    """What a broker process needs; defaults are RocketMQ 4.x BrokerConfig's."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = MASTER_ID
    # Address written into stored records and registered with name servers;
    # "" = the listen address when it is a specific one, else this host's.
    broker_ip1: str = field(default="", metadata={"key": "brokerIP1"})
    broker_ip2: str = field(default="", metadata={"key": "brokerIP2"})  # HA address
    listen_port: int = DEFAULT_LISTEN_PORT
    bind_address: str = "0.0.0.0"
    # The master's replication port; unset or <= 0: listenPort + 1 (any free port when
    # listenPort is 0).
    ha_listen_port: int | None = None
    namesrv_addr: str = ""  # "host:port;host:port"
    # replication (MessageStoreConfig keys; the broker owns the HA connections)
    ha_master_address: str = ""  # a slave's master HA address; "" = learned from name servers
    ha_send_heartbeat_interval_ms: int = field(
        default=5000, metadata={"key": "haSendHeartbeatInterval"}
    )
    ha_housekeeping_interval_ms: int = field(
        default=20_000, metadata={"key": "haHousekeepingInterval"}
    )
    ha_transfer_batch_size: int = 32 * 1024
    # SYNC_MASTER answers SLAVE_NOT_AVAILABLE when no slave is within this many bytes
    ha_max_gap_not_in_sync: int = field(
        default=256 * 1024 * 1024, metadata={"aliases": ("haSlaveFallbehindMax",)}
    )
    # Apogee only: how often a slave copies topics, groups and offsets from its master
    # (RocketMQ: every 10 s).
    slave_sync_interval_ms: int = 10_000
    # topics and groups
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    broker_permission: int = 6
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    # transactions (BrokerConfig: check period, age before a check, checks before discarding)
    reject_transaction_message: bool = False
    transaction_timeout_ms: int = field(default=6000, metadata={"key": "transactionTimeOut"})
    transaction_check_max: int = 15
    transaction_check_interval_ms: int = field(
        default=60_000, metadata={"key": "transactionCheckInterval"}
    )
    # pulls
    long_polling_enable: bool = True
    short_polling_time_ms: int = field(default=1000, metadata={"key": "shortPollingTimeMills"})
    slave_read_enable: bool = False
    default_query_max_num: int = 32
    # SQL92 subscriptions (MessageSelector.bySql); off, as in RocketMQ
    enable_property_filter: bool = False
    # retried messages filtered by the group's SQL92 subscription of their first topic
    filter_support_retry: bool = False
    # consume-queue units one filtered pull may scan (MessageStoreConfig's key)
    max_filter_message_count: int = 16000
    # index (MessageStoreConfig keys the store leaves to the broker)
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    # timers
    register_name_server_period_ms: int = field(
        default=30_000, metadata={"key": "registerNameServerPeriod"}
    )
    register_broker_timeout_ms: int = field(
        default=6000, metadata={"key": "registerBrokerTimeoutMills"}
    )
    flush_consumer_offset_interval_ms: int = field(
        default=5000, metadata={"key": "flushConsumerOffsetInterval"}
    )
    flush_delay_offset_interval_ms: int = field(
        default=10_000, metadata={"key": "flushDelayOffsetInterval"}
    )
    # A Java system property in RocketMQ; accepted in broker.conf under its name.
    rebalance_lock_max_live_time_ms: int = field(
        default=60_000, metadata={"key": "rocketmq.broker.rebalance.lockMaxLiveTime"}
    )
    server_channel_max_idle_time_s: int = field(
        default=120, metadata={"key": "serverChannelMaxIdleTimeSeconds"}
    )
    # bounds on what clients can make the broker hold (see docs/reliability.md)
    max_connections: int = 0  # 0: derived from the process's file-descriptor limit
    max_pending_frame_bytes: int = 512 * 1024 * 1024  # partial frames, all connections
    frame_read_timeout_ms: int = 30_000  # a frame begun must be complete by then
    max_write_buffer_bytes: int = 64 * 1024 * 1024  # answers a client has not read
    max_parked_pulls: int = 100_000
    max_parked_pulls_per_connection: int = 1000
    pull_hold_check_interval_ms: int = 5000  # parked pulls checked against max offsets
    # Prometheus metrics (RocketMQ 5's keys): PROM serves /metrics; DISABLE, as in RocketMQ
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""  # "": the listen address
    metrics_prom_exporter_port: int = 5557
    metrics_label: str = ""  # extra labels on every metric: "k1:v1,k2:v2"
    # send responses
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    # access control: plain_acl.yml, absolute or under $ROCKETMQ_HOME (a Java
    # system property in RocketMQ, accepted in broker.conf under its name)
    acl_enable: bool = False
    plain_acl_file: str = field(
        default="conf/plain_acl.yml", metadata={"key": "rocketmq.acl.plain.file"}
    )
    # the account this broker signs its name-server requests with (Apogee's keys)
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    store: StoreConfig = field(default_factory=lambda: StoreConfig(Path.home() / "store"))
    tls: TlsConfig = field(default_factory=TlsConfig)

    def __post_init__(self) -> None:
        if not perm_is_valid(self.broker_permission):
            raise ConfigError(f"brokerPermission must be 0..7, got {self.broker_permission}")
        if self.metrics_exporter_type not in METRICS_EXPORTER_TYPES:
            raise ConfigError(
                f"metricsExporterType={self.metrics_exporter_type} is not supported here; "
                f"use {' or '.join(sorted(METRICS_EXPORTER_TYPES))}"
            )
        parse_metrics_label(self.metrics_label)
        for key, value in (
            ("listenPort", self.listen_port),
            ("metricsPromExporterPort", self.metrics_prom_exporter_port),
        ):
            if not 0 <= value <= 65535:
                raise ConfigError(f"{key} must be 0..65535, got {value}")
        if self.ha_listen_port is not None and self.ha_listen_port > 65535:
            raise ConfigError(f"haListenPort must be at most 65535, got {self.ha_listen_port}")
        for key, value in (
            ("haSendHeartbeatInterval", self.ha_send_heartbeat_interval_ms),
            ("haHousekeepingInterval", self.ha_housekeeping_interval_ms),
            ("haTransferBatchSize", self.ha_transfer_batch_size),
            ("haMaxGapNotInSync", self.ha_max_gap_not_in_sync),
            ("slaveSyncIntervalMs", self.slave_sync_interval_ms),
            ("maxConnections", self.max_connections + 1),
            ("maxPendingFrameBytes", self.max_pending_frame_bytes),
            ("frameReadTimeoutMs", self.frame_read_timeout_ms),
            ("maxWriteBufferBytes", self.max_write_buffer_bytes),
            ("maxParkedPulls", self.max_parked_pulls),
            ("maxParkedPullsPerConnection", self.max_parked_pulls_per_connection),
            ("pullHoldCheckIntervalMs", self.pull_hold_check_interval_ms),
        ):
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        if self.default_topic_queue_nums < 1:
            raise ConfigError("defaultTopicQueueNums must be at least 1")
        for key, value in (
            ("transactionTimeOut", self.transaction_timeout_ms),
            ("transactionCheckInterval", self.transaction_check_interval_ms),
            ("transactionCheckMax", self.transaction_check_max),
        ):
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        if self.is_slave and self.broker_id <= MASTER_ID:
            raise ConfigError("a SLAVE broker needs brokerId > 0")
        if not self.is_slave and self.broker_id != MASTER_ID:
            raise ConfigError(f"a master broker must have brokerId 0, got {self.broker_id}")
        if bool(self.access_key) != bool(self.secret_key):
            raise ConfigError("accessKey and secretKey go together: set both or neither")
        for name in ("broker_cluster_name", "broker_name"):
            if not getattr(self, name):
                raise ConfigError(f"{name} must not be empty")

    # -- derived values -------------------------------------------------------

    @property
    def is_slave(self) -> bool:
        return self.store.broker_role is BrokerRole.SLAVE

    @property
    def is_sync_master(self) -> bool:
        return self.store.broker_role is BrokerRole.SYNC_MASTER

    @property
    def ha_port(self) -> int:
        """The port a master takes replication connections on (0: any free port)."""
        if self.ha_listen_port is not None and self.ha_listen_port > 0:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    @property
    def register_period_s(self) -> float:
        # RocketMQ clamps the period to 10..60 s.
        return max(10_000, min(self.register_name_server_period_ms, 60_000)) / 1000

    def broker_ip(self) -> str:
        """The address clients reach this broker at (brokerIP1)."""
        if self.broker_ip1:
            return self.broker_ip1
        if self.bind_address not in ("0.0.0.0", "::", ""):
            return self.bind_address
        return local_address()

    @property
    def credentials(self) -> SessionCredentials | None:
        """What the broker signs its requests to name servers with, if anything."""
        if not self.access_key:
            return None
        return SessionCredentials(self.access_key, self.secret_key)

    def with_port(self, port: int) -> BrokerConfig:
        """This config with the port actually bound (when listenPort was 0)."""
        return dataclasses.replace(self, listen_port=port)


def config_properties(config: BrokerConfig) -> dict[str, str]:
    """Every broker and store setting under its broker.conf key (GET_BROKER_CONFIG).

    Secrets (the broker's secretKey, TLS key passwords) are never listed.
    """
    out: dict[str, str] = {}
    for f in dataclasses.fields(BrokerConfig):
        if f.name not in _NOT_LISTED:
            out[f.metadata.get("key", camel(f.name))] = _text(getattr(config, f.name))
    for f in dataclasses.fields(TlsConfig):
        if "password" not in f.name:
            out[f.metadata["key"]] = _text(getattr(config.tls, f.name))
    for key, name in STORE_PROPERTY_KEYS.items():
        out[key] = _text(getattr(config.store, name))
    return dict(sorted(out.items()))


_NOT_LISTED = frozenset({"store", "tls", "secret_key"})


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    return "" if value is None else str(value)


def local_address() -> str:
    """This host's outward IPv4 address, as RocketMQ picks brokerIP1; 127.0.0.1 without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            # connect() on UDP sends nothing; it only selects the outgoing interface
            probe.connect(("192.0.2.1", 9))
            address: str = probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"
    return address


def _check_fixed_paths(props: Mapping[str, str], root: Path) -> set[str]:
    used = set()
    for key, sub in _FIXED_STORE_PATHS.items():
        if key not in props:
            continue
        if Path(props[key]).expanduser() != root / sub:
            raise ConfigError(f"{key} must be storePathRootDir/{sub} ({root / sub}), not elsewhere")
        used.add(key)
    return used


def broker_config_from_properties(
    props: Mapping[str, str],
    *,
    source: str = "",
    store_overrides: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> BrokerConfig:
    """Bind broker.conf-style pairs onto BrokerConfig and its StoreConfig.

    ``overrides`` replace broker fields and ``store_overrides`` store fields
    after the file is applied (command-line options win over the file).

    Raises:
        ConfigError: an unknown key or a bad value; the message names the key.
    """
    store = StoreConfig.from_properties(props, **dict(store_overrides or {}))
    if store.broker_role is BrokerRole.SLAVE:
        # As RocketMQ's BrokerStartup: a slave counts data as cold 10 points
        # earlier, since it serves the reads its master redirects to it.
        ratio = max(0, store.access_message_in_memory_max_ratio_percent - 10)
        store = dataclasses.replace(store, access_message_in_memory_max_ratio_percent=ratio)
    store_keys = {k for k in props if k in STORE_PROPERTY_KEYS}
    store_keys |= _check_fixed_paths(props, store.store_path_root_dir)
    tls, tls_keys = tls_config_from_properties(dict(props))
    base, used = bind(BrokerConfig(), props, {"store": store, "tls": tls})
    reject_unknown(props, used | store_keys | tls_keys, IGNORED_KEYS, source)
    return dataclasses.replace(base, **overrides) if overrides else base


def load_broker_config(
    path: Path | None,
    *,
    store_overrides: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> BrokerConfig:
    """Read ``path`` (None: defaults only) and apply the overrides."""
    props = load_properties(path) if path is not None else {}
    return broker_config_from_properties(
        props, source=str(path or ""), store_overrides=store_overrides, **overrides
    )
