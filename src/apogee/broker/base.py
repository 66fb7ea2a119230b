"""A broker's parts that come from its config alone, built before anything opens.

Owns: BrokerBase, the managers, client registry, handler table, server and
name-server client a Broker is made of besides its store and what is wired
to the store. Building one reads no file and binds no socket (the ACL and
TLS files are read and checked, so a bad one fails here); ``Broker.open``
loads, opens and starts the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee.acl.validator import AccessValidator
from apogee.broker.broker2client import Broker2Client
from apogee.broker.clients import ClientRegistry
from apogee.broker.config import BrokerConfig
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.locks import RebalanceLockManager
from apogee.broker.long_polling import PullHoldService
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.persistence import ManagerFiles
from apogee.broker.schedule_service import DelayOffsetTable
from apogee.broker.services import ConfigFiles
from apogee.broker.topics import TopicConfigManager, TopicDefaults
from apogee.broker.wiring import (
    access_validator,
    hold_service,
    namesrv_client_config,
    request_observer,
    server_config,
)
from apogee.remoting.client import RemotingClient
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.observe import RequestObserver
from apogee.remoting.server import RemotingServer


@dataclass(eq=False)
class BrokerBase:
    """The config-only parts of a broker (see the module docstring)."""

    config: BrokerConfig
    clock: Clock
    config_dir: Path
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    delay_offsets: DelayOffsetTable
    locks: RebalanceLockManager
    files: ConfigFiles
    managers: ManagerFiles
    holds: PullHoldService
    permission: BrokerPermission
    to_clients: Broker2Client
    clients: ClientRegistry
    acl: AccessValidator | None
    table: HandlerTable
    requests: RequestObserver
    server: RemotingServer
    namesrv_client: RemotingClient

    @classmethod
    def build(cls, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> BrokerBase:
        config_dir = config.store.store_path_root_dir / "config"
        topics = TopicConfigManager(TopicDefaults.from_config(config), clock)
        groups = SubscriptionGroupManager(clock, auto_create=config.auto_create_subscription_group)
        offsets = ConsumerOffsetManager(track_commits=config.is_slave)
        delay_offsets = DelayOffsetTable(len(config.store.delay_levels_ms))
        files = ConfigFiles()
        managers = ManagerFiles(
            config_dir, files, topics=topics, groups=groups, offsets=offsets,
            delay_offsets=delay_offsets,
        )  # fmt: skip
        holds = hold_service(config)
        to_clients = Broker2Client()
        clients = ClientRegistry(
            clock, to_clients.notify_consumer_ids_changed, groups.notify_enabled,
            property_filter=config.enable_property_filter,
        )  # fmt: skip
        acl = access_validator(config)
        table = HandlerTable()
        table.guard = acl.check if acl is not None else None
        table.observer = requests = request_observer()  # refusals, rpc latency
        server = RemotingServer(table, server_config(config))
        server.add_close_listener(holds.connection_closed)
        server.add_close_listener(clients.channel_closed)
        return cls(
            config, clock, config_dir, topics, groups, offsets, delay_offsets,
            RebalanceLockManager(clock, max_live_ms=config.rebalance_lock_max_live_time_ms),
            files, managers, holds, BrokerPermission(config.broker_permission), to_clients,
            clients, acl, table, requests, server, RemotingClient(namesrv_client_config(config)),
        )  # fmt: skip
