"""Building the broker's store, registrar and request handlers from its config and parts.

Owns: which collaborators each handler gets, and the settings each part is
given from BrokerConfig. The composition root (``broker.py``) owns the parts
and their lifecycle and calls these builders at start. No business logic.
This is the one module that builds a FileMessageStore.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from apogee._util.clock import Clock
from apogee._util.prom import Build, PromExporter
from apogee.acl.validator import AccessValidator, plain_acl_path
from apogee.broker.broker2client import Broker2Client
from apogee.broker.clients import ClientRegistry
from apogee.broker.config import BrokerConfig, config_properties
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.ha.metadata import SlaveSync
from apogee.broker.ha.role import MasterReplication, Replication, SlaveReplication
from apogee.broker.handlers import BrokerHandlers
from apogee.broker.handlers.acl import AclAdminHandlers, BrokerIdentityText
from apogee.broker.handlers.admin_consumer import ConsumerAdminHandlers
from apogee.broker.handlers.admin_group import (
    ClientViewHandlers,
    GroupAdminHandlers,
    GroupAdminSettings,
)
from apogee.broker.handlers.admin_runtime import ConfigUpdater, RuntimeHandlers
from apogee.broker.handlers.admin_topic import TopicAdminHandlers, TopicAdminSettings
from apogee.broker.handlers.consumer import (
    CheckClientConfigHandler,
    ConsumerListHandler,
    HeartbeatHandler,
    QueryConsumerOffsetHandler,
    UnregisterClientHandler,
    UpdateConsumerOffsetHandler,
)
from apogee.broker.handlers.end_transaction import EndTransactionHandler, EndTransactionSettings
from apogee.broker.handlers.locks import LockHandlers
from apogee.broker.handlers.pull import PullHandler, PullSettings
from apogee.broker.handlers.query import MessageLookupHandlers, QueueOffsetHandlers
from apogee.broker.handlers.send import Replicas, SendHandler, SendSettings
from apogee.broker.handlers.send_back import SendBackHandler, SendBackSettings
from apogee.broker.locks import RebalanceLockManager
from apogee.broker.long_polling import PullHoldService
from apogee.broker.metrics import BrokerMetrics, StorageSize
from apogee.broker.offset_moved import OffsetMovedRecorder
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.registration import BrokerIdentity, NamesrvRegistrar
from apogee.broker.runtime_stats import BrokerStats, runtime_table
from apogee.broker.schedule_service import DelayOffsetTable
from apogee.broker.topics import TopicConfigManager
from apogee.broker.transaction_book import TransactionBook
from apogee.broker.transaction_service import TransactionCheckService, TransactionSettings
from apogee.codes import RequestCode, ResponseCode
from apogee.model.message import HostPort
from apogee.model.route import DataVersion
from apogee.protocol.bodies import TopicConfigWrapper
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig, ServerConfig
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.limits import ServerLimits, connections_for_fd_limit
from apogee.remoting.observe import RequestObserver
from apogee.remoting.server import RemotingServer
from apogee.remoting.tls import client_context, server_context
from apogee.store.file_store import FileMessageStore
from apogee.store.index_service import IndexService
from apogee.store.interface import ArrivalListener, MessageStore
from apogee.store.recovery import RecoveryProgress

log = logging.getLogger(__name__)


class BrokerView(Protocol):
    """What the metrics read of a started broker."""

    config: BrokerConfig
    metrics_exporter: PromExporter | None
    stats: BrokerStats
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientRegistry
    transactions: TransactionBook
    permission: BrokerPermission
    requests: RequestObserver
    server: RemotingServer
    table: HandlerTable


#: answers that are outcomes of a question, not refusals of a client (no warning logged)
NORMAL_ANSWERS = (
    (RequestCode.GET_CONSUMER_CONNECTION_LIST, ResponseCode.CONSUMER_NOT_ONLINE),
    (RequestCode.GET_PRODUCER_CONNECTION_LIST, ResponseCode.SYSTEM_ERROR),
    (RequestCode.GET_CONSUMER_LIST_BY_GROUP, ResponseCode.SYSTEM_ERROR),
)


def request_observer() -> RequestObserver:
    return RequestObserver("apogee.broker.refusals", normal=NORMAL_ANSWERS)


@dataclass(frozen=True, slots=True)
class BrokerParts:
    """The long-lived state the handlers work on (owned by the Broker)."""

    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientRegistry
    holds: PullHoldService
    locks: RebalanceLockManager
    delay_offsets: DelayOffsetTable
    permission: BrokerPermission
    transactions: TransactionBook
    acl: AccessValidator | None = None


def access_validator(config: BrokerConfig) -> AccessValidator | None:
    """The ACL check of ``aclEnable=true`` (loads plain_acl.yml or raises ConfigError)."""
    if not config.acl_enable:
        return None
    return AccessValidator(plain_acl_path(config.plain_acl_file))


def namesrv_client_config(config: BrokerConfig) -> ClientConfig:
    """How the broker reaches name servers: TLS if ``tls.enable``, signed if it has keys."""
    return ClientConfig(ssl_context=client_context(config.tls), credentials=config.credentials)


def open_store(
    config: BrokerConfig,
    clock: Clock,
    arrival: ArrivalListener | None,
    progress: RecoveryProgress | None = None,
) -> FileMessageStore:
    """Open (and recover) the store with the index the config asks for; blocking."""
    index = None
    if config.message_index_enable:
        index = IndexService(
            config.store.index_dir,
            max_hash_slot_num=config.max_hash_slot_num,
            max_index_num=config.max_index_num,
            clock=clock,
        )
    return FileMessageStore.open(
        config.store, clock=clock, index=index, arrival=arrival, recovery_progress=progress
    )


def registrar_for(
    config: BrokerConfig,
    client: RemotingClient,
    address: str,
    ip: str,
    topics: Callable[[], TopicConfigWrapper],
    *,
    ha_port: int,
) -> NamesrvRegistrar:
    ha_ip = config.broker_ip2 or ip
    identity = BrokerIdentity(
        config.broker_cluster_name,
        config.broker_name,
        config.broker_id,
        address,
        f"{ha_ip}:{ha_port}",
    )
    return NamesrvRegistrar(
        client,
        config.namesrv_addrs,
        identity,
        topics,
        timeout_s=config.register_broker_timeout_ms / 1000,
    )


def build_replication(
    config: BrokerConfig,
    store: FileMessageStore,
    parts: BrokerParts,
    *,
    client: RemotingClient,
    registrar: NamesrvRegistrar,
    ask_master: Callable[[], None],
    on_appended: Callable[[], None],
    clock: Clock,
) -> Replication:
    """A master's HA port and SYNC_MASTER waiters, or a slave's HA client and metadata copy.

    A slave's master is the one ``haMasterAddress`` names, else the one the name
    servers named in their last registration answer.
    """
    if not config.is_slave:
        return MasterReplication(config, store.replication_source(), clock)
    sync = SlaveSync(
        client,
        lambda: registrar.master_addr,
        topics=parts.topics,
        groups=parts.groups,
        offsets=parts.offsets,
        delay_offsets=parts.delay_offsets,
    )
    configured = config.ha_master_address
    return SlaveReplication(
        config,
        store,
        sync,
        ha_master=lambda: configured or registrar.ha_server_addr,
        ask_master=ask_master,
        on_appended=on_appended,
        clock=clock,
    )


def build_handlers(
    config: BrokerConfig,
    store: MessageStore,
    parts: BrokerParts,
    *,
    store_host: HostPort,
    stats: BrokerStats,
    register: Callable[[], Awaitable[object]],
    on_stored: Callable[[], None],
    started_ms: int,
    clock: Clock,
    to_clients: Broker2Client,
    replicas: Replicas | None = None,
) -> BrokerHandlers:
    p = parts
    admin_topic = TopicAdminSettings(config.broker_name, config.is_slave)
    admin_group = GroupAdminSettings(config.broker_name, config.is_slave)
    return BrokerHandlers(
        send=SendHandler(
            store,
            p.topics,
            p.groups,
            SendSettings.from_config(config, store_host, p.permission),
            on_stored=on_stored,
            loop=asyncio.get_running_loop(),
            transactions=p.transactions,
            replicas=replicas,
            traffic=stats.traffic,
        ),
        send_back=SendBackHandler(
            store,
            p.topics,
            p.groups,
            SendBackSettings.from_config(config, store_host, p.permission),
            on_stored=on_stored,
            traffic=stats.traffic,
        ),
        end_transaction=EndTransactionHandler(
            store,
            p.transactions,
            EndTransactionSettings(store_host, config.is_slave),
            clock=clock,
            on_stored=on_stored,
        ),
        pull=PullHandler(
            store=store,
            topics=p.topics,
            groups=p.groups,
            clients=p.clients,
            offsets=p.offsets,
            holds=p.holds,
            settings=PullSettings.from_config(config, p.permission),
            count_found=stats.count_group_get,
            on_offset_moved=OffsetMovedRecorder(store, store_host, clock, on_stored),
        ),
        heartbeat=HeartbeatHandler(p.clients, p.groups, p.topics),
        unregister_client=UnregisterClientHandler(p.clients),
        check_client=CheckClientConfigHandler(property_filter=config.enable_property_filter),
        consumer_list=ConsumerListHandler(p.clients),
        query_consumer_offset=QueryConsumerOffsetHandler(p.offsets, store),
        update_consumer_offset=UpdateConsumerOffsetHandler(p.offsets),
        queue_offsets=QueueOffsetHandlers(store),
        lookups=MessageLookupHandlers(store, default_query_max_num=config.default_query_max_num),
        locks=LockHandlers(p.locks),
        topic_admin=TopicAdminHandlers(p.topics, p.offsets, store, admin_topic, register=register),
        group_admin=GroupAdminHandlers(p.groups, p.offsets, admin_group),
        client_views=ClientViewHandlers(
            p.topics, p.offsets, p.clients, store, admin_group, group_tps=stats.group_get_tps
        ),
        runtime=RuntimeHandlers(
            lambda: runtime_table(
                stats,
                store,
                store_dir=config.store.store_path_root_dir,
                delay_offsets=p.delay_offsets.table,
                role=config.store.broker_role.value,
            ),
            config_properties(config.with_port(store_host[1])),
            DataVersion(timestamp=started_ms),
            p.offsets,
            p.delay_offsets,
            updater=ConfigUpdater(p.permission, p.topics, register),
        ),
        acl=AclAdminHandlers(
            p.acl,
            BrokerIdentityText(
                config.broker_cluster_name, config.broker_name, f"{store_host[0]}:{store_host[1]}"
            ),
        ),
        consumer_admin=ConsumerAdminHandlers(
            config.broker_name,
            store=store,
            topics=p.topics,
            groups=p.groups,
            offsets=p.offsets,
            clients=p.clients,
            to_clients=to_clients,
            history=stats.history,
        ),
    )


def transaction_checker(
    config: BrokerConfig,
    store: MessageStore,
    parts: BrokerParts,
    to_clients: Broker2Client,
    *,
    store_host: HostPort,
    clock: Clock,
    on_stored: Callable[[], None],
) -> TransactionCheckService:
    settings = TransactionSettings(
        check_interval_s=config.transaction_check_interval_ms / 1000,
        timeout_ms=config.transaction_timeout_ms,
        check_max=config.transaction_check_max,
        max_age_ms=config.store.file_reserved_time_hours * 3600 * 1000,
    )
    return TransactionCheckService(
        store,
        parts.transactions,
        offsets=parts.offsets,
        topics=parts.topics,
        clients=parts.clients,
        to_clients=to_clients,
        settings=settings,
        store_host=store_host,
        clock=clock,
        on_stored=on_stored,
    )


def server_config(config: BrokerConfig) -> ServerConfig:
    """The remoting server's settings, with the bounds on what clients can make it hold."""
    limits = ServerLimits(
        max_connections=config.max_connections or connections_for_fd_limit(),
        max_pending_frame_bytes=config.max_pending_frame_bytes,
        frame_timeout_s=config.frame_read_timeout_ms / 1000,
        max_write_buffer_bytes=config.max_write_buffer_bytes,
    )
    return ServerConfig(
        config.bind_address,
        config.listen_port,
        idle_timeout_s=float(config.server_channel_max_idle_time_s),
        limits=limits,
        tls_mode=config.tls.mode,
        ssl_context=server_context(config.tls),
    )


