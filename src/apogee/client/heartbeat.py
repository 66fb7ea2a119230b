"""Heartbeats and goodbyes: how brokers learn which groups a client serves.

Owns: HeartbeatService, which sends HEART_BEAT (the instance's producer
groups and consumers, built fresh each time) to brokers and UNREGISTER_CLIENT
when a group leaves.

Rules (Java MQClientInstance): heartbeats go to every master broker the
routes name, and to the slaves too once a consumer is registered (consumers
may pull from slaves); nothing is sent while the instance serves no group.
A broker that cannot be reached is logged and skipped: the next round tries
again. UNREGISTER_CLIENT goes to every broker address known, answered or
not, and waits for the answers (at most the request timeout each).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from apogee.client.broker_api import BrokerApi
from apogee.client.members import Members
from apogee.client.route_cache import RouteCache
from apogee.errors import ApogeeError

log = logging.getLogger(__name__)


class HeartbeatService:
    def __init__(
        self, api: BrokerApi, routes: RouteCache, members: Members, client_id: str
    ) -> None:
        self._api = api
        self._routes = routes
        self._members = members
        self.client_id = client_id
        self.sent = 0

    def targets(self) -> set[str]:
        return self._routes.all_addrs(masters_only=not self._members.consumers)

    async def beat_all(self) -> None:
        """One heartbeat to every target broker, in parallel."""
        await self.beat(self.targets())

    async def beat(self, addrs: Iterable[str]) -> None:
        if not self._members:
            return
        data = self._members.heartbeat(self.client_id)
        addrs = list(addrs)
        results = await asyncio.gather(
            *(self._api.heartbeat(addr, data) for addr in addrs), return_exceptions=True
        )
        for addr, result in zip(addrs, results, strict=True):
            if isinstance(result, ApogeeError):
                log.info("heartbeat to %s failed: %s", addr, result)
            elif isinstance(result, BaseException):
                raise result
            else:
                self.sent += 1

    async def unregister(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        """Tell every known broker that this client left the group(s)."""
        addrs = list(self._routes.all_addrs())
        results = await asyncio.gather(
            *(
                self._api.unregister_client(
                    addr,
                    self.client_id,
                    producer_group=producer_group,
                    consumer_group=consumer_group,
                )
                for addr in addrs
            ),
            return_exceptions=True,
        )
        for addr, result in zip(addrs, results, strict=True):
            if isinstance(result, ApogeeError):
                log.info("unregistering from %s failed: %s", addr, result)
            elif isinstance(result, BaseException):
                raise result
