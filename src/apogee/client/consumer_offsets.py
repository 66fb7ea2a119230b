"""A consumer group's progress as one consumer keeps it: read, advanced, persisted.

Owns: :class:`ConsumerOffsets`, which puts the offset tables of
``offset_store`` (RemoteOffsets for CLUSTERING, LocalOffsetStore for
BROADCASTING) together with the requests that read and write them, and
:meth:`ConsumerOffsets.start_offset`, where a queue's reading starts.

Rules (RocketMQ RemoteBrokerOffsetStore, LocalFileOffsetStore,
RebalancePushImpl.computePullFromWhere):

* CLUSTERING offsets live on the master of the queue's broker, or, while
  the route lists no master, on its slave with the lowest id (Java's
  findBrokerAddressInAdmin: "once the Master is off, updated to Slave"; the
  slave hands them to the master when it is back): read with
  QUERY_CONSUMER_OFFSET (QUERY_NOT_FOUND: the group never committed there;
  ``setZeroIfNotFound=false`` keeps a broker from answering 0 instead for a
  young queue, as 4.x brokers do, which would make every new group read
  from the start whatever its ``consume_from``),
  written with UPDATE_CONSUMER_OFFSET, oneway on the 5 s timer, awaited by
  an explicit ``commit``. BROADCASTING offsets live in a local file
  (``offset_store.LocalOffsetStore``), read and written in a worker thread.
* Where a queue starts (``start_offset``): its committed offset when the
  group has one; else, by ``consume_from``: LAST -- the queue's max offset
  (0 for the retry topic); FIRST -- 0 (a broker answers an offset below its
  minimum with the minimum); TIMESTAMP -- the offset stored at that time
  (the max offset for the retry topic). A failed request raises: the queue
  is skipped until the next rebalance.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping

from apogee.client.broker_api import BrokerApi
from apogee.client.offset_store import LocalOffsetStore, OffsetTable, ReadOffsetType, RemoteOffsets
from apogee.client.route_cache import RouteCache
from apogee.errors import ApogeeError, ClientError
from apogee.model.client import ConsumeFromWhere, MessageModel, MessageQueue
from apogee.model.route import MASTER_ID
from apogee.model.topic import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)

#: CONSUME_FROM_TIMESTAMP without a time starts this long before the consumer (Java: 30 min)
DEFAULT_TIMESTAMP_LOOKBACK_MS = 30 * 60 * 1000

_LAST_LIKE = frozenset(
    {
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET,
        ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET,
    }
)


class ConsumerOffsets:
    def __init__(
        self,
        api: BrokerApi,
        routes: RouteCache,
        group: str,
        model: MessageModel,
        *,
        local: LocalOffsetStore | None = None,
    ) -> None:
        self._api = api
        self._routes = routes
        self.group = group
        self.model = model
        self._local = local
        self._remote = RemoteOffsets() if local is None else None
        self.table: OffsetTable = local if local is not None else self._remote  # type: ignore[assignment]
        if model is MessageModel.BROADCASTING and local is None:
            raise ClientError("a BROADCASTING consumer keeps its offsets in a local file")

    async def load(self) -> None:
        """Read the local offsets file (BROADCASTING); nothing to do for CLUSTERING."""
        if self._local is not None:
            await asyncio.to_thread(self._local.load)

    # -- in memory ---------------------------------------------------------------------

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        self.table.update(mq, offset, increase_only=increase_only)

    def get(self, mq: MessageQueue) -> int | None:
        return self.table.get(mq)

    def forget(self, mq: MessageQueue) -> None:
        self.table.remove(mq)

    # -- reading -------------------------------------------------------------------------

    async def read(self, mq: MessageQueue, how: ReadOffsetType) -> int | None:
        """The queue's offset by rule ``how`` (see ``offset_store``); None: none committed."""
        if self._local is not None:
            local = self._local
            return await asyncio.to_thread(local.read, mq, how)
        assert self._remote is not None
        return await self._remote.read(mq, how, self.fetch_committed)

    async def fetch_committed(self, mq: MessageQueue) -> int | None:
        """The offset the broker keeps for the group (None: QUERY_NOT_FOUND)."""
        addr = await self.offset_addr(mq)
        return await self._api.query_consumer_offset(
            addr, self.group, mq.topic, mq.queue_id, set_zero_if_not_found=False
        )

    async def start_offset(
        self, mq: MessageQueue, consume_from: ConsumeFromWhere, timestamp_ms: int | None
    ) -> int:
        """Where reading ``mq`` starts (see the module docstring).

        Raises:
            ApogeeError: the broker could not be asked; skip the queue this round.
        """
        committed = await self.read(mq, ReadOffsetType.READ_FROM_STORE)
        if committed is not None and committed >= 0:
            return committed
        retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        if consume_from is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if consume_from in _LAST_LIKE and retry:
            return 0
        addr = await self.master(mq)
        if consume_from in _LAST_LIKE or retry:
            return await self._api.get_max_offset(addr, mq.topic, mq.queue_id)
        when = timestamp_ms
        if when is None:
            when = time.time_ns() // 1_000_000 - DEFAULT_TIMESTAMP_LOOKBACK_MS
        return await self._api.search_offset(addr, mq.topic, mq.queue_id, when)

    # -- persisting ----------------------------------------------------------------------

    async def persist(self, assigned: Collection[MessageQueue], *, oneway: bool = True) -> None:
        """Write the offsets of the ``assigned`` queues where they are kept.

        CLUSTERING: one UPDATE_CONSUMER_OFFSET per queue to its master (a slave
        while the master is gone),
        oneway unless ``oneway=False``, and the offsets of queues no longer
        assigned are forgotten. A queue whose broker cannot be reached is
        logged and kept for the next round.
        """
        if self._local is not None:
            local = self._local
            await asyncio.to_thread(local.persist_all, list(assigned))
            return
        assert self._remote is not None
        table = self._remote.to_persist(assigned)
        await self.write(table, oneway=oneway)

    async def write(self, offsets: Mapping[MessageQueue, int], *, oneway: bool = False) -> None:
        """Send these offsets to the brokers (CLUSTERING) or the file (BROADCASTING)."""
        if self._local is not None:
            for mq, offset in offsets.items():
                self._local.update(mq, offset)
            await self.persist(list(offsets))
            return
        failed: list[str] = []
        for mq, offset in offsets.items():
            try:
                addr = await self.offset_addr(mq)
                await self._api.update_consumer_offset(
                    addr, self.group, mq.topic, mq.queue_id, offset, oneway=oneway
                )
            except ApogeeError as exc:
                failed.append(f"{mq}: {exc}")
        if failed:
            if not oneway:
                raise ClientError("committing offsets failed: " + "; ".join(failed))
            log.info("persisting offsets of %s failed: %s", self.group, "; ".join(failed))

    async def offset_addr(self, mq: MessageQueue) -> str:
        """Where ``mq``'s offsets are read and written: its master, else its lowest slave."""
        addrs = self._routes.broker_group(mq.broker_name)
        if not addrs:
            await self._routes.refresh(mq.topic)
            addrs = self._routes.broker_group(mq.broker_name)
            if not addrs:
                raise ClientError(f"broker {mq.broker_name} is not in the route")
        return addrs.get(MASTER_ID) or addrs[min(addrs)]

    async def master(self, mq: MessageQueue) -> str:
        """The address of the master of ``mq``'s broker (the route refreshed if needed)."""
        addr = self._routes.master_addr(mq.broker_name)
        if addr is None:
            await self._routes.refresh(mq.topic)
            addr = self._routes.master_addr(mq.broker_name)
            if addr is None:
                raise ClientError(f"broker {mq.broker_name} has no master in the route")
        return addr
