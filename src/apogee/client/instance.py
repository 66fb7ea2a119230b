"""The client instance: what the producers and consumers of one process share.

Owns: ClientInstance, the client's composition root, and InstanceConfig.
It wires one RemotingClient (one connection per broker address, its
HandlerTable answering broker requests), NamesrvApi (rotating through the
name servers on failure), BrokerApi, RouteCache, Members, HeartbeatService,
TransactionCheckHandler and BrokerRequests, and runs three timers: route
refresh (30 s), heartbeats (30 s) and consumer offset persistence (5 s).
It holds no business logic of its own.

Sharing: ``await ClientInstance.acquire(namesrv, config)`` returns the
instance of (running event loop, name servers, instance name), creating and
starting it on first use; ``await instance.release()`` closes it after its
last user: offsets persisted, UNREGISTER_CLIENT sent for every group still
registered, timers stopped, connections closed. The first user's config
wins (its credentials and TLS context included). The instance name
"DEFAULT" becomes the process id, so the client id (``<ip>@<instance
name>``) is one per process unless an instance name is given; two
consumers of one group in one process need two instance names.

For consumers -- the API to build on:
* ``await instance.register_consumer(member)`` with a ``members.ConsumerMember``
  (see that module: what heartbeats carry, which broker requests it gets);
  ``await instance.unregister_consumer(group)`` persists its offsets and
  sends UNREGISTER_CLIENT; ``await instance.heartbeat_now()`` after a
  subscription change.
* ``instance.routes`` (RouteCache): ``await routes.get_route(topic)``,
  ``routes.subscribe_queues(topic)`` (the readable queues, sorted),
  ``routes.master_addr(broker_name)``, ``routes.broker_addrs(broker_name)``,
  ``routes.on_route_changed`` listeners.
* ``instance.broker_api`` (BrokerApi: pull, offsets, locks, send-back,
  consumer ids) and ``instance.namesrv`` (NamesrvApi), on the shared
  connections; ``instance.client_id`` for locks and rebalancing;
  ``instance.spawn(coroutine)`` for background work cancelled at close.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from apogee._util.net import local_ipv4
from apogee._util.periodic import PeriodicTask
from apogee.client.broker_api import BrokerApi
from apogee.client.broker_requests import BrokerRequests
from apogee.client.heartbeat import HeartbeatService
from apogee.client.members import ConsumerMember, Members
from apogee.client.namesrv_api import NamesrvApi, parse_namesrv_addrs
from apogee.client.route_cache import RouteCache
from apogee.client.transaction import CheckListener, TransactionCheckHandler
from apogee.errors import ApogeeError, ClientError, ConfigError
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.remoting.dispatch import HandlerTable

log = logging.getLogger(__name__)

DEFAULT_INSTANCE_NAME = "DEFAULT"


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """Settings of a client instance (Java ClientConfig); seconds as floats."""

    instance_name: str = DEFAULT_INSTANCE_NAME
    poll_namesrv_interval_s: float = 30.0
    heartbeat_interval_s: float = 30.0
    persist_offsets_interval_s: float = 5.0
    connect_timeout_s: float = 3.0
    request_timeout_s: float = 3.0
    #: every request is signed with these (ACL 1.0), to brokers and name servers alike
    credentials: SessionCredentials | None = None
    #: connect over TLS with this context (``remoting.tls.client_ssl_context``)
    tls: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        if not self.instance_name or "@" in self.instance_name:
            raise ConfigError(
                f"instance_name must be non-empty, without '@': {self.instance_name!r}"
            )
        for name in (
            "poll_namesrv_interval_s",
            "heartbeat_interval_s",
            "persist_offsets_interval_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")


def client_id(instance_name: str) -> str:
    """``<ip>@<instance name>``; "DEFAULT" stands for the process id."""
    name = str(os.getpid()) if instance_name == DEFAULT_INSTANCE_NAME else instance_name
    return f"{local_ipv4()}@{name}"


_Key = tuple[int, tuple[str, ...], str]
_SHARED: dict[_Key, ClientInstance] = {}


def live_instances() -> list[ClientInstance]:
    """The instances of this process that are not closed, on any event loop."""
    return [i for i in _SHARED.values() if not i.closed]


class ClientInstance:
    def __init__(self, namesrv_addrs: Sequence[str], config: InstanceConfig) -> None:
        self.config = config
        self.namesrv_addrs = list(namesrv_addrs)
        self.client_id = client_id(config.instance_name)
        self.handlers = HandlerTable()
        self.remoting = RemotingClient(
            ClientConfig(
                connect_timeout_s=config.connect_timeout_s,
                request_timeout_s=config.request_timeout_s,
                ssl_context=config.tls,
                credentials=config.credentials,
            ),
            self.handlers,
        )
        self.namesrv = NamesrvApi(self.remoting, self.namesrv_addrs)
        self.broker_api = BrokerApi(self.remoting)
        self.routes = RouteCache(self.namesrv)
        self.members = Members()
        self.transaction_checks = TransactionCheckHandler()
        self.heartbeats = HeartbeatService(
            self.broker_api, self.routes, self.members, self.client_id
        )
        BrokerRequests(self.members, self.transaction_checks).register(self.handlers)
        self.routes.on_brokers_added.append(self._brokers_added)
        self.routes.on_brokers_removed.append(self._brokers_removed)
        self._timers = [
            PeriodicTask("route-refresh", config.poll_namesrv_interval_s, self._refresh_routes),
            PeriodicTask("heartbeat", config.heartbeat_interval_s, self.heartbeats.beat_all),
            PeriodicTask(
                "persist-offsets", config.persist_offsets_interval_s, self.persist_offsets
            ),
        ]
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._users = 0
        self.closed = False

    # -- sharing --------------------------------------------------------------

    @classmethod
    async def acquire(
        cls, namesrv: str | Sequence[str], config: InstanceConfig | None = None
    ) -> ClientInstance:
        """The shared instance for these name servers and instance name, started."""
        addrs = parse_namesrv_addrs(namesrv) if isinstance(namesrv, str) else list(namesrv)
        if not addrs:
            raise ConfigError("namesrv: no name server address given")
        config = config or InstanceConfig()
        loop = asyncio.get_running_loop()
        key = (id(loop), tuple(addrs), config.instance_name)
        instance = _SHARED.get(key)
        if instance is None or instance.closed or instance._loop is not loop:
            instance = cls(addrs, config)
            instance.start()
            _SHARED[key] = instance
        instance._users += 1
        return instance

    async def release(self) -> None:
        """One user is done; the last one closes the instance."""
        self._users -= 1
        if self._users <= 0:
            await self.close()

    # -- lifetime -------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the instance runs on (None before ``start``)."""
        return self._loop

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for timer in self._timers:
            timer.start()

    async def close(self) -> None:
        """Persist offsets, leave every group, stop the timers, close the connections."""
        if self.closed:
            return
        self.closed = True
        for key, instance in list(_SHARED.items()):
            if instance is self:
                del _SHARED[key]
        for timer in self._timers:
            await timer.stop()
        await self.persist_offsets()
        for group in sorted(self.members.producers):
            await self.unregister_producer(group)
        for group in list(self.members.consumers):
            await self.unregister_consumer(group)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.routes.close()
        self.handlers.cancel_all()
        await self.remoting.close()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``work`` in the background; cancelled when the instance closes."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning(
                "background work of client %s failed", self.client_id, exc_info=task.exception()
            )

    # -- members --------------------------------------------------------------

    async def register_producer(self, group: str, *, checker: CheckListener | None = None) -> None:
        """Announce ``group`` to the known brokers (and to each broker found later).

        ``checker`` answers the broker's CHECK_TRANSACTION_STATE for the group.
        """
        self._check_open()
        self.members.add_producer(group)
        if checker is not None:
            self.transaction_checks.add_listener(group, checker)
        await self.heartbeats.beat_all()

    async def unregister_producer(self, group: str) -> None:
        if self.members.remove_producer(group):
            self.transaction_checks.remove_listener(group)
            await self.heartbeats.unregister(producer_group=group)

    async def register_consumer(self, member: ConsumerMember) -> None:
        """Announce a consumer: heartbeats carry it, timers and broker requests reach it."""
        self._check_open()
        self.members.add_consumer(member)
        for topic in {s.topic for s in member.consumer_data().subscriptions}:
            try:
                await self.routes.get_route(topic)
            except ApogeeError as exc:
                log.info("no route for %s yet: %s", topic, exc)
        await self.heartbeats.beat_all()

    async def unregister_consumer(self, group: str) -> None:
        member = self.members.remove_consumer(group)
        if member is None:
            return
        try:
            await member.persist_offsets()
        except ApogeeError as exc:
            log.warning("persisting offsets of %s failed: %s", group, exc)
        await self.heartbeats.unregister(consumer_group=group)

    async def heartbeat_now(self) -> None:
        """Send a heartbeat to every target broker now (and wait for the answers)."""
        await self.heartbeats.beat_all()

    async def persist_offsets(self) -> None:
        """Ask every consumer to persist its offsets (the 5 s timer calls this)."""
        for member in list(self.members.consumers.values()):
            try:
                await member.persist_offsets()
            except ApogeeError as exc:
                log.warning("persisting offsets of %s failed: %s", member.group, exc)

    # -- timers and route events ----------------------------------------------------

    async def _refresh_routes(self) -> None:
        await self.routes.refresh_all(self.members.subscribed_topics())

    def _brokers_added(self, addrs: set[str]) -> None:
        targets = addrs & self.heartbeats.targets()
        if targets and self.members and not self.closed:
            self.spawn(self.heartbeats.beat(targets))

    def _brokers_removed(self, addrs: set[str]) -> None:
        for addr in addrs:
            self.spawn(self.remoting.close_connection(addr))

    def _check_open(self) -> None:
        if self.closed:
            raise ClientError(f"client instance {self.client_id} is closed")

    def __repr__(self) -> str:
        return f"<ClientInstance {self.client_id} namesrv={';'.join(self.namesrv_addrs)}>"
