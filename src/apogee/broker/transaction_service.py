"""Transaction check-back: asks producers about half messages nobody ended.

Owns: TransactionCheckService (RocketMQ TransactionalMessageCheckService and
the check loop of TransactionalMessageServiceImpl) and ``recover_book``,
which rebuilds the TransactionBook from the half and op queues at start.

A round, every ``transactionCheckInterval``, walks the half queue from the
check progress to the end it had when the round began. A copy that is not
the newest of an open lineage is passed over, without being read (the book
knows those copies by their offsets). For the others, in order:

* checked ``transactionCheckMax`` times already, or born longer ago than the
  commit log is kept: discarded (logged, copied to TRANS_CHECK_MAX_TIME_TOPIC,
  an op record written); it counts as rolled back;
* with CHECK_IMMUNITY_TIME_IN_SECONDS and younger than that: put again as a
  new copy, unchecked, so it does not hold the progress back;
* younger than ``transactionTimeOut``: the round ends here (later ones are
  younger still);
* otherwise put again with TRANSACTION_CHECK_TIMES + 1, and that new copy is
  sent as CHECK_TRANSACTION_STATE (oneway) to one live connection of the
  producer group in PGROUP. The answer is an END_TRANSACTION naming it.

The progress then moves past everything passed over and is committed as
CID_RMQ_SYS_TRANS's offsets (persisted with the consumer offsets every 5 s
and at stop). All work runs on the event loop, ``batch`` copies per turn; a
put the store refuses ends the round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from apogee._util.clock import Clock
from apogee._util.periodic import PeriodicTask
from apogee.broker.broker2client import Broker2Client
from apogee.broker.clients import ClientRegistry
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.broker.topics import TopicConfigManager
from apogee.broker.transaction import (
    HALF_QUEUE_ID,
    REMOVE_TAG,
    TRANSACTION_GROUP,
    check_request,
    check_times,
    discarded_message,
    immunity_ms,
    lineage,
    op_message,
    renewed_half,
)
from apogee.broker.transaction_book import TransactionBook
from apogee.model.message import PROPERTY_PRODUCER_GROUP, HostPort, MessageExt, StoreMessage
from apogee.model.route import PERM_RW
from apogee.model.topic import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from apogee.store.interface import MessageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TransactionSettings:
    check_interval_s: float = 60.0
    timeout_ms: int = 6000
    check_max: int = 15
    max_age_ms: int = 72 * 3600 * 1000  # fileReservedTime: older half messages are dropped
    batch: int = 64  # copies handled per turn of the event loop


class _Step(Enum):
    NEXT = "next"
    STOP = "stop"


class TransactionCheckService:
    def __init__(
        self,
        store: MessageStore,
        book: TransactionBook,
        *,
        offsets: ConsumerOffsetManager,
        topics: TopicConfigManager,
        clients: ClientRegistry,
        to_clients: Broker2Client,
        settings: TransactionSettings,
        store_host: HostPort,
        clock: Clock,
        on_stored: Callable[[], None],
    ) -> None:
        self._store = store
        self._book = book
        self._offsets = offsets
        self._topics = topics
        self._clients = clients
        self._to_clients = to_clients
        self._settings = settings
        self._store_host = store_host
        self._clock = clock
        self._on_stored = on_stored
        # every transactionCheckInterval, the first one interval after start
        self._timer = PeriodicTask("tx-check", settings.check_interval_s, self.check_round)
        self.rounds = 0
        self.checks_sent = 0
        self.discarded = 0

    # -- lifecycle -------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._timer.running

    def start(self) -> None:
        self._timer.start()

    async def stop(self) -> None:
        await self._timer.stop()

    # -- one round -----------------------------------------------------------------

    async def check_round(self) -> None:
        """Walk the half queue once (see the module docstring)."""
        store, book = self._store, self._book
        offset = max(book.half_progress, store.min_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID))
        end = store.max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        done = 0
        while offset < end:
            if self._visit(offset) is _Step.STOP:
                break
            offset += 1
            done += 1
            if done % self._settings.batch == 0:
                book.advance(offset)
                await asyncio.sleep(0)
        book.advance(offset)
        self._commit_progress()
        self.rounds += 1

    def _commit_progress(self) -> None:
        book = self._book
        self._offsets.commit(TRANSACTION_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE_ID, book.half_progress)
        self._offsets.commit(
            TRANSACTION_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, book.op_progress()
        )

    def _visit(self, offset: int) -> _Step:
        if not self._book.to_check(offset):
            return _Step.NEXT  # resolved, or superseded by a newer copy: nothing to read
        msg = _half_copy(self._store, offset)
        if msg is None:
            log.error("transaction check: half queue offset %d is unreadable; skipped", offset)
            return _Step.NEXT
        family = lineage(msg)
        if not self._book.is_current(family, offset):
            return _Step.NEXT  # resolved, or superseded by a newer copy
        settings = self._settings
        now = self._clock.now_ms()
        age = now - msg.born_timestamp
        if check_times(msg) >= settings.check_max or age > settings.max_age_ms:
            return self._discard(msg, family)
        immunity = immunity_ms(msg, settings.timeout_ms)
        if immunity is not None:
            if age < immunity:
                return self._renew(msg, family, checked=False)
        elif 0 <= age < settings.timeout_ms:
            return _Step.STOP
        return self._renew(msg, family, checked=True)

    def _put(self, msg: StoreMessage, what: str) -> MessageExt | None:
        """Store ``msg``; the stored record, or None (logged) when the store refused it."""
        result = self._store.put(msg)
        if not result.status.is_stored:
            log.warning("transaction check: cannot store %s: %s %s",
                        what, result.status.value, result.reason)  # fmt: skip
            return None
        self._on_stored()
        return self._store.look_message(result.wrote_offset)

    def _renew(self, msg: MessageExt, family: int, *, checked: bool) -> _Step:
        copy = self._put(renewed_half(msg, checked=checked), "a half message copy")
        if copy is None:
            return _Step.STOP
        self._book.renewed(family, copy.queue_offset)
        if checked:
            self._send_check(copy)
        return _Step.NEXT

    def _send_check(self, copy: MessageExt) -> None:
        group = copy.properties.get(PROPERTY_PRODUCER_GROUP, "")
        header, body = check_request(copy)
        channels = [c.channel for c in self._clients.producer_channels(group)]
        if self._to_clients.check_transaction_state(channels, header, body):
            self.checks_sent += 1
        else:
            log.warning("transaction check: producer group %r has no live connection (%s)",
                        group, copy.properties.get("UNIQ_KEY"))  # fmt: skip

    def _discard(self, msg: MessageExt, family: int) -> _Step:
        log.error(
            "transaction check: discarding half message %s of group %r (lineage %d) after %d "
            "checks; it counts as rolled back",
            msg.uniq_key,
            msg.properties.get(PROPERTY_PRODUCER_GROUP),
            family,
            check_times(msg),
        )
        self._topics.create_in_send_back(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_RW)
        if self._put(discarded_message(msg), "a discarded half message") is None:
            return _Step.STOP
        op = self._store.put(op_message(msg, self._store_host, self._clock.now_ms()))
        if op.status.is_stored:
            self._on_stored()
        self._book.resolve(family, op.queue_offset if op.status.is_stored else -1)
        self.discarded += 1
        return _Step.NEXT


def _half_copy(store: MessageStore, offset: int) -> MessageExt | None:
    unit = store.queue_unit(TRANS_HALF_TOPIC, HALF_QUEUE_ID, offset)
    if unit is None:
        return None
    msg = store.look_message(unit.commit_log_offset)
    return msg if msg is not None and msg.topic == TRANS_HALF_TOPIC else None


def recover_book(store: MessageStore, offsets: ConsumerOffsetManager) -> TransactionBook:
    """Rebuild the open transactions from the check progress, the half and the op queue.

    The store must be dispatched to its end first (every half and op record in
    its consume queue). Blocking: reads every half copy after the progress and
    every op record after the op progress.
    """
    half_low = store.min_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
    half_end = store.max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
    op_end = store.max_offset_in_queue(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID)
    start = _progress(offsets, TRANS_HALF_TOPIC, half_low, half_end)
    op_start = _progress(
        offsets, TRANS_OP_HALF_TOPIC, store.min_offset_in_queue(TRANS_OP_HALF_TOPIC, 0), op_end
    )
    book = TransactionBook(start, op_end)
    families: dict[int, int] = {}  # copy offset -> lineage, for copies after the progress
    for offset in range(start, half_end):
        msg = _half_copy(store, offset)
        if msg is not None:
            families[offset] = lineage(msg)
            book.renewed(families[offset], offset)
    for op_offset in range(op_start, op_end):
        family = _op_lineage(store, op_offset, families, max(half_low, 0))
        if family is not None:
            book.resolve(family, op_offset)
    log.info("transactions: %d open after recovery (half queue from %d, op queue from %d)",
             book.open_count, start, op_start)  # fmt: skip
    return book


def _op_lineage(
    store: MessageStore, op_offset: int, families: dict[int, int], half_low: int
) -> int | None:
    """The lineage the op record at ``op_offset`` resolved; None if unreadable."""
    half_offset = _op_target(store, op_offset)
    if half_offset is None:
        return None
    family = families.get(half_offset)
    if family is not None or half_offset < half_low:
        return family
    older = _half_copy(store, half_offset)  # an older copy: its lineage may still be open
    return lineage(older) if older is not None else None


def _op_target(store: MessageStore, op_offset: int) -> int | None:
    """The half queue offset an op record names; None for an unreadable or foreign one."""
    unit = store.queue_unit(TRANS_OP_HALF_TOPIC, HALF_QUEUE_ID, op_offset)
    msg = store.look_message(unit.commit_log_offset) if unit is not None else None
    if msg is None or msg.tags != REMOVE_TAG:
        return None
    text = msg.body.decode("ascii", "replace")
    return int(text) if text.isdigit() else None


def _progress(offsets: ConsumerOffsetManager, topic: str, low: int, high: int) -> int:
    """The persisted progress in ``topic``'s queue, brought into [min, max]; none yet: min."""
    offset = offsets.query(TRANSACTION_GROUP, topic, HALF_QUEUE_ID)
    low = max(low, 0)
    return low if offset < low else min(offset, high)
