"""The lite pull consumer: the application polls, seeks and commits.

Owns: LitePullConsumer (RocketMQ's DefaultLitePullConsumer): the queues of
subscribed topics, rebalanced across the group (``subscribe``), or queues
named outright (``assign``); fetchers pull them in the background into one
buffer that ``poll`` empties::

    async with LitePullConsumer("spark-reader", namesrv="127.0.0.1:9876") as consumer:
        consumer.subscribe("orders")
        while True:
            for msg in await consumer.poll(timeout=1.0):
                handle(msg)

Rules:

* ``poll`` returns the messages of whole pulled batches (at most
  ``max_messages``, the last batch cut), in offset order per queue, none of
  a paused queue, and moves each queue's *position* past them;
* with ``auto_commit`` the positions become the group's offsets at the first
  ``poll`` after each ``auto_commit_interval`` (so what an earlier poll
  returned was handled, as with Kafka's consumer), and when the consumer
  closes; the client instance sends them to the brokers every 5 s.
  ``await commit()`` sends them at once and waits for the brokers;
* ``seek`` (an offset, ``seek_to_begin``, ``seek_to_end``,
  ``seek_by_timestamp``) drops what was fetched of the queue and reads on
  from there; the position moves, the committed offset only at a commit;
* pulls of all queues pause while ``pull_threshold_for_all`` messages wait
  in the buffer (and a queue's while it holds ``pull_threshold_for_queue``);
* a lite pull consumer never hands messages back: nothing is retried.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from apogee.client.allocate import AllocateStrategy
from apogee.client.consumer_config import LitePullConsumerConfig, allocate_strategy, timestamp_ms
from apogee.client.consumer_config import consume_from as parse_consume_from
from apogee.client.consumer_config import message_model as parse_message_model
from apogee.client.consumer_core import PQ, ConsumerCore
from apogee.client.fetcher import Fetcher
from apogee.client.fifo_queue import FifoProcessQueue
from apogee.client.instance import DEFAULT_INSTANCE_NAME, InstanceConfig
from apogee.client.offset_store import ReadOffsetType
from apogee.client.subscriptions import build_subscription
from apogee.errors import ClientError
from apogee.model.client import ConsumeFromWhere, ConsumeType, MessageModel, MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.model.subscription import SUB_ALL
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.tls import client_ssl_context

_Batch = tuple[Fetcher, list[ReceivedMessage]]


class LitePullConsumer(ConsumerCore):
    consume_type = ConsumeType.CONSUME_ACTIVELY
    pausable = True

    def __init__(
        self,
        group: str,
        *,
        namesrv: str | Sequence[str],
        message_model: str | MessageModel = MessageModel.CLUSTERING,
        consume_from: str | ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: float | datetime | None = None,
        allocate: str | AllocateStrategy = "AVG",
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_all: int = 10_000,
        rebalance_interval: float = 20.0,
        pull_suspend: float = 15.0,
        offset_dir: str | Path | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        poll_namesrv_interval: float = 30.0,
        heartbeat_interval: float = 30.0,
        persist_offsets_interval: float = 5.0,
        credentials: SessionCredentials | None = None,
        tls: bool | str | ssl.SSLContext = False,
    ) -> None:
        config = LitePullConsumerConfig(
            group,
            message_model=parse_message_model(message_model),
            consume_from=parse_consume_from(consume_from),
            consume_timestamp_ms=timestamp_ms(consume_timestamp),
            allocate=allocate_strategy(allocate),
            pull_batch_size=pull_batch_size,
            pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue,
            pull_suspend_s=pull_suspend,
            rebalance_interval_s=rebalance_interval,
            offset_dir=None if offset_dir is None else Path(offset_dir),
            auto_commit=auto_commit,
            auto_commit_interval_s=auto_commit_interval,
            pull_threshold_for_all=pull_threshold_for_all,
        )
        instance_config = InstanceConfig(
            instance_name=instance_name,
            poll_namesrv_interval_s=poll_namesrv_interval,
            heartbeat_interval_s=heartbeat_interval,
            persist_offsets_interval_s=persist_offsets_interval,
            credentials=credentials,
            tls=client_ssl_context(tls),
        )
        namesrvs = namesrv if isinstance(namesrv, str) else list(namesrv)
        super().__init__(config, namesrvs, instance_config)
        self.lite_config = config
        self._buffer: deque[_Batch] = deque()
        self._buffered = 0
        self._arrived = asyncio.Event()
        self._positions: dict[MessageQueue, int] = {}
        self._paused_queues: set[MessageQueue] = set()
        self._next_auto_commit = 0.0

    # -- what to read ------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = SUB_ALL, *, sql: str | None = None) -> None:
        """Read ``topic`` (its queues shared with the group's other consumers)."""
        if self._fixed is not None:
            raise ClientError("this consumer reads assigned queues: subscribe or assign, not both")
        if self.subscriptions.add(build_subscription(topic, expression, sql=sql)) and self.started:
            self.instance.spawn(self._changed())

    def unsubscribe(self, topic: str) -> None:
        if self.subscriptions.remove(topic) and self.started:
            self.instance.spawn(self._changed())

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Read exactly these queues (no rebalancing); replaces the previous assignment."""
        if self.subscriptions.user_topics():
            raise ClientError("this consumer subscribes to topics: subscribe or assign, not both")
        self._fixed = set(queues)
        if self.started:
            self.request_rebalance()

    async def _changed(self) -> None:
        await self._announce_subscriptions()
        self.request_rebalance()

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (to ``assign`` some of them)."""
        routes = self.instance.routes
        await routes.refresh(topic)
        return routes.subscribe_queues(topic)

    # -- lifetime ------------------------------------------------------------------------

    async def start(self) -> None:
        if self.started:
            return
        await self._start_instance()
        self._next_auto_commit = time.monotonic() + self.lite_config.auto_commit_interval_s
        try:
            await self._join()
        except BaseException:
            await self._close()
            raise

    async def close(self) -> None:
        """Commit the positions (with ``auto_commit``), persist, leave the group."""
        if self.started and self.lite_config.auto_commit:
            self._commit_positions(self._positions)
        await self._close()
        self._buffer.clear()
        self._buffered = 0
        self._arrived.set()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- polling -----------------------------------------------------------------------------

    async def poll(
        self, timeout: float = 5.0, max_messages: int | None = None
    ) -> list[ReceivedMessage]:
        """The messages fetched so far, waiting up to ``timeout`` s for some; [] if none came."""
        if max_messages is not None and max_messages < 1:
            raise ClientError(f"max_messages must be >= 1, got {max_messages}")
        self.instance  # noqa: B018  # raises when not started
        if self.lite_config.auto_commit and time.monotonic() >= self._next_auto_commit:
            self._commit_positions(self._positions)
            self._next_auto_commit = time.monotonic() + self.lite_config.auto_commit_interval_s
        deadline = time.monotonic() + timeout
        while True:
            out = self._take(max_messages)
            if out or not self.started:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            self._arrived.clear()
            try:
                async with asyncio.timeout(left):
                    await self._arrived.wait()
            except TimeoutError:
                return self._take(max_messages)

    def _take(self, limit: int | None) -> list[ReceivedMessage]:
        out: list[ReceivedMessage] = []
        skipped: list[_Batch] = []
        buffer = self._buffer
        while buffer and (limit is None or len(out) < limit):
            fetcher, msgs = buffer.popleft()
            self._buffered -= len(msgs)
            if fetcher.pq.dropped:
                continue
            mq = fetcher.mq
            if mq in self._paused_queues:
                skipped.append((fetcher, msgs))
                continue
            if limit is not None and len(out) + len(msgs) > limit:
                cut = limit - len(out)
                rest = msgs[cut:]
                msgs = msgs[:cut]
                buffer.appendleft((fetcher, rest))
                self._buffered += len(rest)
            out += msgs
            position = fetcher.pq.remove(msgs)
            if position is not None:
                self._positions[mq] = position
        for batch in reversed(skipped):
            buffer.appendleft(batch)
            self._buffered += len(batch[1])
        return out

    def _new_process_queue(self) -> PQ:
        # poll hands out whole batches front to back: bookkeeping per batch
        return FifoProcessQueue()

    def _deliver(self, fetcher: Fetcher, msgs: list[ReceivedMessage], max_offset: int) -> None:
        fetcher.pq.put(msgs, max_offset=max_offset)
        self._buffer.append((fetcher, msgs))
        self._buffered += len(msgs)
        self._arrived.set()

    def _paused(self, mq: MessageQueue) -> bool:
        full = self._buffered >= self.lite_config.pull_threshold_for_all
        return full or mq in self._paused_queues

    def _queue_starts(self, mq: MessageQueue, offset: int) -> None:
        self._positions[mq] = offset  # committed by the next (auto) commit

    async def _queue_dropped(self, mq: MessageQueue, pq: PQ) -> None:
        position = self._positions.get(mq)
        if self.lite_config.auto_commit and position is not None:
            self.offsets.update(mq, position, increase_only=False)

    async def _queue_removed(self, mq: MessageQueue, pq: PQ) -> None:
        self._positions.pop(mq, None)

    def _offset_moved(self, mq: MessageQueue, offset: int, forced: bool) -> None:
        # nothing of the queue waits in the buffer: the position follows the pulls
        old = self._positions.get(mq)
        if forced or old is None or offset > old:
            self._positions[mq] = offset

    # -- positions and commits ------------------------------------------------------------------

    def position(self, mq: MessageQueue) -> int | None:
        """The offset after the last message ``poll`` returned of ``mq`` (None: none yet)."""
        return self._positions.get(mq)

    def _commit_positions(self, positions: Mapping[MessageQueue, int]) -> dict[MessageQueue, int]:
        done = {mq: o for mq, o in positions.items() if mq in self.fetchers}
        for mq, offset in done.items():
            self.offsets.update(mq, offset, increase_only=False)
        return done

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Make ``offsets`` (default: every position) the group's and wait for the brokers."""
        done = self._commit_positions(self._positions if offsets is None else offsets)
        await self.offsets.write(done, oneway=False)

    async def committed(self, mq: MessageQueue) -> int | None:
        """The group's offset of ``mq`` as the broker (or the local file) keeps it."""
        return await self.offsets.read(mq, ReadOffsetType.READ_FROM_STORE)

    # -- seeking -------------------------------------------------------------------------------

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` on from ``offset`` (between its min and max offset)."""
        low, high = await self._bounds(mq)
        if not low <= offset <= high:
            raise ClientError(f"offset {offset} of {mq} is out of range {low}..{high}")
        self._seek(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        self._seek(mq, (await self._bounds(mq))[0])

    async def seek_to_end(self, mq: MessageQueue) -> None:
        self._seek(mq, (await self._bounds(mq))[1])

    async def seek_by_timestamp(self, mq: MessageQueue, when: float | datetime) -> None:
        """Read ``mq`` on from the first message stored at ``when`` (seconds or datetime)."""
        self._seek(mq, await self.offset_for_timestamp(mq, when))

    async def offset_for_timestamp(self, mq: MessageQueue, when: float | datetime) -> int:
        ms = timestamp_ms(when)
        assert ms is not None
        addr = await self.offsets.master(mq)
        return await self.instance.broker_api.search_offset(addr, mq.topic, mq.queue_id, ms)

    async def _bounds(self, mq: MessageQueue) -> tuple[int, int]:
        if mq not in self.fetchers:
            raise ClientError(f"{mq} is not assigned to this consumer")
        api = self.instance.broker_api
        addr = await self.offsets.master(mq)
        low = await api.get_min_offset(addr, mq.topic, mq.queue_id)
        return max(low, 0), await api.get_max_offset(addr, mq.topic, mq.queue_id)

    def _seek(self, mq: MessageQueue, offset: int) -> None:
        if mq not in self.fetchers:
            raise ClientError(f"{mq} is not assigned to this consumer")
        self._positions[mq] = offset
        self._restart_queue(mq, offset)

    # -- pausing ---------------------------------------------------------------------------------

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop fetching these queues and leave their fetched messages out of ``poll``."""
        self._paused_queues.update(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._paused_queues.difference_update(queues)
        self._arrived.set()

    def paused(self) -> set[MessageQueue]:
        return set(self._paused_queues)

    def _running_properties(self) -> dict[str, object]:
        cfg = self.lite_config
        return {"autoCommit": str(cfg.auto_commit).lower(), "buffered": self._buffered}

    def __repr__(self) -> str:
        state = "started" if self.started else "stopped"
        return f"<LitePullConsumer group={self.group} {state}>"
