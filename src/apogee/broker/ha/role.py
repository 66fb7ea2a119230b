"""The replication part of a broker, one per role, and GET_BROKER_HA_STATUS.

Owns: what a master runs (its HA port, ``GroupTransfer`` for SYNC_MASTER
sends) and what a slave runs (its HA client, the metadata copy every
``slaveSyncIntervalMs``), their start and stop, and the HA status answer
(``HARuntimeInfo``: a master's slave connections, or a slave's connection
to its master).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from apogee._util.clock import Clock
from apogee._util.periodic import PeriodicTask
from apogee.broker.config import BrokerConfig
from apogee.broker.ha.master import HAServer, MasterSettings
from apogee.broker.ha.metadata import SlaveSync
from apogee.broker.ha.slave import HAClient, SlaveSettings
from apogee.broker.ha.transfer import GroupTransfer
from apogee.codes import RequestCode
from apogee.model.stats import HAClientInfo, HARuntimeInfo
from apogee.protocol.admin_bodies import encode_ha_runtime_info
from apogee.protocol.command import RemotingCommand
from apogee.remoting.dispatch import HandlerTable, RequestContext
from apogee.store.replication import ReplicaStore, ReplicationSource


class MasterReplication:
    """A master's HA port and its SYNC_MASTER waiters."""

    def __init__(self, config: BrokerConfig, source: ReplicationSource, clock: Clock) -> None:
        self.transfer = GroupTransfer(
            timeout_s=config.store.sync_flush_timeout_ms / 1000,
            max_gap=config.ha_max_gap_not_in_sync,
        )
        settings = MasterSettings(
            batch_bytes=config.ha_transfer_batch_size,
            heartbeat_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
            max_gap=config.ha_max_gap_not_in_sync,
        )
        self.server = HAServer(source, self.transfer, settings, now_ms=clock.now_ms)
        self._source = source

    async def start(self, sock: socket.socket | None) -> None:
        assert sock is not None, "a master needs its replication port"
        await self.server.start(sock)

    def wake(self) -> None:
        self.server.wake()

    async def stop(self) -> None:
        self.transfer.fail_all()
        await self.server.stop()

    def status(self) -> HARuntimeInfo:
        links = self.server.infos()
        return HARuntimeInfo(
            master=True,
            master_commit_log_max_offset=self._source.max_offset,
            in_sync_slave_nums=sum(link.in_sync for link in links),
            ha_connection_info=tuple(links),
        )


class SlaveReplication:
    """A slave's HA client and its metadata copy."""

    def __init__(
        self,
        config: BrokerConfig,
        store: ReplicaStore,
        sync: SlaveSync,
        *,
        ha_master: Callable[[], str | None],
        ask_master: Callable[[], None],
        on_appended: Callable[[], None],
        clock: Clock,
    ) -> None:
        settings = SlaveSettings(
            heartbeat_s=config.ha_send_heartbeat_interval_ms / 1000,
            housekeeping_s=config.ha_housekeeping_interval_ms / 1000,
            retry_s=min(5.0, max(1.0, config.ha_send_heartbeat_interval_ms / 1000)),
        )
        self.client = HAClient(store, ha_master, settings, on_appended=on_appended,
                               ask_master=ask_master,
                               name=f"{config.broker_name}/{config.broker_id}")  # fmt: skip
        self.sync = sync
        self._clock = clock
        self._task = PeriodicTask(
            "slave-sync", config.slave_sync_interval_ms / 1000, sync.sync_all, first_delay_s=0
        )

    async def start(self, sock: socket.socket | None = None) -> None:
        self.client.start()
        self._task.start()

    def wake(self) -> None:
        """Nothing to do on a slave: it streams to no one."""

    async def stop(self) -> None:
        await self._task.stop()
        await self.client.stop()

    def status(self) -> HARuntimeInfo:
        info = self.client.info(self._clock.now_ms())
        return HARuntimeInfo(
            master=False,
            ha_client_runtime_info=HAClientInfo(
                master_addr=info.master_addr,
                transferred_byte_in_second=info.bytes_per_s,
                max_offset=info.max_offset,
                last_read_timestamp=info.last_read_ms,
                last_write_timestamp=info.last_write_ms,
                activated=info.connected,
            ),
        )


Replication = MasterReplication | SlaveReplication


def register_ha_status(table: HandlerTable, replication: Replication) -> None:
    """Serve GET_BROKER_HA_STATUS (RocketMQ 5.x; mqadmin haStatus) from ``replication``."""

    def ha_status(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(body=encode_ha_runtime_info(replication.status()))

    table.register(RequestCode.GET_BROKER_HA_STATUS, ha_status)
