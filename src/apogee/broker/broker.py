"""The Broker process: composition root.

Owns: building the store, managers, handlers and services from a
BrokerConfig, and starting and stopping them in order. No business logic:
every rule lives in the part that owns it.

Start: managers load ``<store>/config/*.json``; the listening sockets (and a
master's replication port) are bound first, so the addresses written into
every record and registered are known; /metrics starts
(metricsExporterType=PROM); the store opens and recovers (off the loop), is
dispatched to its end and the open transactions are rebuilt; handlers are
built (``wiring``) and registered (the ACL check first, with ``aclEnable``);
the server and a master's replication port start; background services start;
the broker registers with the name servers; a slave then replicates from the
master they name. Stop: no more registrations; parked pulls are answered;
SYNC_FLUSH and SYNC_MASTER sends get a moment, then replication stops
(waiters left get FLUSH_SLAVE_TIMEOUT); the server stops; the services stop;
the broker unregisters; configs and offsets are written; /metrics stops; the
store is flushed and closed (its abort file removed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client.core import Metric

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee._util.net import listen_socket
from apogee._util.periodic import PeriodicTask
from apogee._util.prom import PromExporter
from apogee.broker.broker2client import Broker2Client
from apogee.broker.clients import ClientRegistry
from apogee.broker.config import BrokerConfig
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.ha.role import Replication, register_ha_status
from apogee.broker.handlers.acl import acl_reload_task
from apogee.broker.locks import RebalanceLockManager
from apogee.broker.metrics import BrokerMetrics
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.permission import BrokerPermission
from apogee.broker.persistence import ManagerFiles
from apogee.broker.registration import RegistrationService
from apogee.broker.runtime_stats import BrokerStats
from apogee.broker.schedule_service import (
    DelayOffsetTable,
    ScheduleMessageService,
    ScheduleSettings,
)
from apogee.broker.services import ConfigFiles, DispatchDriver
from apogee.broker.topics import TopicConfigManager, TopicDefaults
from apogee.broker.transaction_book import TransactionBook
from apogee.broker.transaction_service import TransactionCheckService, recover_book
from apogee.broker.wiring import (
    BrokerParts,
    access_validator,
    broker_metrics,
    build_handlers,
    build_replication,
    hold_service,
    namesrv_client_config,
    open_store,
    registrar_for,
    request_observer,
    server_config,
    start_metrics,
    transaction_checker,
)
from apogee.protocol.bodies import TopicConfigWrapper
from apogee.remoting.client import RemotingClient
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.server import RemotingServer
from apogee.store.file_store import FileMessageStore
from apogee.store.recovery import RecoveryProgress

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
CLEAN_INTERVAL_S = 10.0
CONFIG_RETRY_INTERVAL_S = 5.0  # config files a full disk refused are written again
STATS_SAMPLE_INTERVAL_S = 1.0
STOP_DRAIN_S = 3.0


class Broker:
    """One broker: ``await start()``, serve, ``await stop()``."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        recovery_progress: RecoveryProgress | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.recovery_progress = recovery_progress
        self.config_dir = config.store.store_path_root_dir / "config"
        self.topics = TopicConfigManager(TopicDefaults.from_config(config), clock)
        self.groups = SubscriptionGroupManager(
            clock, auto_create=config.auto_create_subscription_group
        )
        self.offsets = ConsumerOffsetManager(track_commits=config.is_slave)
        self.delay_offsets = DelayOffsetTable(len(config.store.delay_levels_ms))
        self.locks = RebalanceLockManager(clock, max_live_ms=config.rebalance_lock_max_live_time_ms)
        self.files = ConfigFiles()
        self.managers = ManagerFiles(
            self.config_dir, self.files, topics=self.topics, groups=self.groups,
            offsets=self.offsets, delay_offsets=self.delay_offsets,
        )  # fmt: skip
        self.holds = hold_service(config)
        self.permission = BrokerPermission(config.broker_permission)
        self.to_clients = Broker2Client()
        self.clients = ClientRegistry(
            clock,
            self.to_clients.notify_consumer_ids_changed,
            self.groups.notify_enabled,
            property_filter=config.enable_property_filter,
        )
        self.acl = access_validator(config)
        self.table = HandlerTable()
        self.table.guard = self.acl.check if self.acl is not None else None
        self.requests = self.table.observer = request_observer()  # refusals, rpc latency
        self.server = RemotingServer(self.table, server_config(config))
        self.server.add_close_listener(self.holds.connection_closed)
        self.namesrv_client = RemotingClient(namesrv_client_config(config))
        self.store: FileMessageStore | None = None
        self.schedule: ScheduleMessageService | None = None
        self.transactions = TransactionBook()
        self.tx_check: TransactionCheckService | None = None
        self.stats: BrokerStats | None = None
        self.replication: Replication | None = None
        self.address = ""
        self._tasks: list[PeriodicTask] = []
        self._dispatch: DispatchDriver | None = None
        self._registration: RegistrationService | None = None
        self.metrics_exporter: PromExporter | None = None  # others may add families to it
        self._metrics: BrokerMetrics | None = None
        self._drain_sends: Callable[[float], Awaitable[bool]] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    # -- start -------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        self.managers.load()
        sock = listen_socket(config.bind_address, config.listen_port)  # the port goes into records
        ha_sock = None if config.is_slave else listen_socket(config.bind_address, config.ha_port)
        port = sock.getsockname()[1]
        ip = config.broker_ip()
        self.address, started_ms = f"{ip}:{port}", self.clock.now_ms()
        try:
            self.metrics_exporter = start_metrics(config, self._metric_families)
            self.store = store = await asyncio.to_thread(self._open_store)
            self.topics.adopt_stored(store.topics())
            self.transactions = await asyncio.to_thread(self._recover_transactions, store)
        except BaseException:
            for bound in filter(None, (sock, ha_sock)):
                bound.close()
            await self._abandon_start()
            raise
        store.start(loop_driven=True)
        self._dispatch = DispatchDriver(store.dispatch_step, completions=store.group_commit)
        store.on_pending_commit(self._dispatch.kick)
        ha_port = ha_sock.getsockname()[1] if ha_sock is not None else config.ha_port
        self._registration = self._make_registration(ip, ha_port)
        self._wire(store, (ip, port), started_ms)
        self._metrics = broker_metrics(self, store)
        await self.server.start(sock)
        assert self.replication is not None
        if ha_sock is not None:
            await self.replication.start(ha_sock)
        self._dispatch.start()
        if config.long_polling_enable:
            self.holds.start_checks(store.max_offset_in_queue)
        self._start_tasks(store)
        await self._registration.start()
        if ha_sock is None:
            await self.replication.start(None)
        log.info("broker %s (%s) serving at %s", config.broker_name, config.broker_cluster_name,
                 self.address)  # fmt: skip

    async def _abandon_start(self) -> None:
        if self.metrics_exporter is not None:
            await self.metrics_exporter.stop()
        store, self.store = self.store, None
        if store is not None:
            await asyncio.to_thread(store.close)

    def _metric_families(self) -> Iterator[Metric]:
        return iter(()) if self._metrics is None else self._metrics.build()

    def _open_store(self) -> FileMessageStore:
        arrival = self.holds.on_arrival if self.config.long_polling_enable else None
        return open_store(self.config, self.clock, arrival, self.recovery_progress)

    def _recover_transactions(self, store: FileMessageStore) -> TransactionBook:
        # Every half and op record must be in its consume queue before the scan.
        while store.dispatch_step(1024) >= 1024:
            pass
        return recover_book(store, self.offsets)

    def _wire(self, store: FileMessageStore, store_host: tuple[str, int], started_ms: int) -> None:
        assert self._dispatch is not None and self._registration is not None
        kick = self._dispatch.kick
        self.stats = stats = BrokerStats(store, self.clock)
        parts = BrokerParts(
            self.topics, self.groups, self.offsets, self.clients, self.holds, self.locks,
            self.delay_offsets, self.permission, self.transactions, self.acl,
        )  # fmt: skip
        self.replication = replication = build_replication(
            self.config, store, parts, client=self.namesrv_client, registrar=self.registrar,
            ask_master=self._registration.request, on_appended=kick, clock=self.clock,
        )  # fmt: skip
        self._dispatch.on_step = replication.wake
        register_ha_status(self.table, replication)
        self.schedule = ScheduleMessageService(
            store, self.delay_offsets, ScheduleSettings(self.config.store.delay_levels_ms),
            self.clock, on_stored=kick,
        )  # fmt: skip
        self.tx_check = transaction_checker(
            self.config, store, parts, self.to_clients,
            store_host=store_host, clock=self.clock, on_stored=kick,
        )  # fmt: skip
        handlers = build_handlers(
            self.config, store, parts, store_host=store_host, stats=stats,
            register=self._registration.register_now, on_stored=kick, started_ms=started_ms,
            clock=self.clock, to_clients=self.to_clients,
            replicas=getattr(replication, "transfer", None),
        )  # fmt: skip
        handlers.register(self.table)
        self._drain_sends = handlers.send.drain
        self.server.add_close_listener(self.clients.channel_closed)

    def _start_tasks(self, store: FileMessageStore) -> None:
        config = self.config
        assert self.stats is not None and self.schedule is not None and self.tx_check is not None
        offsets_s = config.flush_consumer_offset_interval_ms / 1000
        delays_s = config.flush_delay_offset_interval_ms / 1000
        self._tasks = [
            PeriodicTask("persist-offsets", offsets_s, self.managers.persist_offsets),
            PeriodicTask("persist-delay-offsets", delays_s, self.managers.persist_delay_offsets),
            PeriodicTask("retry-config-files", CONFIG_RETRY_INTERVAL_S, self.files.retry_unsaved),
            PeriodicTask("client-expiry", CLIENT_SCAN_INTERVAL_S, self.clients.scan_expired),
            PeriodicTask("store-clean", CLEAN_INTERVAL_S, store.clean_step),
            PeriodicTask("stats", STATS_SAMPLE_INTERVAL_S, self.stats.sample),
        ]
        if self.acl is not None:
            self._tasks.append(acl_reload_task(self.acl))
        for task in self._tasks:
            task.start()
        if not config.is_slave:  # a slave's store takes no puts; its master delivers
            self.schedule.start()
            self.tx_check.start()

    def _make_registration(self, ip: str, ha_port: int) -> RegistrationService:
        def topics() -> TopicConfigWrapper:  # as registered: masked by the broker's permission
            return self.permission.mask(self.topics.wrapper())

        self.registrar = registrar_for(
            self.config, self.namesrv_client, self.address, ip, topics, ha_port=ha_port
        )
        registration = RegistrationService(self.registrar, self.config.register_period_s)
        self.topics.add_listener(registration.request)
        return registration

    # -- stop ----------------------------------------------------------------------

    async def stop(self) -> None:
        if self.store is None:
            return
        if self._registration is not None:
            await self._registration.stop()
        self.holds.close()
        if self._drain_sends is not None and not await self._drain_sends(STOP_DRAIN_S):
            log.warning("stopping with sends still waiting for the disk or a slave")
        if self.replication is not None:
            await self.replication.stop()
        await self.server.stop()
        if self.schedule is not None:
            await self.schedule.stop()
        if self.tx_check is not None:
            await self.tx_check.stop()
        for task in self._tasks:
            await task.stop()
        if self._dispatch is not None:
            await self._dispatch.stop()
        await self.to_clients.close()
        if self._registration is not None:
            await self.registrar.unregister_all()
        await self.namesrv_client.close()
        try:
            unsaved = await self.managers.save_all()
            if unsaved:
                log.error("stopping without writing %s in %s: changes since the last write "
                          "are lost", ", ".join(unsaved), self.managers.directory)  # fmt: skip
        finally:
            # Whatever the config files did, the store closes: it removes its
            # abort file, so the next start does not recover as after a crash.
            await self._abandon_start()  # /metrics stops, the store closes
        log.info("broker %s stopped", self.config.broker_name)
