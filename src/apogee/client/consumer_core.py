"""What the push and lite pull consumers share: membership, rebalancing, the queues read.

Owns: :class:`ConsumerCore`, the base of PushConsumer and LitePullConsumer.
It joins the shared ClientInstance as a ``members.ConsumerMember``, keeps
the subscriptions and the offsets, runs the rebalance loop, and keeps the
assigned queues, each with its ProcessQueue and the task of its Fetcher.
What happens to pulled messages is the subclass's (``_deliver``), as are
the checks before a queue is taken (``_queue_adding``: an orderly consumer
locks it) and after it is given up (``_queue_removed``).

Rules (RocketMQ RebalanceImpl, DefaultMQPushConsumerImpl):

* rebalancing runs at start, every ``rebalance_interval_s``, when a broker
  says the group's members changed (NOTIFY_CONSUMER_IDS_CHANGED) and when
  the subscriptions change; rounds never overlap, and requests made during
  a round start one more after it. A round that could not tell a topic's
  queues (no route yet, no broker answering) asks for another one a second
  later;
* a queue given up is dropped (its fetcher stops, its held messages are
  not delivered) and its offset persisted, so the next owner starts where
  this one stopped; a queue taken starts at ``ConsumerOffsets.start_offset``;
* assigned mode (``_fixed`` queues, LitePullConsumer.assign) never rebalances.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from apogee.client.allocate import AllocateStrategy
from apogee.client.consumer_config import ConsumerConfig
from apogee.client.consumer_offsets import ConsumerOffsets
from apogee.client.fetcher import Fetcher, PullSettings
from apogee.client.instance import ClientInstance, InstanceConfig
from apogee.client.offset_store import LocalOffsetStore
from apogee.client.process_queue import FlowLimits, ProcessQueue
from apogee.client.rebalance import Rebalancer, diff
from apogee.client.subscriptions import Subscriptions
from apogee.errors import ApogeeError, ClientClosedError, ClientError
from apogee.model.client import ConsumerData, ConsumeType, MessageModel, MessageQueue
from apogee.model.received import ReceivedMessage
from apogee.model.subscription import SubscriptionData
from apogee.protocol.admin_bodies import mq_key

log = logging.getLogger(__name__)

PQ = ProcessQueue[ReceivedMessage]
#: a rebalance that could not tell a topic's queues tries again this soon
UNKNOWN_RETRY_S = 1.0
PUSH = ConsumeType.CONSUME_PASSIVELY


def _strategy_name(strategy: AllocateStrategy) -> str:
    return getattr(strategy, "__name__", type(strategy).__name__)


class ConsumerCore:
    consume_type = ConsumeType.CONSUME_PASSIVELY
    #: whether ``_paused`` can ever say yes (else fetchers never ask)
    pausable = False

    def __init__(
        self,
        config: ConsumerConfig,
        namesrv: str | list[str],
        instance_config: InstanceConfig,
        *,
        orderly: bool = False,
    ) -> None:
        self.config = config
        self.subscriptions = Subscriptions(
            config.group, config.message_model, with_retry=self.consume_type is PUSH
        )
        self._namesrv = namesrv
        self._instance_config = instance_config
        self._orderly = orderly
        self._instance: ClientInstance | None = None
        self._offsets: ConsumerOffsets | None = None
        self._rebalancer: Rebalancer | None = None
        #: the queues read now, each with its fetcher (which holds its ProcessQueue)
        self.fetchers: dict[MessageQueue, Fetcher] = {}
        self._fixed: set[MessageQueue] | None = None
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._round_lock: asyncio.Lock | None = None
        self._closing = False
        #: rebalance rounds completed (tests wait on it)
        self.rebalances = 0

    # -- what subclasses add ---------------------------------------------------------------

    def _deliver(self, fetcher: Fetcher, msgs: list[ReceivedMessage], max_offset: int) -> None:
        """Take what a pull found: put it into ``fetcher.pq`` (or consume it at once)."""
        raise NotImplementedError

    def _new_process_queue(self) -> PQ:
        """The ProcessQueue of a queue taken on (a LitePullConsumer's counts per batch)."""
        return ProcessQueue()

    async def _queue_adding(self, mq: MessageQueue, pq: PQ) -> bool:
        """May ``mq`` be taken now, into ``pq``? (An orderly consumer locks it first.)"""
        return True

    async def _queue_dropped(self, mq: MessageQueue, pq: PQ) -> None:
        """``mq`` is being given up: ``pq`` is dropped, its offset not yet persisted."""

    async def _queue_removed(self, mq: MessageQueue, pq: PQ) -> None:
        """``mq`` was given up; its offset is persisted."""

    def _queue_starts(self, mq: MessageQueue, offset: int) -> None:
        """Reading ``mq`` starts at ``offset``: the group's offset from now on, so that a
        consumer that stops before it consumed anything does not move the start of a
        new group (CONSUME_FROM_LAST) past what arrived meanwhile."""
        self.offsets.update(mq, offset, increase_only=False)

    def _committed(self, mq: MessageQueue) -> int | None:
        """The offset a pull may carry as the group's committed offset."""
        return self.offsets.get(mq)

    def _offset_moved(self, mq: MessageQueue, offset: int, forced: bool) -> None:
        self.offsets.update(mq, offset, increase_only=not forced)

    def _paused(self, mq: MessageQueue) -> bool:
        return False

    def _running_properties(self) -> dict[str, object]:
        return {}

    # -- state -------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientClosedError(f"consumer {self.group} is not started (or closed)")
        return self._instance

    @property
    def offsets(self) -> ConsumerOffsets:
        if self._offsets is None:
            raise ClientClosedError(f"consumer {self.group} is not started (or closed)")
        return self._offsets

    @property
    def started(self) -> bool:
        return self._instance is not None

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer reads now."""
        return set(self.fetchers)

    # -- lifetime ------------------------------------------------------------------------------

    async def _start_instance(self) -> None:
        """Join the shared client instance; offsets and rebalancing ready, nothing pulled."""
        instance = await ClientInstance.acquire(self._namesrv, self._instance_config)
        try:
            cfg = self.config
            local = None
            if cfg.message_model is MessageModel.BROADCASTING:
                local = LocalOffsetStore(instance.client_id, cfg.group, base_dir=cfg.offset_dir)
            offsets = ConsumerOffsets(
                instance.broker_api, instance.routes, cfg.group, cfg.message_model, local=local
            )
            await offsets.load()
        except BaseException:
            await instance.release()
            raise
        self._offsets = offsets
        self._rebalancer = Rebalancer(
            instance.broker_api,
            instance.routes,
            cfg.group,
            instance.client_id,
            model=cfg.message_model,
            strategy=cfg.allocate,
        )
        self._instance = instance
        self._closing = False
        self._wake = asyncio.Event()
        self._round_lock = asyncio.Lock()

    async def _join(self) -> None:
        """Announce the consumer (heartbeats), take queues, keep rebalancing."""
        await self.instance.register_consumer(self)
        await self.rebalance()
        self._loop_task = asyncio.ensure_future(self._rebalance_loop())

    async def _close(self) -> None:
        instance = self._instance
        if instance is None:
            return
        self._closing = True
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await self._before_close()
            try:
                await self.offsets.persist(self.assignment(), oneway=False)
            except ApogeeError as exc:
                log.warning("persisting offsets of %s at close failed: %s", self.group, exc)
            for mq in list(self.fetchers):
                await self._remove_queue(mq, persist=False)
            await instance.unregister_consumer(self.group)
        finally:
            self._instance = None
            await instance.release()

    async def _before_close(self) -> None:
        """Finish what is in flight before the offsets are persisted (subclasses)."""

    # -- ConsumerMember ------------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        cfg = self.config
        return ConsumerData(
            cfg.group,
            self.consume_type,
            cfg.message_model,
            cfg.consume_from,
            self.subscriptions.all(),
        )

    async def persist_offsets(self) -> None:
        if self._offsets is not None:
            await self._offsets.persist(self.assignment())

    def on_consumer_ids_changed(self) -> None:
        self.request_rebalance()

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        mine = {mq: o for mq, o in offsets.items() if mq.topic == topic}
        for mq, offset in mine.items():
            self.offsets.update(mq, offset, increase_only=False)
            if mq in self.fetchers:
                self._restart_queue(mq, offset)
        await self.offsets.write(mine)

    def running_info(self) -> Mapping[str, object]:
        cfg = self.config
        props: dict[str, object] = {
            "consumerGroup": cfg.group,
            "consumeType": self.consume_type.name,
            "messageModel": cfg.message_model.name,
            "consumeFromWhere": cfg.consume_from.name,
            "consumeOrderly": str(self._orderly).lower(),
            "allocateMessageQueueStrategy": _strategy_name(cfg.allocate),
            "pullBatchSize": cfg.pull_batch_size,
            **self._running_properties(),
        }
        mq_table: dict[str, dict[str, Any]] = {}
        for mq, fetcher in self.fetchers.items():
            pq = fetcher.pq
            mq_table[mq_key(mq)] = {
                "commitOffset": self.offsets.get(mq),
                "nextPullOffset": fetcher.next_offset,
                "cachedMsgCount": pq.count,
                "cachedMsgSizeInMiB": pq.size_mib,
                "locked": pq.locked,
                "droped": pq.dropped,  # RocketMQ's spelling
                "pullBrokerId": fetcher.broker_id,
            }
        return {
            "properties": props,
            "subscriptionSet": [_sub_json(s) for s in self.subscriptions.all()],
            "mqTable": mq_table,
        }

    async def consume_directly(self, msg: ReceivedMessage) -> Mapping[str, object]:
        """Only a push consumer with a listener can (see ``apogee.client.direct``)."""
        raise ClientError(
            f"consumer group {self.config.group} here is a {type(self).__name__} without a "
            "listener: it has nothing to hand a message to directly"
        )

    async def _announce_subscriptions(self) -> None:
        """Heartbeat the brokers of every subscribed topic now (routes fetched first)."""
        instance = self.instance
        for topic in self.subscriptions.topics():
            try:
                await instance.routes.get_route(topic)
            except ApogeeError as exc:
                log.info("no route for %s yet: %s", topic, exc)
        await instance.heartbeat_now()

    # -- rebalancing ---------------------------------------------------------------------------

    def request_rebalance(self) -> None:
        """Rebalance soon (in the background)."""
        if self._wake is not None:
            self._wake.set()

    async def _rebalance_loop(self) -> None:
        assert self._wake is not None
        wake = self._wake
        while not self._closing:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel
            # that comes as the event is set, and close() would wait for ever
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.rebalance_interval_s):
                    await wake.wait()
            wake.clear()
            try:
                await self.rebalance()
            except ApogeeError as exc:
                log.info("rebalance of %s failed: %s", self.group, exc)
            except Exception:
                log.exception("rebalance of %s failed", self.group)

    async def rebalance(self) -> None:
        """One rebalance round over every subscribed topic (or the assigned queues)."""
        assert self._round_lock is not None
        async with self._round_lock:
            if self._closing:
                return
            if self._fixed is not None:
                await self._apply(None, set(self._fixed))
            else:
                rebalancer = self._rebalancer
                assert rebalancer is not None
                unknown = False
                for topic in self.subscriptions.topics():
                    wanted = await rebalancer.allocate(topic)
                    if wanted is None:
                        unknown = True
                    else:
                        await self._apply(topic, wanted)
                if unknown:  # a new topic's route (a retry topic's, say) comes soon: look again
                    asyncio.get_running_loop().call_later(UNKNOWN_RETRY_S, self.request_rebalance)
                for mq in [mq for mq in self.fetchers if mq.topic not in self.subscriptions]:
                    await self._remove_queue(mq)
            self.rebalances += 1

    async def _apply(self, topic: str | None, wanted: set[MessageQueue]) -> None:
        current = {mq for mq in self.fetchers if topic is None or mq.topic == topic}
        added, removed = diff(current, wanted)
        for mq in sorted(removed):
            await self._remove_queue(mq)
        for mq in sorted(added):
            if self._closing:
                return
            pq = self._new_process_queue()
            try:
                if not await self._queue_adding(mq, pq):
                    continue
                offset = await self.offsets.start_offset(
                    mq, self.config.consume_from, self.config.consume_timestamp_ms
                )
            except ApogeeError as exc:
                log.info("%s: not reading %s this round: %s", self.group, mq, exc)
                continue
            self._queue_starts(mq, offset)
            self._add_queue(mq, offset, pq=pq)

    def _subscription_of(self, mq: MessageQueue) -> SubscriptionData:
        sub = self.subscriptions.get(mq.topic)
        if sub is None:  # assigned queues of a topic never subscribed: everything
            sub = SubscriptionData.build(mq.topic, "*")
        return sub

    def _pull_settings(self) -> PullSettings:
        cfg = self.config
        return PullSettings(
            group=cfg.group,
            batch_size=cfg.pull_batch_size,
            suspend_s=cfg.pull_suspend_s,
            request_timeout_s=self.instance.config.request_timeout_s,
            limits=self._flow_limits(),
            orderly=self._orderly,
            clustering=cfg.message_model is MessageModel.CLUSTERING,
        )

    def _flow_limits(self) -> FlowLimits:
        cfg = self.config
        return FlowLimits(cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue_mib)

    def _add_queue(self, mq: MessageQueue, offset: int, *, pq: PQ | None = None) -> Fetcher:
        instance = self.instance
        pq = pq or self._new_process_queue()
        fetcher = Fetcher(
            instance.broker_api,
            instance.routes,
            self._pull_settings(),
            mq,
            pq,
            offset=offset,
            sub=self._subscription_of(mq),
            deliver=self._deliver,
            committed=self._committed,
            tag_filter=self.subscriptions.tag_filter(mq.topic),
            paused=self._paused if self.pausable else None,
            on_offset_moved=self._offset_moved,
        )
        self.fetchers[mq] = fetcher
        # a fetcher whose queue is dropped ends after its pull in flight, whose
        # answer it ignores: cancelling it would leave the broker an answer no
        # request waits for
        instance.spawn(fetcher.run())
        return fetcher

    async def _remove_queue(self, mq: MessageQueue, *, persist: bool = True) -> None:
        fetcher = self.fetchers.pop(mq, None)
        if fetcher is None:
            return
        pq = fetcher.pq
        pq.dropped = True
        await self._queue_dropped(mq, pq)
        if persist:
            offset = self.offsets.get(mq)
            if offset is not None:
                try:
                    await self.offsets.write({mq: offset}, oneway=True)
                except ApogeeError as exc:
                    log.info("persisting the offset of %s failed: %s", mq, exc)
        await self._queue_removed(mq, pq)
        if self.config.message_model is MessageModel.CLUSTERING:
            self.offsets.forget(mq)

    def _restart_queue(self, mq: MessageQueue, offset: int) -> Fetcher:
        """Read ``mq`` again from ``offset``: what is held of it is dropped."""
        old = self.fetchers.pop(mq, None)
        if old is not None:
            old.pq.dropped = True
        fresh = self._new_process_queue()
        if old is not None:
            fresh.locked, fresh.last_lock_ms = old.pq.locked, old.pq.last_lock_ms
        return self._add_queue(mq, offset, pq=fresh)


def _sub_json(sub: SubscriptionData) -> dict[str, object]:
    return {
        "topic": sub.topic,
        "subString": sub.sub_string,
        "expressionType": sub.expression_type,
        "subVersion": sub.sub_version,
        "tagsSet": list(sub.tags_set),
        "codeSet": list(sub.code_set),
        "classFilterMode": sub.class_filter_mode,
    }
