"""What a push consumer holds of one queue: the messages pulled and not yet done.

Owns: :class:`ProcessQueue`, RocketMQ's ProcessQueue without its locks (one
event loop drives it): messages held by queue offset, their count and body
bytes for flow control, the offset that is safe to commit, the dropped and
locked flags and the pull, consume and lock times; and for orderly
consumption, taking messages from the front, committing them, and giving
them back. :class:`FlowLimits` holds the pull thresholds. No I/O.

The committed offset is the lowest offset still held, so a crash redelivers
what was in flight instead of losing it; with nothing held it is one past
the highest offset ever put.

Counting: a message counts from :meth:`ProcessQueue.put` until
:meth:`~ProcessQueue.remove` (concurrent mode) or
:meth:`~ProcessQueue.commit` (orderly mode) lets it go; taken messages
still count. Sizes are ``body_size`` (the stored body length).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from apogee._util.clock import SYSTEM_CLOCK, Clock

#: The client holds a broker lock of an orderly queue for this long (ms) after renewing it.
REBALANCE_LOCK_MAX_LIVE_MS = 30_000
#: Orderly queues are locked again this often (ms).
REBALANCE_LOCK_INTERVAL_MS = 20_000
#: A queue that was not pulled for this long (ms) is dropped.
PULL_MAX_IDLE_MS = 120_000


class Held(Protocol):
    """What the process queue reads of a message."""

    @property
    def queue_offset(self) -> int: ...

    @property
    def body_size(self) -> int: ...


M = TypeVar("M", bound=Held)


class FlowControl(Enum):
    """Why a pull is held back (RocketMQ's DefaultMQPushConsumerImpl checks, in order)."""

    COUNT = "cached message count over the queue threshold"
    SIZE = "cached message size over the queue threshold"
    SPAN = "offset span of cached messages over consumeConcurrentlyMaxSpan"


@dataclass(frozen=True, slots=True)
class FlowLimits:
    """Pull thresholds per queue (RocketMQ's DefaultMQPushConsumer defaults)."""

    max_count: int = 1000  # pullThresholdForQueue
    max_size_mib: int = 100  # pullThresholdSizeForQueue
    max_span: int = 2000  # consumeConcurrentlyMaxSpan, concurrent mode only


class ProcessQueue(Generic[M]):
    """Messages of one queue between pull and commit (see the module docstring)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        now = clock.now_ms()
        self._held: dict[int, M] = {}  # not taken (RocketMQ's msgTreeMap)
        # offsets of _held in ascending order; may still list offsets that left
        # _held (dropped lazily from the front), so every step is O(1) amortised
        self._order: deque[int] = deque()
        self._taken: dict[int, M] = {}  # orderly: taken, not committed
        self._count = 0
        self._size = 0
        self._max_offset = 0  # highest offset ever put (queueOffsetMax)
        self._consuming = False
        self.dropped = False
        self.locked = False
        self.last_lock_ms = now
        self.last_pull_ms = now
        self.last_consume_ms = now
        self.try_unlock_times = 0
        self.backlog = 0  # messages behind the last one put (msgAccCnt)

    # -- what is held ------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Messages put and not yet let go (taken ones included)."""
        return self._count

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def size_mib(self) -> int:
        """Whole MiB held, as flow control and the running-info report count them."""
        return self._size // (1024 * 1024)

    @property
    def max_span(self) -> int:
        """Highest minus lowest held offset (taken ones excluded); 0 when none."""
        first = self._first()
        return 0 if first is None else self._last() - first

    def has_messages(self) -> bool:
        """Whether messages wait to be taken or removed (RocketMQ's hasTempMessage)."""
        return bool(self._held)

    def __contains__(self, queue_offset: int) -> bool:
        return queue_offset in self._held

    def first_message(self) -> M | None:
        """The held message with the lowest offset (checked for consume timeouts)."""
        first = self._first()
        return None if first is None else self._held[first]

    def flow_control(self, limits: FlowLimits, *, orderly: bool) -> FlowControl | None:
        """Why the next pull of this queue must wait, or None when it may go."""
        if self._count > limits.max_count:
            return FlowControl.COUNT
        if self.size_mib > limits.max_size_mib:
            return FlowControl.SIZE
        if not orderly and self.max_span > limits.max_span:
            return FlowControl.SPAN
        return None

    # -- both modes ----------------------------------------------------------------------

    def put(self, messages: Sequence[M], *, max_offset: int | None = None) -> bool:
        """Hold pulled messages; True when a consume task should be started.

        A message whose offset is already held replaces it without counting
        twice. ``max_offset`` is the queue's max offset from the pull result
        (it sets :attr:`backlog`).
        """
        held = self._held
        order = self._order
        # in locals, not attributes, per message: this runs for every message pulled
        last = order[-1] if order else -1
        in_order = True
        added = 0
        size = 0
        newest = -1  # the offset of the last message added
        for msg in messages:
            offset = msg.queue_offset
            if held.get(offset) is None:
                added += 1
                size += msg.body_size
                newest = offset
                if offset <= last:
                    in_order = False
                else:
                    order.append(offset)
                    last = offset
            held[offset] = msg
        if added:
            self._count += added
            self._size += size
            self._max_offset = newest
        if not in_order:  # a pull went back (a seek): rare, so sort once
            self._order = deque(sorted(held))
        if messages and max_offset is not None:
            behind = max_offset - messages[-1].queue_offset
            if behind > 0:
                self.backlog = behind
        if held and not self._consuming:
            self._consuming = True
            return True
        return False

    def remove(self, messages: Iterable[M]) -> int | None:
        """Let consumed messages go; the offset to commit now, or None if none was held.

        The offset is the lowest one still held, or one past the highest
        ever put when none is left.
        """
        self.last_consume_ms = self._clock.now_ms()
        if not self._held:
            return None
        pop = self._held.pop
        removed = 0
        size = 0
        for msg in messages:
            gone = pop(msg.queue_offset, None)
            if gone is not None:
                removed += 1
                size += gone.body_size
        self._count -= removed
        self._size = self._size - size if self._count else 0
        first = self._first()
        return self._max_offset + 1 if first is None else first

    def passed(self, last_offset: int) -> None:
        """Messages up to ``last_offset`` were consumed as they came, never held.

        (A consumer that handles a pulled batch before it awaits anything
        need not put it.) With nothing held, the offset to commit is then one
        past ``last_offset``.
        """
        self._max_offset = max(self._max_offset, last_offset)

    def clear(self) -> None:
        self._held.clear()
        self._order.clear()
        self._taken.clear()
        self._count = 0
        self._size = 0
        self._max_offset = 0

    def is_lock_expired(self) -> bool:
        return self._clock.now_ms() - self.last_lock_ms > REBALANCE_LOCK_MAX_LIVE_MS

    def is_pull_expired(self) -> bool:
        return self._clock.now_ms() - self.last_pull_ms > PULL_MAX_IDLE_MS

    # -- orderly mode ------------------------------------------------------------------

    def take(self, batch_size: int) -> list[M]:
        """Take up to ``batch_size`` messages from the front, lowest offset first.

        An empty result ends the current consume task (the next :meth:`put`
        asks for a new one).
        """
        self.last_consume_ms = self._clock.now_ms()
        out: list[M] = []
        while len(out) < batch_size:
            first = self._first()
            if first is None:
                break
            self._order.popleft()
            msg = self._held.pop(first)
            self._taken[first] = msg
            out.append(msg)
        if not out:
            self._consuming = False
        return out

    def commit(self) -> int | None:
        """Let every taken message go; the offset to commit (one past the last taken).

        None when nothing was taken.
        """
        if not self._taken:
            return None
        last = max(self._taken)
        self._count -= len(self._taken)
        if self._count == 0:
            self._size = 0
        else:
            self._size -= sum(m.body_size for m in self._taken.values())
        self._taken.clear()
        return last + 1

    def rollback(self) -> None:
        """Give every taken message back, to be taken again in offset order."""
        taken = self._taken
        self._taken = {}
        self._give_back(taken)

    def make_available_again(self, messages: Iterable[M]) -> None:
        """Give these taken messages back (a suspended batch is consumed again)."""
        back: dict[int, M] = {}
        for msg in messages:
            self._taken.pop(msg.queue_offset, None)
            back[msg.queue_offset] = msg
        self._give_back(back)

    @property
    def taken(self) -> int:
        """Messages taken and not yet committed or given back."""
        return len(self._taken)

    # -- inside --------------------------------------------------------------------------

    def _first(self) -> int | None:
        order = self._order
        held = self._held
        while order and order[0] not in held:
            order.popleft()
        return order[0] if order else None

    def _last(self) -> int:
        """The highest held offset; only called when :meth:`_first` found one."""
        order = self._order
        held = self._held
        while order[-1] not in held:
            order.pop()
        return order[-1]

    def _give_back(self, messages: dict[int, M]) -> None:
        if not messages:
            return
        self._held.update(messages)
        first = self._first()
        offsets = sorted(messages)
        if first is None or offsets[-1] < first:
            self._order.extendleft(reversed(offsets))
        else:
            self._order = deque(sorted(self._held))