def hold_service(config: BrokerConfig) -> PullHoldService:
    """Parked pulls, bounded as the config says."""
    return PullHoldService(
        max_parked=config.max_parked_pulls,
        max_per_connection=config.max_parked_pulls_per_connection,
        check_interval_s=config.pull_hold_check_interval_ms / 1000,
    )


def start_metrics(config: BrokerConfig, build: Build) -> PromExporter | None:
    """The /metrics server metricsExporterType=PROM asks for, serving ``build``; else None."""
    if config.metrics_exporter_type != "PROM":
        return None
    exporter = PromExporter(
        config.metrics_prom_exporter_host or config.bind_address,
        config.metrics_prom_exporter_port,
    )
    exporter.add(build)
    exporter.start()
    log.info("metrics at http://%s:%d/metrics", exporter.host, exporter.port)
    return exporter


def broker_metrics(broker: BrokerView, store: FileMessageStore) -> BrokerMetrics | None:
    """The families of a started broker, and the storage size read on the HTTP thread."""
    if broker.metrics_exporter is None:
        return None
    metrics = BrokerMetrics(
        broker.config, store=store, stats=broker.stats, topics=broker.topics,
        groups=broker.groups, offsets=broker.offsets, clients=broker.clients,
        transactions=broker.transactions, permission=broker.permission,
        requests=broker.requests, server=broker.server, table=broker.table,
    )  # fmt: skip
    root = broker.config.store.store_path_root_dir
    broker.metrics_exporter.add_threadsafe(StorageSize(metrics.f, root))
    return metrics
