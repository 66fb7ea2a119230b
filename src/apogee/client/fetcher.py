"""One queue's pull loop: long polling, flow control, the broker the pull goes to.

Owns: :class:`Fetcher`, the task that keeps pulling one assigned queue for a
consumer and hands what it found to the consumer's ``deliver``, and
:class:`PullSettings`, what every fetcher of a consumer shares.

Rules (RocketMQ DefaultMQPushConsumerImpl.pullMessage, PullAPIWrapper):

* before each pull: a dropped ProcessQueue ends the loop; a paused queue
  waits; flow control (``ProcessQueue.flow_control``: held messages, MiB,
  and for concurrent consumers the offset span) waits 50 ms; an orderly
  queue of a CLUSTERING consumer is pulled only while its broker lock is held;
* each pull carries the subscription (SUBSCRIPTION bit), may be held by the
  broker ``pull_suspend_s`` (SUSPEND bit), and, from a CLUSTERING consumer
  to a master, carries the group's committed offset (COMMIT_OFFSET bit);
* FOUND: the next offset is ``nextBeginOffset``; tags are re-checked on the
  client (hash collisions pass the broker); messages of the retry topic get
  their original topic back; what is left is delivered (the consumer puts
  it into the ProcessQueue). NO_NEW_MSG / NO_MATCHED_MSG: the next offset moves on, and the
  committed offset with it when nothing is held, so filtered-out messages do
  not hold a group back. OFFSET_ILLEGAL: the offset the broker names is taken
  at once (RocketMQ drops the queue for 20 s first; the result is the same);
* the pull goes to the broker the last answer suggested
  (``suggestWhichBrokerId``: a slave when the master says the consumer lags
  beyond memory) when the route names it, else to the master;
* a failed pull is logged and retried after ``PULL_ERROR_DELAY_S``, from the
  master.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apogee.client.broker_api import (
    PULL_CODE,
    PULL_COMMIT_OFFSET,
    PULL_SUBSCRIPTION,
    PULL_SUSPEND,
    BrokerApi,
    pull_command,
    pull_result,
)
from apogee.client.process_queue import FlowLimits, ProcessQueue
from apogee.client.pull_header import PullPieces
from apogee.client.pull_route import pull_address
from apogee.client.route_cache import RouteCache
from apogee.client.subscriptions import TagFilter
from apogee.errors import ApogeeError, ClientError
from apogee.model.client import MessageQueue
from apogee.model.message import PROPERTY_RETRY_TOPIC
from apogee.model.received import ReceivedMessage
from apogee.model.results import PullResult, PullStatus
from apogee.model.route import MASTER_ID
from apogee.model.subscription import SubscriptionData
from apogee.model.topic import RETRY_GROUP_TOPIC_PREFIX
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.connection import PULL_ANSWER, Connection

log = logging.getLogger(__name__)

FLOW_CONTROL_DELAY_S = 0.05
PAUSED_DELAY_S = 0.1
NOT_LOCKED_DELAY_S = 0.1
PULL_ERROR_DELAY_S = 3.0

_FOUND = PullStatus.FOUND
_ILLEGAL = PullStatus.OFFSET_ILLEGAL


@dataclass(frozen=True, slots=True)
class PullSettings:
    group: str
    batch_size: int
    suspend_s: float
    request_timeout_s: float  # the network timeout on top of the broker's hold
    limits: FlowLimits
    orderly: bool = False
    clustering: bool = True


#: hands what a pull found to the consumer: (fetcher, messages, the queue's max offset);
#: the consumer puts them into the fetcher's ProcessQueue (or consumes them at once)
Deliver = Callable[["Fetcher", list[ReceivedMessage], int], None]
#: the queue's offset moved without messages: (queue, offset, forced); forced
#: (an illegal offset) may move it back
OffsetMoved = Callable[[MessageQueue, int, bool], None]


class Fetcher:
    """Pulls one queue until its ProcessQueue is dropped (see the module docstring)."""

    def __init__(
        self,
        api: BrokerApi,
        routes: RouteCache,
        settings: PullSettings,
        mq: MessageQueue,
        pq: ProcessQueue[ReceivedMessage],
        *,
        offset: int,
        sub: SubscriptionData,
        deliver: Deliver,
        committed: Callable[[MessageQueue], int | None],
        tag_filter: TagFilter | None = None,
        paused: Callable[[MessageQueue], bool] | None = None,
        on_offset_moved: OffsetMoved | None = None,
    ) -> None:
        self._api = api
        self._routes = routes
        self._settings = settings
        self.mq = mq
        self.pq = pq
        self.start_offset = self.next_offset = offset
        self.sub = sub
        self._deliver = deliver
        self._committed = committed
        self._tag_filter = tag_filter
        self._paused = paused
        self._on_offset_moved = on_offset_moved
        self._retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        #: the broker id the next pull goes to (the last answer's suggestion)
        self.broker_id = MASTER_ID
        self.pulls = 0
        self.pulled_from: dict[str, int] = {}  # address -> pulls sent there
        self._template = PullMessageRequestHeader(
            consumer_group=settings.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=0,
            max_msg_nums=settings.batch_size,
            sys_flag=0,
            commit_offset=0,
            suspend_timeout_millis=int(settings.suspend_s * 1000),
            sub_version=sub.sub_version,
            subscription=sub.sub_string,
            expression_type=sub.expression_type,
        ).to_ext()
        # the header written ahead but for the pull's offset, flags and committed offset
        self._pieces = PullPieces.of(self._template)
        self._timeout_s = settings.request_timeout_s + settings.suspend_s

    async def run(self) -> None:
        pq = self.pq
        sleep = asyncio.sleep
        settings = self._settings
        limits = settings.limits
        orderly = settings.orderly
        must_lock = orderly and settings.clustering
        paused = self._paused
        while not pq.dropped:
            if paused is not None and paused(self.mq):
                await sleep(PAUSED_DELAY_S)
                continue
            if pq.count and pq.flow_control(limits, orderly=orderly) is not None:
                await sleep(FLOW_CONTROL_DELAY_S)
                continue
            if must_lock and (not pq.locked or pq.is_lock_expired()):
                await sleep(NOT_LOCKED_DELAY_S)
                continue
            try:
                fut = self._start_pull()
                result = pull_result(await fut) if fut is not None else await self._pull()
            except ApogeeError as exc:
                if self.pq.dropped:  # self.pq: mypy keeps pq.dropped narrowed over the await
                    return
                log.info("pull of %s failed: %s", self.mq, exc)
                self.broker_id = MASTER_ID  # a slave that failed is not asked again
                await sleep(PULL_ERROR_DELAY_S)
                continue
            if self.pq.dropped:
                return
            self._handle(result)

    def _address(self) -> tuple[str | None, bool]:
        """Where the next pull goes, and whether that is the master."""
        addrs = self._routes.broker_group(self.mq.broker_name)
        addr = addrs.get(self.broker_id)
        if addr is not None:  # the usual case, without a PullTarget per pull
            return addr, self.broker_id == MASTER_ID
        target = pull_address(addrs, self.broker_id)
        if target is None:
            return None, False
        return target.addr, target.broker_id == MASTER_ID

    def _start_pull(self) -> asyncio.Future[Any] | None:
        """The usual pull, written at once: the future of its answer.

        None when the route names no address yet or the connection is not
        open: ``_pull`` waits for them. Awaiting the connection's future in
        ``run`` spares a pull two coroutines.
        """
        addr, master = self._address()
        conn = None if addr is None else self._api.remoting.pooled(addr)
        if conn is None:
            return None
        assert addr is not None
        return self._write_pull(conn, addr, master)

    async def _pull(self) -> PullResult[ReceivedMessage]:
        addr, master = self._address()
        if addr is None:
            await self._routes.refresh(self.mq.topic)
            addr, master = self._address()
            if addr is None:
                raise _NoBrokerError(f"no broker serves {self.mq} in the route")
        conn = await self._api.remoting.connection(addr)
        return pull_result(await self._write_pull(conn, addr, master))

    def _write_pull(self, conn: Connection, addr: str, master: bool) -> asyncio.Future[Any]:
        """Write the next pull to ``conn`` (the connection to ``addr``); its answer's future."""
        committed = self._committed(self.mq) if master and self._settings.clustering else None
        flags = PULL_SUSPEND | PULL_SUBSCRIPTION
        if committed is not None and committed > 0:
            flags |= PULL_COMMIT_OFFSET
        else:
            committed = 0  # the template's commitOffset
        self.pulls += 1
        self.pulled_from[addr] = self.pulled_from.get(addr, 0) + 1
        pieces = self._pieces
        if pieces is not None:
            head = pieces.head(self.next_offset, flags, committed)
            return conn.request_encoded(
                PULL_CODE, head, pieces.end, b"", self._timeout_s, PULL_ANSWER
            )
        ext = self._template.copy()
        ext["queueOffset"] = str(self.next_offset)
        ext["sysFlag"] = str(flags)
        ext["commitOffset"] = str(committed)
        return conn.request(pull_command(ext), self._timeout_s)

    def _handle(self, result: PullResult[ReceivedMessage]) -> None:
        self.broker_id = result.suggest_which_broker_id
        status = result.status
        if status is _FOUND:
            self.next_offset = result.next_begin_offset
            msgs = result.messages
            keep = self._tag_filter
            if keep is not None:
                msgs = [m for m in msgs if keep(m.tags)]
            if self._retry:
                for m in msgs:
                    original = m.get_property(PROPERTY_RETRY_TOPIC)
                    if original:
                        m.topic = original
            if msgs:
                self._deliver(self, msgs, result.max_offset)
            elif not self.pq.count and self._on_offset_moved is not None:
                self._on_offset_moved(self.mq, self.next_offset, False)
            return
        moved = result.next_begin_offset
        if status is _ILLEGAL:
            log.info("offset %d of %s is illegal; moving to %d", self.next_offset, self.mq, moved)
        self.next_offset = moved
        if (status is _ILLEGAL or not self.pq.count) and self._on_offset_moved is not None:
            self._on_offset_moved(self.mq, moved, status is _ILLEGAL)


class _NoBrokerError(ClientError):
    """The route names no address for the queue's broker (retried like a failed pull)."""
