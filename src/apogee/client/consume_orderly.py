"""Orderly consumption: each queue's messages one at a time, in offset order.

Owns: :class:`OrderlyService`, which an ``orderly`` PushConsumer hands
pulled messages to, and :class:`LockKeeper`, which takes and renews the
broker locks that keep a queue with one consumer of the group.

Rules (RocketMQ ConsumeMessageOrderlyService, RebalanceImpl.lock):

* one task per queue takes the lowest held message (``ProcessQueue.take``),
  hands it to the listener and, on success, commits it
  (``ProcessQueue.commit``: the queue's offset moves past it). At most
  ``concurrency`` listener calls run at once, over all queues;
* a CLUSTERING consumer consumes a queue only while it holds the queue's
  broker lock (LOCK_BATCH_MQ, renewed every ``lock_interval_s``; the client
  counts a lock as lost 30 s after its last renewal, the broker after 60 s);
* a failure suspends the queue: the message is given back, its reconsume
  times raised by one, and handed over again after ``suspend_s``, before
  any later message of the queue. Once it failed ``reconsume_limit`` times
  it goes to the dead-letter queue (CONSUMER_SEND_MSG_BACK with delay level
  -1; a BROADCASTING consumer drops it) and the queue moves on;
* a queue given up finishes the message in hand (``quiesce``) before its
  offset is persisted and its lock released, so the next owner starts
  right after it;
* without a listener, ``next_message`` hands the messages to ``async for``
  (a message is done when the next one is asked for), the same rules holding.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

from apogee.client.broker_api import BrokerApi
from apogee.client.consume_concurrently import Spawn
from apogee.client.consumer_offsets import ConsumerOffsets
from apogee.client.fetcher import Fetcher
from apogee.client.listener import (
    DLQ_DELAY_LEVEL,
    ConsumeStatus,
    Listener,
    Retrier,
    consume_one,
)
from apogee.client.process_queue import ProcessQueue
from apogee.client.route_cache import RouteCache
from apogee.errors import ApogeeError
from apogee.model.client import MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.protocol.bodies import LockBatchRequestBody

log = logging.getLogger(__name__)

NOT_LOCKED_DELAY_S = 0.1


class LockKeeper:
    """Broker locks of orderly queues, per master."""

    def __init__(self, api: BrokerApi, routes: RouteCache, group: str, client_id: str) -> None:
        self._api = api
        self._routes = routes
        self.group = group
        self.client_id = client_id

    def _by_master(self, mqs: Collection[MessageQueue]) -> dict[str, list[MessageQueue]]:
        out: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            addr = self._routes.master_addr(mq.broker_name)
            if addr is not None:
                out.setdefault(addr, []).append(mq)
        return out

    async def lock(self, mqs: Collection[MessageQueue]) -> set[MessageQueue]:
        """Lock ``mqs`` for this client; those it holds now."""
        held: set[MessageQueue] = set()
        for addr, queues in self._by_master(mqs).items():
            body = LockBatchRequestBody(self.group, self.client_id, tuple(sorted(queues)))
            try:
                held.update(await self._api.lock_batch(addr, body))
            except ApogeeError as exc:
                log.info("locking %d queues on %s failed: %s", len(queues), addr, exc)
        return held & set(mqs)

    async def renew(self, queues: Mapping[MessageQueue, ProcessQueue[Any]]) -> set[MessageQueue]:
        """Lock (again) the queues of these ProcessQueues and mark each locked or not."""
        if not queues:
            return set()
        held = await self.lock(list(queues))
        now = time.time_ns() // 1_000_000
        for mq, pq in queues.items():
            pq.locked = mq in held
            if pq.locked:
                pq.last_lock_ms = now
        return held

    async def unlock(self, mqs: Collection[MessageQueue]) -> None:
        for addr, queues in self._by_master(mqs).items():
            body = LockBatchRequestBody(self.group, self.client_id, tuple(sorted(queues)))
            try:
                await self._api.unlock_batch(addr, body, oneway=True)
            except ApogeeError as exc:
                log.info("unlocking %d queues on %s failed: %s", len(queues), addr, exc)


class OrderlyService:
    def __init__(
        self,
        offsets: ConsumerOffsets,
        retrier: Retrier | None,
        *,
        listener: Listener | None,
        concurrency: int,
        suspend_s: float,
        reconsume_limit: int,
        must_lock: bool,
        spawn: Spawn,
    ) -> None:
        self._offsets = offsets
        self._retrier = retrier  # None: BROADCASTING, a message past the limit is dropped
        self._listener: Listener = self._hand_over if listener is None else listener
        self._slots = asyncio.Semaphore(concurrency)
        self._suspend_s = suspend_s
        self._limit = reconsume_limit
        self._must_lock = must_lock
        self._spawn = spawn
        self._running: dict[int, asyncio.Task[None]] = {}  # id(ProcessQueue) -> its task
        self._stopping = False
        # async for: messages waiting to be handed out, each with its outcome
        self._waiting: deque[tuple[ReceivedMessage, asyncio.Future[bool]]] = deque()
        self._current: tuple[ReceivedMessage, asyncio.Future[bool]] | None = None
        self._arrived = asyncio.Event()
        self.consumed = 0
        self.failed = 0

    def deliver(self, fetcher: Fetcher, msgs: list[ReceivedMessage], max_offset: int) -> None:
        fetcher.pq.put(msgs, max_offset=max_offset)
        key = id(fetcher.pq)
        if self._stopping or key in self._running:
            return
        self._running[key] = self._spawn(self._consume_queue(fetcher))

    async def _consume_queue(self, fetcher: Fetcher) -> None:
        try:
            await self._consume(fetcher)
        finally:
            # synchronously with the last take: a deliver after it starts a new task
            key = id(fetcher.pq)
            if self._running.get(key) is asyncio.current_task():
                del self._running[key]

    async def _consume(self, fetcher: Fetcher) -> None:
        pq = fetcher.pq
        listener = self._listener
        while not self._stopping and not pq.dropped:
            if self._must_lock and (not pq.locked or pq.is_lock_expired()):
                await asyncio.sleep(NOT_LOCKED_DELAY_S)
                continue
            taken = pq.take(1)
            if not taken:
                return
            msg = taken[0]
            async with self._slots:
                ok = await consume_one(listener, msg)
            if ok:
                self._commit(fetcher)
                continue
            if self.stopping:
                pq.rollback()
                return
            self.failed += 1
            if msg.reconsume_times >= self._limit and await self._give_up(fetcher, msg):
                self._commit(fetcher)
                continue
            msg.reconsume_times += 1
            pq.rollback()
            await asyncio.sleep(self._suspend_s)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def _commit(self, fetcher: Fetcher) -> None:
        offset = fetcher.pq.commit()
        if offset is not None:
            self.consumed += 1
            self._offsets.update(fetcher.mq, offset, increase_only=False)

    async def _give_up(self, fetcher: Fetcher, msg: ReceivedMessage) -> bool:
        """Past the retry limit: to the dead-letter queue; False if the broker refused it."""
        if self._retrier is None:
            log.warning("BROADCASTING: message %s failed for good, dropped", msg.client_msg_id)
            return True
        return await self._retrier.send_back(fetcher.mq, msg, DLQ_DELAY_LEVEL)

    async def quiesce(self, pq: object, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) for the message in hand of ``pq``, a dropped queue."""
        task = self._running.get(id(pq))
        if task is not None:
            await asyncio.wait([task], timeout=timeout_s)

    # -- async for ---------------------------------------------------------------------

    async def _hand_over(self, msg: ReceivedMessage) -> ConsumeStatus:
        outcome: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((msg, outcome))
        self._arrived.set()
        return ConsumeStatus.SUCCESS if await outcome else ConsumeStatus.RECONSUME_LATER

    async def next_message(self) -> ReceivedMessage | None:
        """The next message for ``async for``; the one before is done. None once stopped."""
        self.settle_current(True)
        while True:
            while self._waiting:
                msg, outcome = self._waiting.popleft()
                if not outcome.done():
                    self._current = (msg, outcome)
                    return msg
            if self._stopping:
                return None
            self._arrived.clear()
            await self._arrived.wait()

    async def reconsume_later(self, msg: ReceivedMessage) -> None:
        current = self._current
        if current is None or current[0] is not msg:
            raise ValueError("reconsume_later takes the message async for gave last")
        self.settle_current(False)

    def settle_current(self, ok: bool) -> None:
        current, self._current = self._current, None
        if current is not None and not current[1].done():
            current[1].set_result(ok)

    # -- stopping --------------------------------------------------------------------------

    async def stop(self, timeout_s: float) -> None:
        """Take no new messages; wait up to ``timeout_s`` for the ones in hand."""
        self._stopping = True
        self._arrived.set()
        while self._waiting:  # never handed out: given back, not consumed
            _, outcome = self._waiting.popleft()
            if not outcome.done():
                outcome.set_result(False)
        tasks: list[asyncio.Task[Any]] = list(self._running.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
