"""The Broker process: composition root.

Owns: building the store, managers, handlers and services from a
BrokerConfig, and starting and stopping them in order. No business logic:
every rule lives in the part that owns it. Imports: ``apogee.broker.*``,
``apogee.store`` (this is the one module that builds a FileMessageStore),
``apogee.remoting``, ``apogee._util``.

Start: managers load ``<store>/config/*.json``; the listening socket is
bound first, so the address written into every record is known; the store
opens and recovers (off the loop); handlers are registered; the server
starts; background services start; the broker registers with the name
servers. Stop: no more registrations; parked pulls are answered;
SYNC_FLUSH sends waiting for the disk are answered; the server stops
(answers in flight are flushed); services stop; the broker unregisters;
configs and offsets are written; the store is flushed and closed (its abort
file removed).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee.broker.broker2client import Broker2Client
from apogee.broker.clients import ClientRegistry
from apogee.broker.config import BrokerConfig
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.handlers import BrokerHandlers
from apogee.broker.handlers.consumer import (
    ConsumerListHandler,
    HeartbeatHandler,
    QueryConsumerOffsetHandler,
    UnregisterClientHandler,
    UpdateConsumerOffsetHandler,
)
from apogee.broker.handlers.pull import PullHandler, PullSettings
from apogee.broker.handlers.query import MessageLookupHandlers, QueueOffsetHandlers
from apogee.broker.handlers.send import SendHandler, SendSettings
from apogee.broker.long_polling import PullHoldService
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.registration import BrokerIdentity, NamesrvRegistrar, RegistrationService
from apogee.broker.services import ConfigFiles, DispatchDriver, PeriodicTask
from apogee.broker.topics import TopicConfigManager, TopicDefaults
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig, ServerConfig
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.server import RemotingServer
from apogee.store.file_store import FileMessageStore
from apogee.store.index_service import IndexService

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S = 10.0
CLEAN_INTERVAL_S = 10.0
STOP_DRAIN_S = 3.0


class Broker:
    """One broker: ``await start()``, serve, ``await stop()``."""

    def __init__(self, config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.config_dir = config.store.store_path_root_dir / "config"
        self.topics = TopicConfigManager(TopicDefaults.from_config(config), clock)
        self.groups = SubscriptionGroupManager(
            clock, auto_create=config.auto_create_subscription_group
        )
        self.offsets = ConsumerOffsetManager()
        self.files = ConfigFiles()
        self.holds = PullHoldService()
        self.to_clients = Broker2Client()
        self.clients = ClientRegistry(
            clock, self.to_clients.notify_consumer_ids_changed, self.groups.notify_enabled
        )
        self.table = HandlerTable()
        idle_s = float(config.server_channel_max_idle_time_s)
        self.server = RemotingServer(
            self.table, ServerConfig(config.bind_address, config.listen_port, idle_timeout_s=idle_s)
        )
        self.namesrv_client = RemotingClient(ClientConfig())
        self.store: FileMessageStore | None = None
        self.address = ""
        self._tasks: list[PeriodicTask] = []
        self._dispatch: DispatchDriver | None = None
        self._registration: RegistrationService | None = None
        self._send: SendHandler | None = None

    @property
    def port(self) -> int:
        return self.server.port

    def _path(self, name: str) -> Path:
        return self.config_dir / name

    # -- start -------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        self._load_configs()
        sock = _listen_socket(config.bind_address, config.listen_port)
        port = sock.getsockname()[1]
        ip = config.broker_ip()
        self.address = f"{ip}:{port}"
        try:
            self.store = store = await asyncio.to_thread(self._open_store)
        except BaseException:
            sock.close()
            raise
        store.start()
        self._dispatch = DispatchDriver(store.dispatch_step)
        self._wire(store, (ip, port))
        await self.server.start(sock)
        self._dispatch.start()
        self._start_tasks(store)
        await self._start_registration(ip)
        log.info("broker %s (%s) serving at %s", config.broker_name, config.broker_cluster_name,
                 self.address)  # fmt: skip

    def _load_configs(self) -> None:
        self.files.load(self._path("topics.json"), self.topics.load)
        self.files.load(self._path("subscriptionGroup.json"), self.groups.load)
        self.files.load(self._path("consumerOffset.json"), self.offsets.load)
        self.topics.add_listener(
            lambda: self.files.save_soon(self._path("topics.json"), self.topics.encode())
        )
        self.groups.add_listener(
            lambda: self.files.save_soon(self._path("subscriptionGroup.json"), self.groups.encode())
        )

    def _open_store(self) -> FileMessageStore:
        config = self.config
        index = None
        if config.message_index_enable:
            index = IndexService(
                config.store.index_dir,
                max_hash_slot_num=config.max_hash_slot_num,
                max_index_num=config.max_index_num,
                clock=self.clock,
            )
        arrival = self.holds.on_arrival if config.long_polling_enable else None
        return FileMessageStore.open(config.store, clock=self.clock, index=index, arrival=arrival)

    def _wire(self, store: FileMessageStore, store_host: tuple[str, int]) -> None:
        config = self.config
        assert self._dispatch is not None
        send = self._send = SendHandler(
            store,
            self.topics,
            SendSettings.from_config(config, store_host),
            on_stored=self._dispatch.kick,
            loop=asyncio.get_running_loop(),
        )
        pull = PullHandler(
            store=store,
            topics=self.topics,
            groups=self.groups,
            clients=self.clients,
            offsets=self.offsets,
            holds=self.holds,
            settings=PullSettings.from_config(config),
        )
        BrokerHandlers(
            send=send,
            pull=pull,
            heartbeat=HeartbeatHandler(self.clients, self.groups, self.topics),
            unregister_client=UnregisterClientHandler(self.clients),
            consumer_list=ConsumerListHandler(self.clients),
            query_consumer_offset=QueryConsumerOffsetHandler(self.offsets, store),
            update_consumer_offset=UpdateConsumerOffsetHandler(self.offsets),
            queue_offsets=QueueOffsetHandlers(store),
            lookups=MessageLookupHandlers(
                store, default_query_max_num=config.default_query_max_num
            ),
        ).register(self.table)
        self.server.add_close_listener(self.clients.channel_closed)
        self.server.add_close_listener(send.connection_closed)

    def _start_tasks(self, store: FileMessageStore) -> None:
        offsets_s = self.config.flush_consumer_offset_interval_ms / 1000
        self._tasks = [
            PeriodicTask("persist-offsets", offsets_s, self._persist_offsets),
            PeriodicTask("client-expiry", CLIENT_SCAN_INTERVAL_S, self.clients.scan_expired),
            PeriodicTask("store-clean", CLEAN_INTERVAL_S, store.clean_step),
        ]
        for task in self._tasks:
            task.start()

    async def _start_registration(self, ip: str) -> None:
        config = self.config
        ha_ip = config.broker_ip2 or ip
        registrar = NamesrvRegistrar(
            self.namesrv_client,
            config.namesrv_addrs,
            BrokerIdentity(
                config.broker_cluster_name,
                config.broker_name,
                config.broker_id,
                self.address,
                f"{ha_ip}:{config.ha_listen_port}",
            ),
            self.topics.wrapper,
            timeout_s=config.register_broker_timeout_ms / 1000,
        )
        self.registrar = registrar
        self._registration = RegistrationService(registrar, config.register_period_s)
        self.topics.add_listener(self._registration.request)
        await self._registration.start()

    async def _persist_offsets(self) -> None:
        if self.offsets.dirty:
            await self.files.save(self._path("consumerOffset.json"), self.offsets.encode())

    # -- stop ----------------------------------------------------------------------

    async def stop(self) -> None:
        if self.store is None:
            return
        if self._registration is not None:
            await self._registration.stop()
        self.holds.close()
        if self._send is not None and not await self._send.drain(STOP_DRAIN_S):
            log.warning("stopping with %d sends still waiting for the disk",
                        self._send.waiting_for_flush)  # fmt: skip
        await self.server.stop()
        for task in self._tasks:
            await task.stop()
        if self._dispatch is not None:
            await self._dispatch.stop()
        await self.to_clients.close()
        if self._registration is not None:
            await self.registrar.unregister_all()
        await self.namesrv_client.close()
        await self._save_configs()
        store, self.store = self.store, None
        await asyncio.to_thread(store.close)
        log.info("broker %s stopped", self.config.broker_name)

    async def _save_configs(self) -> None:
        await self.files.flush()
        await self.files.save(self._path("topics.json"), self.topics.encode())
        await self.files.save(self._path("subscriptionGroup.json"), self.groups.encode())
        await self.files.save(self._path("consumerOffset.json"), self.offsets.encode())


def _listen_socket(host: str, port: int) -> socket.socket:
    """Bind before serving: the bound port goes into every stored record."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock
