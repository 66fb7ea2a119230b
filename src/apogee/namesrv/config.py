"""NameServer settings and their ``namesrv.conf`` keys.

Owns: NamesrvConfig (RocketMQ key names; units in field names) and its
loading from a properties file.

Access control and TLS are Apogee's additions to a name server (RocketMQ
4.x has neither there): ``aclEnable`` with ``rocketmq.acl.plain.file`` as
for a broker, and the ``tls.*`` keys.

Keys RocketMQ's name server understands but Apogee has no use for (thread
pools, Netty buffers) are accepted and ignored, so an operator's existing
namesrv.conf loads; any other unknown key is an error that names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from apogee._util.props import bind, load_properties, reject_unknown
from apogee.errors import ConfigError
from apogee.remoting.tls import TlsConfig, tls_config_from_properties

#: RocketMQ name-server keys that are valid but change nothing here.
IGNORED_KEYS = frozenset(
    {
        "rocketmqHome",
        "configStorePath",
        "productEnvName",
        "clusterTest",
        "notifyMinBrokerIdChanged",
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "writeBufferHighWaterMark",
        "writeBufferLowWaterMark",
        "serverSocketBacklog",
        "serverPooledByteBufAllocatorEnable",
        "useEpollNativeSelector",
        "defaultThreadPoolNums",
        "clientRequestThreadPoolNums",
        "defaultThreadPoolQueueCapacity",
        "clientRequestThreadPoolQueueCapacity",
        "enableTopicList",
        "needWaitForService",
        "waitSecondsForService",
    }
)


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    bind_address: str = "0.0.0.0"
    listen_port: int = 9876
    #: KV config file (RocketMQ default ~/namesrv/kvConfig.json)
    kv_config_path: str = field(
        default_factory=lambda: str(Path.home() / "namesrv" / "kvConfig.json")
    )
    order_message_enable: bool = False
    enable_all_topic_list: bool = True
    return_order_topic_config_to_broker: bool = True
    #: how often silent brokers are looked for (RocketMQ 4.x scans every 10 s)
    scan_not_active_broker_interval_ms: int = field(
        default=10_000, metadata={"key": "scanNotActiveBrokerInterval"}
    )
    #: a broker not heard from for this long is dropped (BROKER_CHANNEL_EXPIRED_TIME)
    broker_channel_expired_time_ms: int = field(
        default=120_000, metadata={"key": "brokerChannelExpiredTime"}
    )
    #: idle client connections are closed after this long
    server_channel_max_idle_time_seconds: int = 120
    #: connections beyond it are closed at once (0: derived from the descriptor limit,
    #: as for a broker), so a flood of clients cannot use up the process's descriptors
    max_connections: int = 0
    #: access control (plain_acl.yml, absolute or under $ROCKETMQ_HOME)
    acl_enable: bool = False
    plain_acl_file: str = field(
        default="conf/plain_acl.yml", metadata={"key": "rocketmq.acl.plain.file"}
    )
    tls: TlsConfig = field(default_factory=TlsConfig)
    #: PROM serves /metrics on metricsPromExporterPort (the broker's keys); DISABLE: none
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""  # "": the listen address
    metrics_prom_exporter_port: int = 5557

    def __post_init__(self) -> None:
        if self.max_connections < 0:
            raise ConfigError(f"maxConnections must be at least 0, got {self.max_connections}")
        if self.metrics_exporter_type not in ("DISABLE", "PROM"):
            raise ConfigError(
                f"metricsExporterType={self.metrics_exporter_type} is not supported here; "
                "use DISABLE or PROM"
            )


def load_namesrv_config(path: Path | None, base: NamesrvConfig | None = None) -> NamesrvConfig:
    """``base`` (defaults) with the keys of ``path`` applied; unknown keys rejected."""
    config = base or NamesrvConfig()
    if path is None:
        return config
    props = load_properties(path)
    tls, tls_keys = tls_config_from_properties(props)
    config, used = bind(config, props)
    reject_unknown(props, used | tls_keys, IGNORED_KEYS, source=str(path))
    return replace(config, tls=tls) if tls_keys else config
