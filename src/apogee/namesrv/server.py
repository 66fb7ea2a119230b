"""The NameServer process: composition root and the inactive-broker scan.

Owns: building the route table, KV config, handlers and remoting server, and
starting/stopping them in order. No business logic lives here.

With ``aclEnable=true`` every request passes the ACL check of
``plain_acl.yml`` first (reloaded within a second of a change): reads need
a valid signature, changes (KV entries, write permission, topic deletion,
broker registration) an admin account. ``tls.server.mode`` applies too.

Several name servers run side by side without talking to each other; each
broker registers with all of them, so each holds the whole picture.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from types import TracebackType

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee._util.periodic import PeriodicTask
from apogee._util.prom import PromExporter
from apogee.acl.validator import AccessValidator, plain_acl_path
from apogee.codes import RequestCode, ResponseCode
from apogee.namesrv.config import NamesrvConfig
from apogee.namesrv.handlers import NamesrvHandlers
from apogee.namesrv.kvconfig import KVConfig
from apogee.namesrv.metrics import NamesrvMetrics
from apogee.namesrv.route_table import RouteTable
from apogee.remoting.config import ServerConfig
from apogee.remoting.connection import Connection
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.limits import ServerLimits, connections_for_fd_limit
from apogee.remoting.observe import RequestObserver
from apogee.remoting.server import RemotingServer
from apogee.remoting.tls import server_context

log = logging.getLogger(__name__)

ACL_RELOAD_INTERVAL_S = 1.0


class NameServer:
    def __init__(self, config: NamesrvConfig | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config or NamesrvConfig()
        self.clock = clock
        self.routes = RouteTable()
        self.kv = KVConfig(Path(self.config.kv_config_path).expanduser())
        self.handlers = NamesrvHandlers(self.routes, self.kv, self.config, clock)
        table = HandlerTable()
        self.handlers.register(table)
        cfg = self.config
        self.acl = AccessValidator(plain_acl_path(cfg.plain_acl_file)) if cfg.acl_enable else None
        table.guard = self.acl.check if self.acl is not None else None
        self.requests = table.observer = RequestObserver(
            "apogee.namesrv.refusals",
            normal=[(RequestCode.GET_ROUTEINFO_BY_TOPIC, ResponseCode.TOPIC_NOT_EXIST)],
        )
        self.server = RemotingServer(
            table,
            ServerConfig(
                host=cfg.bind_address,
                port=cfg.listen_port,
                idle_timeout_s=float(cfg.server_channel_max_idle_time_seconds),
                limits=ServerLimits(
                    max_connections=cfg.max_connections or connections_for_fd_limit()
                ),
                tls_mode=cfg.tls.mode,
                ssl_context=server_context(cfg.tls),
            ),
        )
        self.server.add_close_listener(self.handlers.on_connection_closed)
        self._scan_task: asyncio.Task[None] | None = None
        self._acl_reload = PeriodicTask("acl-reload", ACL_RELOAD_INTERVAL_S, self._reload_acl)
        #: /metrics (metricsExporterType=PROM)
        self.metrics_exporter: PromExporter | None = None

    @property
    def port(self) -> int:
        return self.server.port

    def metrics(self) -> NamesrvMetrics:
        """This server's metric families (a standalone process adds them to its broker's)."""
        node = f"{self.config.bind_address}:{self.port}"
        return NamesrvMetrics(node, self.routes, self.requests, self.server)

    async def start(self) -> None:
        await self.server.start()
        config = self.config
        if config.metrics_exporter_type == "PROM":
            exporter = PromExporter(
                config.metrics_prom_exporter_host or config.bind_address,
                config.metrics_prom_exporter_port,
            )
            exporter.add(self.metrics().build)
            try:
                exporter.start()
            except BaseException:
                await self.server.stop()
                raise
            self.metrics_exporter = exporter
            log.info("metrics at http://%s:%d/metrics", exporter.host, exporter.port)
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan")
        if self.acl is not None:
            self._acl_reload.start()
        log.info("name server listening on %s:%d", self.config.bind_address, self.port)

    async def stop(self) -> None:
        await self._acl_reload.stop()
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        if self.metrics_exporter is not None:
            await self.metrics_exporter.stop()
            self.metrics_exporter = None
        await self.server.stop()

    def scan_once(self) -> list[str]:
        """Drop brokers silent past their timeout and close their connections."""
        live = dict(self.routes.broker_live_table)
        expired = self.routes.scan_not_active(self.clock.now_ms())
        for addr in expired:
            log.warning("broker %s expired: nothing heard for %d ms", addr, live[addr].timeout_ms)
            channel = live[addr].channel
            if isinstance(channel, Connection):
                channel.close()
        return expired

    async def _reload_acl(self) -> None:
        assert self.acl is not None
        table = await asyncio.to_thread(self.acl.read_if_changed)
        if table is not None:
            self.acl.install(table)

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.scan_once()
            except Exception:  # the scan must outlive a bad entry
                log.exception("inactive-broker scan failed")

    async def __aenter__(self) -> NameServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
