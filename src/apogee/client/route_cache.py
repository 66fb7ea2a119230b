"""A client's view of the cluster: topic routes, publish queues and broker addresses.

Owns: RouteCache, which fetches routes from the name servers (NamesrvApi
rotates through them on failure), keeps them per topic, derives the
producers' PublishInfo (with the TBW102 fallback for topics without a route)
and the broker-name -> {broker id: address} table, and tells its listeners
when brokers appear, when brokers leave every route, and when a topic's
route changes.

Rules (Java MQClientInstance):
* every topic ever looked up stays in the cache and is refreshed by
  ``refresh_all`` (the owner calls it every 30 s), together with the
  topics consumers subscribe to; ``request_refresh`` refreshes one topic
  at once in the background (a producer asks after a failed send);
* a refresh that finds no route keeps what the cache had: a topic created
  from TBW102 keeps sending there until its own route shows up;
* one fetch per topic at a time: callers asking for a topic being fetched
  wait for that fetch;
* after ``refresh_all``, addresses that no route names any more are dropped
  and reported (``on_brokers_removed``); an address first seen in a route is
  reported at once (``on_brokers_added``), so it can be sent a heartbeat
  before any message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from apogee.client.namesrv_api import NamesrvApi
from apogee.client.publish import PublishInfo, default_route, publish_info
from apogee.errors import ApogeeError, NoRouteError, TopicNotExistError
from apogee.model.client import MessageQueue
from apogee.model.route import MASTER_ID, TopicRouteData, readable
from apogee.model.topic import AUTO_CREATE_TOPIC_KEY

log = logging.getLogger(__name__)
_NO_BROKERS: Mapping[int, str] = {}

BrokersListener = Callable[[set[str]], None]
RouteListener = Callable[[str, TopicRouteData], None]


class RouteCache:
    def __init__(self, namesrv: NamesrvApi) -> None:
        self._namesrv = namesrv
        self._routes: dict[str, TopicRouteData] = {}
        #: topic -> its publish queues; read on every send, so a plain dict
        self.publish: dict[str, PublishInfo] = {}
        self._brokers: dict[str, dict[int, str]] = {}
        self._known_addrs: set[str] = set()
        self._fetching: dict[str, asyncio.Future[TopicRouteData | None]] = {}
        self._refreshing: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.on_brokers_added: list[BrokersListener] = []
        self.on_brokers_removed: list[BrokersListener] = []
        self.on_route_changed: list[RouteListener] = []
        #: full refresh rounds completed (tests wait for one)
        self.rounds = 0

    # -- reading --------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        """The topic's route as last fetched, or None."""
        return self._routes.get(topic)

    def topics(self) -> list[str]:
        return list(self._routes)

    def master_addr(self, broker_name: str) -> str | None:
        addrs = self._brokers.get(broker_name)
        return None if addrs is None else addrs.get(MASTER_ID)

    def broker_addr(self, broker_name: str, broker_id: int) -> str | None:
        """The address of one broker of the group (0: the master); None if unknown."""
        addrs = self._brokers.get(broker_name)
        return None if addrs is None else addrs.get(broker_id)

    def broker_group(self, broker_name: str) -> Mapping[int, str]:
        """The broker group's addresses by broker id, not copied: read it, do not keep it."""
        return self._brokers.get(broker_name, _NO_BROKERS)

    def broker_addrs(self, broker_name: str) -> dict[int, str]:
        """The broker group's addresses by broker id (0 is the master); {} if unknown."""
        return dict(self._brokers.get(broker_name, {}))

    def all_addrs(self, *, masters_only: bool = False) -> set[str]:
        return {
            addr
            for addrs in self._brokers.values()
            for broker_id, addr in addrs.items()
            if not masters_only or broker_id == MASTER_ID
        }

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues (what consumers divide), sorted; [] without a route."""
        route = self._routes.get(topic)
        if route is None:
            return []
        return sorted(
            MessageQueue(topic, qd.broker_name, i)
            for qd in route.queue_datas
            if readable(qd.perm)
            for i in range(qd.read_queue_nums)
        )

    # -- fetching -------------------------------------------------------------

    async def get_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, fetched when not cached; None when it has none."""
        route = self._routes.get(topic)
        if route is not None:
            return route
        return await self._fetch(topic)

    async def publish_info(
        self,
        topic: str,
        default_topic: str = AUTO_CREATE_TOPIC_KEY,
        default_topic_queue_nums: int = 4,
    ) -> PublishInfo:
        """Where ``topic``'s messages may go, falling back on the default topic's route.

        Without a route of its own, the topic borrows ``default_topic``'s,
        at most ``default_topic_queue_nums`` queues per broker.

        Raises:
            NoRouteError: neither the topic nor the default topic has a writable queue.
        """
        info = self.publish.get(topic)
        if info is not None and info.queues:
            return info
        if topic not in self._routes:
            await self._fetch(topic)
            info = self.publish.get(topic)
        if info is None and topic != default_topic:
            base = await self.get_route(default_topic)
            if base is not None:
                narrowed = default_route(base, default_topic_queue_nums)
                info = publish_info(topic, narrowed, from_default=True)
                if info.queues:
                    self.publish.setdefault(topic, info)
        if info is None or not info.queues:
            raise NoRouteError(
                f"no route for topic {topic}: no broker serves it"
                + (f" and none serves {default_topic} to create it from" if not info else "")
            )
        return info

    async def refresh(self, topic: str) -> None:
        """Fetch ``topic``'s route again now."""
        await self._fetch(topic, again=True)

    def request_refresh(self, topic: str) -> None:
        """Refresh ``topic`` in the background, unless a refresh of it is under way."""
        if topic in self._refreshing:
            return
        self._refreshing.add(topic)

        async def run() -> None:
            try:
                await self._fetch(topic, again=True)
            except ApogeeError as exc:
                log.info("refreshing the route of %s failed: %s", topic, exc)
            finally:
                self._refreshing.discard(topic)

        self._spawn(run())

    async def refresh_all(self, extra_topics: Iterable[str] = ()) -> None:
        """Refresh every cached topic and ``extra_topics``; then drop brokers no route names."""
        for topic in {*self._routes, *self.publish, *extra_topics}:
            try:
                await self._fetch(topic, again=True)
            except ApogeeError as exc:
                log.info("refreshing the route of %s failed: %s", topic, exc)
        self._drop_unrouted()
        self.rounds += 1

    async def _fetch(self, topic: str, *, again: bool = False) -> TopicRouteData | None:
        pending = self._fetching.get(topic)
        if pending is not None:
            return await asyncio.shield(pending)
        if not again and topic in self._routes:
            return self._routes[topic]
        fut: asyncio.Future[TopicRouteData | None] = asyncio.get_running_loop().create_future()
        self._fetching[topic] = fut
        try:
            try:
                route: TopicRouteData | None = await self._namesrv.get_route(topic)
            except TopicNotExistError:
                route = None
            if route is not None:
                self._store(topic, route)
            fut.set_result(route)
            return route
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved here: waiters, if any, get it through shield
            raise
        finally:
            del self._fetching[topic]

    # -- updating -------------------------------------------------------------

    def _store(self, topic: str, route: TopicRouteData) -> None:
        changed = self._routes.get(topic) != route
        self._routes[topic] = route
        info = publish_info(topic, route)
        old = self.publish.get(topic)
        if old is not None:
            info.index = old.index
        self.publish[topic] = info
        added: set[str] = set()
        for broker in route.broker_datas:
            addrs = dict(broker.broker_addrs)
            self._brokers[broker.broker_name] = addrs
            added |= set(addrs.values()) - self._known_addrs
        if added:
            self._known_addrs |= added
            _tell(self.on_brokers_added, added)
        if changed:
            for listener in list(self.on_route_changed):
                try:
                    listener(topic, route)
                except Exception:
                    log.exception("route listener failed for %s", topic)

    def _drop_unrouted(self) -> None:
        named: dict[str, dict[int, str]] = {}
        for route in self._routes.values():
            for broker in route.broker_datas:
                named.setdefault(broker.broker_name, {}).update(broker.broker_addrs)
        live = {addr for addrs in named.values() for addr in addrs.values()}
        gone = self._known_addrs - live
        self._brokers = named
        if gone:
            self._known_addrs -= gone
            log.info("brokers left every route: %s", ", ".join(sorted(gone)))
            _tell(self.on_brokers_removed, gone)

    # -- background work --------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _tell(listeners: list[BrokersListener], addrs: set[str]) -> None:
    for listener in list(listeners):
        try:
            listener(set(addrs))
        except Exception:
            log.exception("broker listener failed")
