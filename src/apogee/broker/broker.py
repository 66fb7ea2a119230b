"""The Broker process: composition root.

Owns: building the store, managers, handlers and services from a
BrokerConfig, and starting and stopping them in order. No business logic:
every rule lives in the part that owns it. A Broker exists only started:
``await Broker.open(config)`` builds the config-only parts (``base``), opens
and wires the rest and starts them, so no part of it is ever missing.

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
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee._util.net import listen_socket
from apogee._util.periodic import PeriodicTask
from apogee._util.prom import PromExporter
from apogee.broker.base import BrokerBase
from apogee.broker.config import BrokerConfig
from apogee.broker.ha.role import Replication, register_ha_status
from apogee.broker.handlers.acl import acl_reload_task
from apogee.broker.metrics import BrokerMetrics
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.registration import NamesrvRegistrar, RegistrationService
from apogee.broker.runtime_stats import BrokerStats
from apogee.broker.schedule_service import ScheduleMessageService, ScheduleSettings
from apogee.broker.services import DispatchDriver
from apogee.broker.transaction_book import TransactionBook
from apogee.broker.transaction_service import TransactionCheckService, recover_book
from apogee.broker.wiring import (
    BrokerParts,
    broker_metrics,
    build_handlers,
    build_replication,
    open_store,
    registrar_for,
    start_metrics,
    transaction_checker,
)
from apogee.protocol.bodies import TopicConfigWrapper
from apogee.store.file_store import FileMessageStore
from apogee.store.recovery import RecoveryProgress

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
CONFIG_RETRY_INTERVAL_S = 5.0  # config files a full disk refused are written again
STATS_SAMPLE_INTERVAL_S = 1.0
STOP_DRAIN_S = 3.0


@dataclass(eq=False)
class Broker(BrokerBase):
    """One started broker: ``await Broker.open(config)``, serve, ``await stop()``."""

    store: FileMessageStore
    transactions: TransactionBook
    address: str
    metrics_exporter: PromExporter | None  # others may add families to it
    dispatch: DispatchDriver
    registrar: NamesrvRegistrar
    registration: RegistrationService
    replication: Replication
    schedule: ScheduleMessageService
    tx_check: TransactionCheckService
    stats: BrokerStats
    drain_sends: Callable[[float], Awaitable[bool]]
    tasks: list[PeriodicTask] = field(default_factory=list)
    _stopped: bool = field(default=False, init=False)

    @property
    def port(self) -> int:
        return self.server.port

    # -- open --------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        config: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        recovery_progress: RecoveryProgress | None = None,
    ) -> Broker:
        """Build, open and start a broker, in the order the module docstring gives."""
        base = BrokerBase.build(config, clock)
        return await cls.open_from(base, recovery_progress=recovery_progress)

    @classmethod
    async def open_from(
        cls, base: BrokerBase, *, recovery_progress: RecoveryProgress | None = None
    ) -> Broker:
        """``open`` with the config-only parts built already (bad ACL or TLS files fail there)."""
        config, clock = base.config, base.clock
        base.managers.load()
        sock = listen_socket(config.bind_address, config.listen_port)  # the port goes into records
        ha_sock = None if config.is_slave else listen_socket(config.bind_address, config.ha_port)
        ip, port = config.broker_ip(), sock.getsockname()[1]
        started_ms = clock.now_ms()
        metrics: list[BrokerMetrics] = []  # /metrics serves them once the broker is built
        exporter = store = None
        try:
            exporter = start_metrics(config, lambda: metrics[0].build() if metrics else iter(()))
            store = await asyncio.to_thread(open_store, config, clock, None, recovery_progress)
            if config.long_polling_enable:  # a listener only while pulls are parked
                base.holds.bind_arrivals(store.set_arrival_listener)
            base.topics.adopt_stored(store.topics())
            transactions = await asyncio.to_thread(_recover_transactions, store, base.offsets)
            store.start(loop_driven=True)
            ha_port = ha_sock.getsockname()[1] if ha_sock is not None else config.ha_port
            broker = cls._wire(
                base, store, transactions=transactions, exporter=exporter,
                store_host=(ip, port), ha_port=ha_port, started_ms=started_ms,
            )  # fmt: skip
            metrics.extend(filter(None, [broker_metrics(broker, store)]))
        except BaseException:
            for bound in filter(None, (sock, ha_sock)):
                bound.close()
            await _close(exporter, store)
            raise
        try:
            await broker._start(sock, ha_sock)
        except BaseException:
            await broker.stop()
            raise
        return broker

    @classmethod
    def _wire(
        cls,
        base: BrokerBase,
        store: FileMessageStore,
        *,
        transactions: TransactionBook,
        exporter: PromExporter | None,
        store_host: tuple[str, int],
        ha_port: int,
        started_ms: int,
    ) -> Broker:
        config, clock = base.config, base.clock
        ip, port = store_host
        address = f"{ip}:{port}"
        dispatch = DispatchDriver(store.dispatch_step, completions=store.group_commit)
        store.on_pending_commit(dispatch.kick)
        kick = dispatch.kick

        def topics() -> TopicConfigWrapper:  # as registered: masked by the broker's permission
            return base.permission.mask(base.topics.wrapper())

        registrar = registrar_for(config, base.namesrv_client, address, ip, topics, ha_port=ha_port)
        registration = RegistrationService(registrar, config.register_period_s)
        base.topics.add_listener(registration.request)
        parts = BrokerParts(
            base.topics, base.groups, base.offsets, base.clients, base.holds, base.locks,
            base.delay_offsets, base.permission, transactions, base.acl,
        )  # fmt: skip
        replication = build_replication(
            config, store, parts, client=base.namesrv_client, registrar=registrar,
            ask_master=registration.request, on_appended=kick, clock=clock,
        )  # fmt: skip
        wake_slaves, answer_woken = replication.wake, base.holds.run_ready

        def after_step() -> None:
            wake_slaves()  # first: a SYNC_MASTER send waits for the slaves' acks
            answer_woken()  # pulls woken by what the step dispatched: answered this turn

        dispatch.on_step = after_step
        register_ha_status(base.table, replication)
        schedule = ScheduleMessageService(
            store, base.delay_offsets, ScheduleSettings(config.store.delay_levels_ms), clock,
            on_stored=kick,
        )  # fmt: skip
        tx_check = transaction_checker(
            config, store, parts, base.to_clients, store_host=store_host, clock=clock,
            on_stored=kick,
        )  # fmt: skip
        stats = BrokerStats(store, clock)
        handlers = build_handlers(
            config, store, parts, store_host=store_host, stats=stats,
            register=registration.register_now, on_stored=kick, started_ms=started_ms,
            clock=clock, to_clients=base.to_clients,
            replicas=getattr(replication, "transfer", None),
        )  # fmt: skip
        handlers.register(base.table)
        return cls(
            **vars(base), store=store, transactions=transactions, address=address,
            metrics_exporter=exporter, dispatch=dispatch, registrar=registrar,
            registration=registration, replication=replication, schedule=schedule,
            tx_check=tx_check, stats=stats, drain_sends=handlers.send.drain,
        )  # fmt: skip

    async def _start(self, sock: socket.socket, ha_sock: socket.socket | None) -> None:
        config = self.config
        await self.server.start(sock)
        if ha_sock is not None:
            await self.replication.start(ha_sock)
        self.dispatch.start()
        if config.long_polling_enable:
            self.holds.start_checks(self.store.max_offset_in_queue)
        self._start_tasks()
        await self.registration.start()
        if ha_sock is None:
            await self.replication.start(None)
        log.info("broker %s (%s) serving at %s", config.broker_name, config.broker_cluster_name,
                 self.address)  # fmt: skip

    def _start_tasks(self) -> None:
        config, store = self.config, self.store
        offsets_s = config.flush_consumer_offset_interval_ms / 1000
        delays_s = config.flush_delay_offset_interval_ms / 1000
        clean_s = config.store.clean_resource_interval_ms / 1000
        self.tasks = [
            PeriodicTask("persist-offsets", offsets_s, self.managers.persist_offsets),
            PeriodicTask("persist-delay-offsets", delays_s, self.managers.persist_delay_offsets),
            PeriodicTask("retry-config-files", CONFIG_RETRY_INTERVAL_S, self.files.retry_unsaved),
            PeriodicTask("client-expiry", CLIENT_SCAN_INTERVAL_S, self.clients.scan_expired),
            PeriodicTask("store-clean", clean_s, store.clean_step),
            PeriodicTask("stats", STATS_SAMPLE_INTERVAL_S, self.stats.sample),
        ]
        if self.acl is not None:
            self.tasks.append(acl_reload_task(self.acl))
        for task in self.tasks:
            task.start()
        if not config.is_slave:  # a slave's store takes no puts; its master delivers
            self.schedule.start()
            self.tx_check.start()

    # -- stop ----------------------------------------------------------------------

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.registration.stop()
        self.holds.close()
        if not await self.drain_sends(STOP_DRAIN_S):
            log.warning("stopping with sends still waiting for the disk or a slave")
        await self.replication.stop()
        await self.server.stop()
        await self.schedule.stop()
        await self.tx_check.stop()
        for task in self.tasks:
            await task.stop()
        await self.dispatch.stop()
        await self.to_clients.close()
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
            await _close(self.metrics_exporter, self.store)
        log.info("broker %s stopped", self.config.broker_name)


def _recover_transactions(
    store: FileMessageStore, offsets: ConsumerOffsetManager
) -> TransactionBook:
    # Every half and op record must be in its consume queue before the scan.
    while store.dispatch_step(1024) >= 1024:
        pass
    return recover_book(store, offsets)


async def _close(exporter: PromExporter | None, store: FileMessageStore | None) -> None:
    """Stop /metrics and close the store (off the loop), whichever are open."""
    if exporter is not None:
        await exporter.stop()
    if store is not None:
        await asyncio.to_thread(store.close)
