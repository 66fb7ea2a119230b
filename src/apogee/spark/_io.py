"""The connector's only door to the cluster: synchronous calls over the asyncio client.

Owns: ``Cluster``, a blocking facade (one per name-server list and process)
over ``NamesrvApi`` and ``BrokerApi`` for what the Spark source and sink
need: routes and queues, queue offsets, raw pulls of an offset range, sends,
half messages and their ending, consumer-offset commits, key lookups and the
answering of the broker's transaction checks. Everything else in
``apogee.spark`` goes through it, so it can move onto the Producer and
consumer facades without touching the rest.

Spark calls the connector from plain threads (the driver's planner worker,
executor Python workers), so the asyncio side runs on one daemon thread per
process with its own event loop; a forked worker starts its own (the pid is
checked), never reusing a parent's loop or sockets.

A raw pull answers the stored records themselves (see
``apogee.model.message_codec``): the source decodes them straight into
Arrow columns instead of building a ``MessageExt`` per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from apogee.client.broker_api import PULL_SUBSCRIPTION, BrokerApi
from apogee.client.namesrv_api import NamesrvApi, parse_namesrv_addrs
from apogee.client.transaction import (
    LocalTransactionState,
    TransactionCheckHandler,
    send_half,
    send_half_batch,
    send_half_batch_body,
)
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import BrokerResponseError, ClientError, TopicNotExistError, error_for_code
from apogee.model.client import (
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    ProducerData,
)
from apogee.model.kernels import decode_batch
from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    Message,
    MessageExt,
    string_to_properties,
)
from apogee.model.message_codec import store_timestamp_at
from apogee.model.msgid import parse_offset_msg_id
from apogee.model.results import SendResult, SendStatus
from apogee.model.route import readable, writeable
from apogee.model.subscription import SubscriptionData
from apogee.model.topic import TopicConfig
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.remoting.dispatch import HandlerTable
from apogee.remoting.runner import loop_factory

T = TypeVar("T")

#: Consumer group named in pulls; the source never commits through a pull.
READER_GROUP = "APOGEE_SPARK_READER"
BATCH_BYTES = 1 << 20  # a batch send stays far below the 4 MiB message limit
_END_WINDOW = 2048  # END_TRANSACTIONs written before a barrier confirms them
_HEARTBEAT_S = 20.0  # under the broker's 120 s channel expiry, as the Java client's 30 s is


@dataclass(frozen=True, slots=True, order=True)
class QueueRef:
    """One message queue and the master broker that serves it."""

    topic: str
    broker_name: str
    queue_id: int
    addr: str


@dataclass(frozen=True, slots=True)
class PackedSend:
    """One batch send, its body already encoded: ``count`` messages for ``queue``."""

    queue: QueueRef
    body: bytearray
    count: int


#: What ending a half message takes: broker address, topic, its queue offset in the
#: half queue, its commit-log offset, its unique key and its transaction id.
HalfRef = tuple[str, str, int, int, str, str]


def per_queue(
    rows: Sequence[tuple[QueueRef, Message]], batch_size: int
) -> list[tuple[QueueRef, list[Message]]]:
    """``rows`` as batch sends: per queue, in order, up to ``batch_size`` messages and
    about 1 MiB each. A message with a delay level is a send of its own (a batch
    cannot carry one)."""
    batches: list[tuple[QueueRef, list[Message]]] = []
    open_batch: dict[QueueRef, tuple[list[Message], int]] = {}
    for q, msg in rows:
        batch, size = open_batch.get(q) or ([], 0)
        alone = PROPERTY_DELAY_TIME_LEVEL in msg.properties
        if batch and (alone or len(batch) >= batch_size or size + len(msg.body) > BATCH_BYTES):
            batches.append((q, batch))
            batch, size = [], 0
        if alone:
            batches.append((q, [msg]))
            open_batch.pop(q, None)
            continue
        batch.append(msg)
        open_batch[q] = (batch, size + len(msg.body) + 200)  # properties: ~200 bytes
    batches += [(q, batch) for q, (batch, _) in open_batch.items()]
    return batches


def _half_ref(q: QueueRef, result: SendResult) -> HalfRef:
    _require_ok(result)
    return (
        q.addr,
        q.topic,
        result.queue_offset,
        parse_offset_msg_id(result.offset_msg_id).offset,
        result.msg_id,
        result.transaction_id or result.msg_id,
    )


@dataclass(frozen=True, slots=True)
class RawPull:
    """A pull answer with its records undecoded (``body`` is b"" when none were found)."""

    found: bool
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_moved: bool
    body: bytes


class _LoopThread:
    """An event loop on a daemon thread (uvloop when installed); one per process."""

    def __init__(self) -> None:
        factory = loop_factory()
        self.loop = factory() if factory is not None else asyncio.new_event_loop()
        self.pid = os.getpid()
        thread = threading.Thread(target=self.loop.run_forever, name="apogee-spark", daemon=True)
        thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_loop_lock = threading.Lock()
_shared_lock = threading.Lock()
_loop: _LoopThread | None = None


def _the_loop() -> _LoopThread:
    global _loop  # noqa: PLW0603  # one loop per process, made on first use
    with _loop_lock:
        if _loop is None or _loop.pid != os.getpid():
            _loop = _LoopThread()
        return _loop


CheckListener = Callable[[MessageExt], Awaitable[LocalTransactionState]]


class Cluster:
    """Blocking calls to the brokers behind ``namesrv``; ``Cluster.of`` shares one per process."""

    _shared: ClassVar[dict[tuple[str, int], Cluster]] = {}

    def __init__(self, namesrv: str, *, timeout_s: float = 10.0) -> None:
        self.namesrv = namesrv
        self.timeout_s = timeout_s
        self._runner = _the_loop()
        self.checks = TransactionCheckHandler()
        table = HandlerTable()
        self.checks.register(table)
        config = ClientConfig(request_timeout_s=timeout_s, connect_timeout_s=min(timeout_s, 5.0))
        self._remoting = RemotingClient(config, handlers=table)
        self.namesrv_api = NamesrvApi(
            self._remoting, parse_namesrv_addrs(namesrv), timeout_s=timeout_s
        )
        self.broker_api = BrokerApi(self._remoting, timeout_s=timeout_s)
        self.client_id = f"{socket.gethostname()}@{os.getpid()}@spark"
        self._producer_groups: set[str] = set()
        self._heartbeat_addrs: set[str] = set()
        self._announced: set[str] = set()  # groups answer_checks announced to every master
        self._single_halves: set[str] = set()  # brokers that refuse batches of half messages
        self._heartbeat_task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, namesrv: str, *, timeout_s: float = 10.0) -> Cluster:
        """The process's Cluster for ``namesrv`` (a fresh one after a fork)."""
        key = (namesrv, os.getpid())
        with _shared_lock:
            found = cls._shared.get(key)
            if found is None:
                found = cls._shared[key] = cls(namesrv, timeout_s=timeout_s)
            return found

    # -- plumbing -------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop thread and wait for its result."""
        return self._runner.submit(coro).result(timeout_s or self.timeout_s * 3)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return self._runner.submit(coro)

    def close(self) -> None:
        with _shared_lock:
            self._shared.pop((self.namesrv, os.getpid()), None)
        if self._heartbeat_task is not None:
            self._runner.loop.call_soon_threadsafe(self._heartbeat_task.cancel)
        with contextlib.suppress(Exception):
            self.run(self._remoting.close())

    # -- routes -----------------------------------------------------------------------

    def topics(self) -> list[str]:
        return sorted(self.run(self.namesrv_api.get_all_topics()))

    def queues(self, topic: str, *, for_write: bool = False) -> list[QueueRef]:
        """The topic's queues on master brokers, sorted; [] when it has no route."""
        return self.run(self._queues(topic, for_write))

    async def _queues(self, topic: str, for_write: bool) -> list[QueueRef]:
        try:
            route = await self.namesrv_api.get_route(topic)
        except TopicNotExistError:
            return []
        masters = {b.broker_name: b.master_addr() for b in route.broker_datas}
        out: list[QueueRef] = []
        for q in route.queue_datas:
            addr = masters.get(q.broker_name)
            if addr is None:
                continue
            allowed = writeable(q.perm) if for_write else readable(q.perm)
            if not allowed:
                continue
            count = q.write_queue_nums if for_write else q.read_queue_nums
            out += [QueueRef(topic, q.broker_name, i, addr) for i in range(count)]
        return sorted(out)

    # -- offsets ----------------------------------------------------------------------

    def offsets(self, queues: Sequence[QueueRef], which: str) -> list[int]:
        """Per queue: its ``"min"`` or ``"max"`` (next to be written) offset."""

        async def one(q: QueueRef) -> int:
            if which == "min":
                found = await self.broker_api.get_min_offset(q.addr, q.topic, q.queue_id)
            else:
                found = await self.broker_api.get_max_offset(q.addr, q.topic, q.queue_id)
            return max(found, 0)  # an empty queue answers -1

        return self.run(self._gather(one(q) for q in queues))

    def offsets_for_time(self, queues: Sequence[QueueRef], timestamp_ms: int) -> list[int]:
        """Per queue: the first offset stored at or after ``timestamp_ms`` (max when none)."""
        return self.run(self._gather(self._offset_for_time(q, timestamp_ms) for q in queues))

    async def _offset_for_time(self, q: QueueRef, timestamp_ms: int) -> int:
        api = self.broker_api
        low = max(await api.get_min_offset(q.addr, q.topic, q.queue_id), 0)
        high = max(await api.get_max_offset(q.addr, q.topic, q.queue_id), 0)
        # SEARCH_OFFSET_BY_TIMESTAMP answers "closest", not "first at or after": bisect
        # on store times instead, one single-message pull per step.
        while low < high:
            mid = (low + high) // 2
            stored = await self._store_time(q, mid)
            if stored is None or stored >= timestamp_ms:
                high = mid
            else:
                low = mid + 1
        return low

    async def _store_time(self, q: QueueRef, offset: int) -> int | None:
        pulled = await self._pull(q, offset, 1, None)
        if not pulled.found or not pulled.body:
            return None
        return store_timestamp_at(pulled.body, 0)

    async def _gather(self, coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
        return list(await asyncio.gather(*coros))

    # -- reads --------------------------------------------------------------------------

    def pull(
        self, q: QueueRef, offset: int, max_nums: int, expression: str | None
    ) -> Future[RawPull]:
        """Start a pull of up to ``max_nums`` records from ``offset`` (no commit, no wait)."""
        return self.submit(self._pull(q, offset, max_nums, expression))

    async def _pull(
        self, q: QueueRef, offset: int, max_nums: int, expression: str | None
    ) -> RawPull:
        # The subscription always rides along: without it the broker wants the group online.
        expression = expression or "*"
        header = h.PullMessageRequestHeader(
            consumer_group=READER_GROUP,
            topic=q.topic,
            queue_id=q.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PULL_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription=expression,
            expression_type="TAG",
        )
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await self._remoting.invoke(q.addr, request, self.timeout_s)
        code = response.code
        if code not in _PULL_CODES:
            raise error_for_code(code, response.remark)
        answer = h.PullMessageResponseHeader.from_ext(response.ext_fields)
        found = code == ResponseCode.SUCCESS
        return RawPull(
            found=found,
            next_begin_offset=answer.next_begin_offset,
            min_offset=answer.min_offset,
            max_offset=answer.max_offset,
            offset_moved=code == ResponseCode.PULL_OFFSET_MOVED,
            body=response.body_bytes() if found else b"",
        )

    def lookup_key(self, topic: str, key: str) -> list[MessageExt]:
        """Messages of ``topic`` indexed under KEYS ``key``, from every broker of it."""
        return self.run(self.lookup_key_async(topic, key))

    async def lookup_key_async(self, topic: str, key: str) -> list[MessageExt]:
        addrs = sorted({q.addr for q in await self._queues(topic, False)})
        found = await self._gather(self.broker_api.query_message(a, topic, key) for a in addrs)
        return [m for part in found for m in part]

    # -- consumer progress --------------------------------------------------------------

    def commit_group(
        self, group: str, offsets: Sequence[tuple[QueueRef, int]], subscriptions: Sequence[str]
    ) -> None:
        """Write ``offsets`` as ``group``'s progress and announce the group by heartbeat.

        The heartbeat (a passive consumer of ``subscriptions``) makes the
        broker create the group's retry topic, which is how admin tools find
        the brokers to ask about the group.
        """
        self.run(self._commit_group(group, offsets, subscriptions))

    async def _commit_group(
        self, group: str, offsets: Sequence[tuple[QueueRef, int]], subscriptions: Sequence[str]
    ) -> None:
        subs = tuple(SubscriptionData.build(t, "*") for t in subscriptions)
        consumer = ConsumerData(group, ConsumeType.CONSUME_ACTIVELY, subscriptions=subs)
        beat = HeartbeatData(self.client_id, consumers=(consumer,))
        addrs = sorted({q.addr for q, _ in offsets})
        await self._gather(self.broker_api.heartbeat(a, beat) for a in addrs)
        await self._gather(
            self.broker_api.update_consumer_offset(q.addr, group, q.topic, q.queue_id, off)
            for q, off in offsets
        )

    # -- writes ------------------------------------------------------------------------

    def send_batch(self, q: QueueRef, messages: list[Message], group: str) -> Future[SendResult]:
        """Start one batch send to queue ``q`` (an answer other than SEND_OK fails it)."""
        return self.submit(self._send_batch(q, messages, group))

    def send_rows(
        self, rows: Sequence[tuple[QueueRef, Message]], group: str, batch_size: int
    ) -> Future[int]:
        """Start sending ``rows``: per queue in batches (``per_queue``), all at once.

        The future's result is the number of rows, once every send was answered
        SEND_OK; any other answer fails it.
        """
        return self.submit(self._send_rows(rows, group, batch_size))

    async def _send_rows(
        self, rows: Sequence[tuple[QueueRef, Message]], group: str, batch_size: int
    ) -> int:
        await self._gather(
            self._send_batch(q, msgs, group) for q, msgs in per_queue(rows, batch_size)
        )
        return len(rows)

    async def _send_batch(self, q: QueueRef, messages: list[Message], group: str) -> SendResult:
        api = self.broker_api
        if len(messages) == 1:
            result = await api.send(
                q.addr, q.broker_name, messages[0], queue_id=q.queue_id, producer_group=group
            )
        else:
            result = await api.send_batch(
                q.addr, q.broker_name, messages, queue_id=q.queue_id, producer_group=group
            )
        _require_ok(result)
        return result

    def send_halves(
        self,
        rows: Sequence[tuple[QueueRef, Message]],
        group: str,
        batch_size: int,
        common: Mapping[str, str],
    ) -> Future[list[HalfRef]]:
        """Start sending ``rows`` as half messages; the refs to end them, in send order.

        The rows of one queue go out in batches of up to ``batch_size`` messages
        (and 1 MiB), all batches at once, each batch one transaction on the
        broker (one ref), with ``common`` as its properties (the commit adds
        them to every message). A broker that refuses a batch of half messages
        (MESSAGE_ILLEGAL: RocketMQ's own) gets them one request and one
        transaction per message, ``common`` set on each, from then on.

        This process then answers ``group``'s transaction checks (see ``answer_checks``).
        """
        return self.submit(self._send_halves(rows, group, batch_size, common))

    async def _send_halves(
        self,
        rows: Sequence[tuple[QueueRef, Message]],
        group: str,
        batch_size: int,
        common: Mapping[str, str],
    ) -> list[HalfRef]:
        await self._answering(group, {q.addr for q, _ in rows})

        async def one(q: QueueRef, messages: list[Message]) -> list[HalfRef]:
            refs = await self._one_transaction(
                q,
                lambda: send_half_batch(
                    self.broker_api, q.addr, q.broker_name, messages,
                    queue_id=q.queue_id, producer_group=group, properties=common,
                ),
            )  # fmt: skip
            if refs is not None:
                return refs
            return await self._halves_one_by_one(q, messages, group, common)

        done = await self._gather(one(q, msgs) for q, msgs in per_queue(rows, batch_size))
        return [ref for refs in done for ref in refs]

    def send_packed(self, sends: Sequence[PackedSend], group: str) -> Future[int]:
        """Start the batch sends ``sends``, all at once; the future's result is their
        message count, once every send was answered SEND_OK (any other answer
        fails it)."""
        return self.submit(self._send_packed(sends, group))

    async def _send_packed(self, sends: Sequence[PackedSend], group: str) -> int:
        api = self.broker_api

        async def one(s: PackedSend) -> None:
            q = s.queue
            _require_ok(
                await api.send_batch_body(
                    q.addr, q.broker_name, q.topic, s.body, "", queue_id=q.queue_id,
                    producer_group=group,
                )
            )  # fmt: skip

        await self._gather(one(s) for s in sends)
        return sum(s.count for s in sends)

    def send_packed_halves(
        self, sends: Sequence[PackedSend], group: str, common: Mapping[str, str]
    ) -> Future[list[HalfRef]]:
        """``send_halves`` for batch sends already encoded: each send one transaction
        (one ref), in order. A broker that refuses batches of half messages gets
        the messages of each one by one, decoded from its body."""
        return self.submit(self._send_packed_halves(sends, group, common))

    async def _send_packed_halves(
        self, sends: Sequence[PackedSend], group: str, common: Mapping[str, str]
    ) -> list[HalfRef]:
        await self._answering(group, {s.queue.addr for s in sends})

        async def one(s: PackedSend) -> list[HalfRef]:
            q = s.queue
            refs = await self._one_transaction(
                q,
                lambda: send_half_batch_body(
                    self.broker_api, q.addr, q.broker_name, q.topic, s.body, s.count,
                    queue_id=q.queue_id, producer_group=group, properties=common,
                ),
            )  # fmt: skip
            if refs is not None:
                return refs
            messages = [
                Message(q.topic, bytes(item.body), properties=string_to_properties(item.properties))
                for item in decode_batch(s.body)
            ]
            return await self._halves_one_by_one(q, messages, group, common)

        done = await self._gather(one(s) for s in sends)
        return [ref for refs in done for ref in refs]

    async def _one_transaction(
        self, q: QueueRef, send: Callable[[], Awaitable[SendResult]]
    ) -> list[HalfRef] | None:
        """The ref of a batch of half messages ``send`` sends to ``q``; None when ``q``'s
        broker refuses batches of half messages (MESSAGE_ILLEGAL, nothing stored): it
        is sent none from then on."""
        if q.addr in self._single_halves:
            return None
        try:
            return [_half_ref(q, await send())]
        except BrokerResponseError as exc:
            if exc.code != ResponseCode.MESSAGE_ILLEGAL:
                raise
            self._single_halves.add(q.addr)
            return None

    async def _answering(self, group: str, addrs: set[str]) -> None:
        """Announce ``group`` to every broker in ``addrs`` (and keep announcing it), so
        that the brokers' transaction checks reach this process."""
        for addr in sorted(addrs - self._heartbeat_addrs):
            self._heartbeat_addrs.add(addr)
            self._producer_groups.add(group)
            await self._heartbeat(addr)
        if group not in self._producer_groups:
            self._producer_groups.add(group)
            for addr in sorted(self._heartbeat_addrs):
                await self._heartbeat(addr)
        self._start_heartbeats()

    async def _halves_one_by_one(
        self, q: QueueRef, messages: list[Message], group: str, common: Mapping[str, str]
    ) -> list[HalfRef]:
        """One request and one transaction per message, ``common`` set on each."""
        for msg in messages:
            msg.properties.update(common)
        sends = (
            send_half(self.broker_api, q.addr, q.broker_name, m, queue_id=q.queue_id,
                      producer_group=group)
            for m in messages
        )  # fmt: skip
        return [_half_ref(q, r) for r in await self._gather(sends)]

    def end_transactions(
        self, halves: Sequence[HalfRef], group: str, state: LocalTransactionState
    ) -> None:
        """Commit or roll back half messages; returns once every broker has handled them.

        They go out oneway, as RocketMQ producers send them, in the order given on
        one connection per broker (so messages of one queue become visible in the
        order they were sent). Every ``_END_WINDOW`` of them, and at the end, one
        ordinary request per broker follows on the same connection: its answer
        means every END_TRANSACTION before it was handled. The next window is
        written while the broker works through the last, so at most two windows
        wait at a broker: a broker is never handed a whole batch's commits at
        once (RocketMQ's queues them in a bounded pool and drops what overflows).
        """
        self.run(self._end_all(halves, group, state), timeout_s=max(60.0, len(halves) / 500))

    async def _end_all(
        self, halves: Sequence[HalfRef], group: str, state: LocalTransactionState
    ) -> None:
        api = self.broker_api
        unconfirmed: dict[str, str] = {}  # broker -> a topic of it, since its last barrier
        barriers: deque[asyncio.Future[list[int]]] = deque()
        for n, (addr, topic, queue_offset, log_offset, msg_id, tx_id) in enumerate(halves, 1):
            header = h.EndTransactionRequestHeader(
                producer_group=group,
                tran_state_table_offset=queue_offset,
                commit_log_offset=log_offset,
                commit_or_rollback=state.value,
                msg_id=msg_id,
                topic=topic,
                transaction_id=tx_id,
            )
            await api.end_transaction(addr, header, oneway=True)
            unconfirmed.setdefault(addr, topic)
            if n % _END_WINDOW == 0:
                barriers.append(asyncio.ensure_future(self._barrier(unconfirmed)))
                unconfirmed = {}
                while len(barriers) > 1:
                    await barriers.popleft()
        barriers.append(asyncio.ensure_future(self._barrier(unconfirmed)))
        while barriers:
            await barriers.popleft()

    async def _barrier(self, brokers: dict[str, str]) -> list[int]:
        api = self.broker_api
        return await self._gather(api.get_max_offset(a, t, 0) for a, t in brokers.items())

    def answer_checks(self, group: str, listener: CheckListener) -> None:
        """Answer the broker's checks of ``group``'s half messages with ``listener``.

        The broker checks through the connections of the group's producers, so
        this process announces itself as one to every master broker by heartbeat,
        also when it sent no half message itself (the driver's committer).
        """
        self.checks.add_listener(group, listener)
        if group not in self._announced:
            self.run(self._announce(group))
            self._announced.add(group)

    async def _announce(self, group: str) -> None:
        info = await self.namesrv_api.get_cluster_info()
        masters = {
            addr for b in info.broker_addr_table.values() if (addr := b.master_addr()) is not None
        }
        self._producer_groups.add(group)
        self._heartbeat_addrs |= masters
        for addr in sorted(self._heartbeat_addrs):
            await self._heartbeat(addr)
        self._start_heartbeats()

    def ensure_topic(self, topic: str, queues: int = 1) -> list[QueueRef]:
        """The topic's writable queues, creating it on the first broker of the cluster if needed."""
        return self.run(self._ensure_topic(topic, queues), timeout_s=60)

    async def _ensure_topic(self, topic: str, queues: int) -> list[QueueRef]:
        found = await self._queues(topic, True)
        if found:
            return found
        info = await self.namesrv_api.get_cluster_info()
        masters = sorted(
            (b.broker_name, addr)
            for b in info.broker_addr_table.values()
            if (addr := b.master_addr()) is not None
        )
        if not masters:
            raise ClientError("no master broker is registered with the name server")
        config = TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues)
        await self.broker_api.create_topic(masters[0][1], config)
        for _ in range(200):  # the broker registers the new topic with the name servers
            found = await self._queues(topic, True)
            if found:
                return found
            await asyncio.sleep(0.05)
        raise ClientError(f"topic {topic} was created but has no route after 10 s")

    async def _heartbeat(self, addr: str) -> None:
        producers = tuple(ProducerData(g) for g in sorted(self._producer_groups))
        await self.broker_api.heartbeat(addr, HeartbeatData(self.client_id, producers=producers))

    def _start_heartbeats(self) -> None:
        if self._heartbeat_task is None or self._heartbeat_task.done():
            self._heartbeat_task = asyncio.ensure_future(self._heartbeats())

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(_HEARTBEAT_S)
            for addr in sorted(self._heartbeat_addrs):
                with contextlib.suppress(Exception):
                    await self._heartbeat(addr)


_PULL_CODES = {
    ResponseCode.SUCCESS,
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
}


def _require_ok(result: SendResult) -> None:
    if result.status is not SendStatus.SEND_OK:
        raise error_for_code(ResponseCode.SYSTEM_ERROR, f"send answered {result.status.name}")
