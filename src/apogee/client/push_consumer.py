"""The push consumer: messages delivered to a listener, or to ``async for``.

Owns: PushConsumer, the composition root of a push consumer: a ConsumerCore
(membership, rebalancing, fetchers, offsets) with a ConcurrentService or an
OrderlyService (and for orderly CLUSTERING, a LockKeeper and its renewal
timer). The rules live in those modules; what is here is wiring and API::

    async with PushConsumer("orders-app", namesrv="127.0.0.1:9876") as consumer:
        consumer.subscribe("orders", "created || paid")
        async for msg in consumer:
            handle(msg)

With ``listener=`` (a plain function or a coroutine function taking one
message) the consumer calls it instead, and ``async for`` is refused. In
``async for``, a message is done when the loop asks for the next one;
``await consumer.reconsume_later(msg)`` marks it failed instead. Leaving
``async with`` by an exception leaves the last message not done: it is
delivered again (to this group) after a restart or a rebalance.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from apogee._util.periodic import PeriodicTask
from apogee.client.allocate import AllocateStrategy
from apogee.client.consume_concurrently import ConcurrentService
from apogee.client.consume_orderly import LockKeeper, OrderlyService
from apogee.client.consumer_config import PushConsumerConfig, allocate_strategy, timestamp_ms
from apogee.client.consumer_config import consume_from as parse_consume_from
from apogee.client.consumer_config import message_model as parse_message_model
from apogee.client.consumer_core import PQ, ConsumerCore
from apogee.client.direct import consume_directly
from apogee.client.fetcher import Fetcher
from apogee.client.instance import DEFAULT_INSTANCE_NAME, InstanceConfig
from apogee.client.listener import Listener, Retrier
from apogee.client.process_queue import FlowLimits
from apogee.client.subscriptions import build_subscription
from apogee.errors import ClientClosedError, ClientError
from apogee.model.client import ConsumeFromWhere, MessageModel, MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.model.subscription import SUB_ALL
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.tls import client_ssl_context

log = logging.getLogger(__name__)

#: how long closing waits for listener calls in flight
CLOSE_WAIT_S = 10.0
#: how long a queue given up waits for its orderly message in hand
QUIESCE_WAIT_S = 1.0


class PushConsumer(ConsumerCore):
    def __init__(
        self,
        group: str,
        *,
        namesrv: str | Sequence[str],
        listener: Listener | None = None,
        orderly: bool = False,
        message_model: str | MessageModel = MessageModel.CLUSTERING,
        consume_from: str | ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: float | datetime | None = None,
        allocate: str | AllocateStrategy = "AVG",
        consume_concurrency: int = 20,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int | None = None,
        retry_delay_level: int = 0,
        suspend_time: float = 1.0,
        lock_interval: float = 20.0,
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
        config = PushConsumerConfig(
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
            orderly=orderly,
            consume_concurrency=consume_concurrency,
            consume_concurrently_max_span=consume_concurrently_max_span,
            max_reconsume_times=max_reconsume_times,
            retry_delay_level=retry_delay_level,
            suspend_time_s=suspend_time,
            lock_interval_s=lock_interval,
        )
        if listener is not None and not callable(listener):
            raise ClientError(f"listener: {listener!r} is not callable")
        instance_config = InstanceConfig(
            instance_name=instance_name,
            poll_namesrv_interval_s=poll_namesrv_interval,
            heartbeat_interval_s=heartbeat_interval,
            persist_offsets_interval_s=persist_offsets_interval,
            credentials=credentials,
            tls=client_ssl_context(tls),
        )
        namesrvs = namesrv if isinstance(namesrv, str) else list(namesrv)
        super().__init__(config, namesrvs, instance_config, orderly=orderly)
        self.push_config = config
        self._listener = listener
        self._service: ConcurrentService | OrderlyService | None = None
        self._locks: LockKeeper | None = None
        self._lock_timer: PeriodicTask | None = None

    # -- subscriptions ------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = SUB_ALL, *, sql: str | None = None) -> None:
        """Read ``topic``: messages whose tag matches ``expression`` (``"*"``, ``"A || B"``),
        or whose properties match the SQL92 selector ``sql`` (brokers need
        ``enablePropertyFilter=true``). Subscribing again changes the subscription.
        """
        sub = build_subscription(topic, expression, sql=sql)
        if self.subscriptions.add(sub) and self.started:
            self.instance.spawn(self._subscriptions_changed(topic))

    def unsubscribe(self, topic: str) -> None:
        if self.subscriptions.remove(topic) and self.started:
            self.instance.spawn(self._subscriptions_changed(topic))

    async def _subscriptions_changed(self, topic: str) -> None:
        await self._announce_subscriptions()
        sub = self.subscriptions.get(topic)
        for mq, fetcher in list(self.fetchers.items()):
            # the queues already read pull with the new expression from the committed offset
            if sub is not None and mq.topic == topic and fetcher.sub is not sub:
                offset = self.offsets.get(mq)
                self._restart_queue(mq, fetcher.start_offset if offset is None else offset)
        self.request_rebalance()

    # -- lifetime --------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the group: heartbeats, a first rebalance, pulling the queues it got."""
        if self.started:
            return
        await self._start()

    async def _start(self) -> None:
        await self._start_instance()
        try:
            instance = self.instance
            cfg = self.push_config
            clustering = cfg.message_model is MessageModel.CLUSTERING
            retrier = None
            if clustering:
                retrier = Retrier(
                    instance.broker_api,
                    instance.routes,
                    cfg.group,
                    max_reconsume_times=cfg.reconsume_limit,
                    delay_level=cfg.retry_delay_level,
                )
            if cfg.orderly:
                self._service = OrderlyService(
                    self.offsets,
                    retrier,
                    listener=self._listener,
                    concurrency=cfg.consume_concurrency,
                    suspend_s=cfg.suspend_time_s,
                    reconsume_limit=cfg.reconsume_limit,
                    must_lock=clustering,
                    spawn=instance.spawn,
                )
                if clustering:
                    self._locks = LockKeeper(
                        instance.broker_api, instance.routes, cfg.group, instance.client_id
                    )
                    self._lock_timer = PeriodicTask(
                        "orderly-locks", cfg.lock_interval_s, self._renew_locks
                    )
                    self._lock_timer.start()
            else:
                self._service = ConcurrentService(
                    self.offsets,
                    retrier,
                    listener=self._listener,
                    concurrency=cfg.consume_concurrency,
                    spawn=instance.spawn,
                )
            await self._join()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Finish the messages in hand, persist offsets, leave the group."""
        if self._lock_timer is not None:
            await self._lock_timer.stop()
            self._lock_timer = None
        await self._close()

    async def _before_close(self) -> None:
        if self._service is not None:
            await self._service.stop(CLOSE_WAIT_S)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._listener is None and self._service is not None:
            self._service.settle_current(exc_type is None)
        await self.close()

    # -- async for -----------------------------------------------------------------------

    def __aiter__(self) -> Self:
        if self._listener is not None:
            raise ClientError("this consumer has a listener: it cannot be iterated too")
        return self

    async def __anext__(self) -> ReceivedMessage:
        service = self._service
        if service is None:
            raise ClientClosedError(f"consumer {self.group} is not started (or closed)")
        msg = await service.next_message()
        if msg is None:
            raise StopAsyncIteration
        return msg

    async def reconsume_later(self, msg: ReceivedMessage) -> None:
        """The message ``async for`` gave last failed: retry it later (see the module)."""
        if self._service is None:
            raise ClientClosedError(f"consumer {self.group} is not started (or closed)")
        await self._service.reconsume_later(msg)

    async def consume_directly(self, msg: ReceivedMessage) -> Mapping[str, object]:
        """An admin hands ``msg`` to this consumer's listener (``apogee.client.direct``)."""
        if self._listener is None:
            return await super().consume_directly(msg)
        return await consume_directly(self._listener, msg, self.group, orderly=self._orderly)

    # -- ConsumerCore hooks -----------------------------------------------------------------

    def _deliver(self, fetcher: Fetcher, msgs: list[ReceivedMessage], max_offset: int) -> None:
        service = self._service
        if service is not None:
            service.deliver(fetcher, msgs, max_offset)

    def _flow_limits(self) -> FlowLimits:
        cfg = self.push_config
        return FlowLimits(
            cfg.pull_threshold_for_queue,
            cfg.pull_threshold_size_for_queue_mib,
            cfg.consume_concurrently_max_span,
        )

    async def _queue_adding(self, mq: MessageQueue, pq: PQ) -> bool:
        if self._locks is None:
            return True
        return bool(await self._locks.renew({mq: pq}))

    async def _queue_dropped(self, mq: MessageQueue, pq: PQ) -> None:
        if isinstance(self._service, OrderlyService):
            await self._service.quiesce(pq, QUIESCE_WAIT_S)

    async def _queue_removed(self, mq: MessageQueue, pq: PQ) -> None:
        if self._locks is not None:
            pq.locked = False
            await self._locks.unlock([mq])

    async def _renew_locks(self) -> None:
        if self._locks is not None:
            await self._locks.renew({mq: f.pq for mq, f in self.fetchers.items()})

    def _running_properties(self) -> dict[str, object]:
        cfg = self.push_config
        service = self._service
        return {
            "consumeThreadMax": cfg.consume_concurrency,
            "maxReconsumeTimes": cfg.reconsume_limit,
            "consumed": 0 if service is None else service.consumed,
            "consumeFailed": 0 if service is None else service.failed,
        }

    def __repr__(self) -> str:
        state = "started" if self.started else "stopped"
        return f"<PushConsumer group={self.group} {state}>"
