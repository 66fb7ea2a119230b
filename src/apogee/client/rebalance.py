"""Which queues of a topic this consumer reads now.

Owns: :class:`Rebalancer`, which asks the cluster what a rebalance needs --
the topic's readable queues (the route) and the group's live client ids
(GET_CONSUMER_LIST_BY_GROUP) -- and applies the allocation strategy, and
:func:`diff`, what changed between two assignments.

Rules (RocketMQ RebalanceImpl.rebalanceByTopic):

* BROADCASTING: every readable queue of the topic;
* CLUSTERING: the strategy's share of the queues for this client id, from
  the ids a broker of the topic knows (any broker: every broker of the
  topic gets every heartbeat). Both lists are sorted by the strategy;
* a topic without a route yet is fetched once more; when it still has
  none, or no broker answers with the ids, the answer is None: "unknown",
  and the consumer keeps what it has until the next round. A client id
  list without this client (its heartbeat not there yet) gives no queues,
  as in RocketMQ.
"""

from __future__ import annotations

import logging

from apogee.client.allocate import AllocateStrategy
from apogee.client.broker_api import BrokerApi
from apogee.client.route_cache import RouteCache
from apogee.errors import ApogeeError
from apogee.model.client import MessageModel, MessageQueue
from apogee.model.route import MASTER_ID

log = logging.getLogger(__name__)


def diff(
    current: set[MessageQueue], wanted: set[MessageQueue]
) -> tuple[set[MessageQueue], set[MessageQueue]]:
    """(queues to add, queues to remove)."""
    return wanted - current, current - wanted


class Rebalancer:
    def __init__(
        self,
        api: BrokerApi,
        routes: RouteCache,
        group: str,
        client_id: str,
        *,
        model: MessageModel,
        strategy: AllocateStrategy,
    ) -> None:
        self._api = api
        self._routes = routes
        self.group = group
        self.client_id = client_id
        self.model = model
        self.strategy = strategy

    async def queues(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues, the route fetched if missing; None without one."""
        queues = self._routes.subscribe_queues(topic)
        if queues:
            return queues
        try:
            await self._routes.refresh(topic)
        except ApogeeError as exc:
            log.info("no route for %s: %s", topic, exc)
            return None
        return self._routes.subscribe_queues(topic) or None

    async def client_ids(self, topic: str) -> list[str] | None:
        """The group's live client ids, from a broker of ``topic``; None if none answers."""
        route = self._routes.route(topic)
        if route is None:
            return None
        addrs = [
            b.broker_addrs.get(MASTER_ID) or next(iter(b.broker_addrs.values()), None)
            for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
        ]
        for addr in addrs:
            if addr is None:
                continue
            try:
                return await self._api.get_consumer_ids(addr, self.group)
            except ApogeeError as exc:
                log.info("consumer ids of %s from %s: %s", self.group, addr, exc)
        return None

    async def allocate(self, topic: str) -> set[MessageQueue] | None:
        """This client's queues of ``topic`` now; None when that cannot be told."""
        queues = await self.queues(topic)
        if queues is None:
            return None
        if self.model is MessageModel.BROADCASTING:
            return set(queues)
        ids = await self.client_ids(topic)
        if not ids:
            return None
        try:
            mine = self.strategy(self.group, self.client_id, queues, ids)
        except Exception:
            log.exception("allocation strategy failed for %s of %s", topic, self.group)
            return None
        return set(mine)
