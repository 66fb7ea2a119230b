"""A process queue whose messages leave in the order they came, counted per pulled batch.

Owns: :class:`FifoProcessQueue`, the ProcessQueue of a LitePullConsumer.
``poll`` hands out whole pulled batches front to back (the last one maybe
cut), so what is held of a queue is a run of batches and what leaves is
always its front. Put and remove then cost one step per batch, not one
dict entry per message, which was a quarter of a catch-up poll's CPU.

The figures are those of :class:`ProcessQueue`: the count and body bytes
held, the offset to commit (the lowest held, or one past the highest ever
put when none is), the span between the lowest and highest held offset.
Messages removed out of that order (no caller does) are still accounted
for, by a slower path that rebuilds the batches. No orderly consumption:
``take`` and its kin are for push consumers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Generic

from apogee._util.clock import SYSTEM_CLOCK, Clock
from apogee.client.process_queue import M, ProcessQueue


class _Batch(Generic[M]):
    """One pulled batch: its messages from ``start`` on are held, ``size`` body bytes."""

    __slots__ = ("msgs", "size", "start")

    def __init__(self, msgs: Sequence[M], size: int) -> None:
        self.msgs = msgs
        self.start = 0
        self.size = size

    def held(self) -> Sequence[M]:
        return self.msgs[self.start :] if self.start else self.msgs


class FifoProcessQueue(ProcessQueue[M]):
    """Held messages as a deque of pulled batches (see the module docstring)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(clock)
        self._batches: deque[_Batch[M]] = deque()

    # -- what is held ------------------------------------------------------------------

    def has_messages(self) -> bool:
        return bool(self._batches)

    def __contains__(self, queue_offset: int) -> bool:
        return any(m.queue_offset == queue_offset for m in self._all_held())

    def first_message(self) -> M | None:
        if not self._batches:
            return None
        front = self._batches[0]
        return front.msgs[front.start]

    def _first(self) -> int | None:
        if not self._batches:
            return None
        front = self._batches[0]
        return front.msgs[front.start].queue_offset

    def _last(self) -> int:
        return self._batches[-1].msgs[-1].queue_offset

    # -- put and remove ------------------------------------------------------------------

    def put(self, messages: Sequence[M], *, max_offset: int | None = None) -> bool:
        """Hold one pulled batch, in ascending offsets after what is held.

        Always False: nothing is consumed by tasks of the queue's own.
        """
        if not messages:
            return False
        if self._batches and messages[0].queue_offset <= self._last():
            self._put_unordered(messages)  # a pull went back over held offsets
        else:
            size = sum([m.body_size for m in messages])
            self._batches.append(_Batch(messages, size))
            self._count += len(messages)
            self._size += size
            self._max_offset = messages[-1].queue_offset
        if max_offset is not None:
            behind = max_offset - messages[-1].queue_offset
            if behind > 0:
                self.backlog = behind
        return False

    def remove(self, messages: Iterable[M]) -> int | None:
        """Let the front ``messages`` go; the offset to commit now (None: none was held)."""
        self.last_consume_ms = self._clock.now_ms()
        batches = self._batches
        if not batches:
            return None
        gone = messages if isinstance(messages, list) else list(messages)
        n = len(gone)
        if n:
            front = batches[0]
            msgs = front.msgs
            start = front.start
            left = len(msgs) - start
            if left == n and gone[0] is msgs[start] and gone[-1] is msgs[-1]:
                batches.popleft()  # the rest of the front batch: the common case
                self._count -= n
                self._size -= front.size
            elif left > n and gone[0] is msgs[start] and gone[-1] is msgs[start + n - 1]:
                size = sum([m.body_size for m in gone])  # poll cut the batch
                front.start = start + n
                front.size -= size
                self._count -= n
                self._size -= size
            else:
                self._remove_any(gone)
        first = self._first()
        return self._max_offset + 1 if first is None else first

    def clear(self) -> None:
        super().clear()
        self._batches.clear()

    # -- orderly consumption is not for this queue -------------------------------------------

    def take(self, batch_size: int) -> list[M]:
        raise NotImplementedError("a FIFO process queue is not consumed orderly")

    def commit(self) -> int | None:
        raise NotImplementedError("a FIFO process queue is not consumed orderly")

    def rollback(self) -> None:
        raise NotImplementedError("a FIFO process queue is not consumed orderly")

    def make_available_again(self, messages: Iterable[M]) -> None:
        raise NotImplementedError("a FIFO process queue is not consumed orderly")

    # -- the slow paths ------------------------------------------------------------------------

    def _all_held(self) -> list[M]:
        return [m for batch in self._batches for m in batch.held()]

    def _hold_exactly(self, held: list[M]) -> None:
        """Hold ``held`` (any order, each offset once) as one batch in offset order."""
        held.sort(key=lambda m: m.queue_offset)
        size = sum([m.body_size for m in held])
        self._batches = deque([_Batch(held, size)]) if held else deque()
        self._count = len(held)
        self._size = size

    def _put_unordered(self, messages: Sequence[M]) -> None:
        """Hold ``messages`` too; one whose offset is held replaces it (as ProcessQueue)."""
        fresh = {m.queue_offset: m for m in messages}
        held = [m for m in self._all_held() if m.queue_offset not in fresh]
        held += fresh.values()
        self._hold_exactly(held)
        self._max_offset = max(self._max_offset, messages[-1].queue_offset)

    def _remove_any(self, gone: Sequence[M]) -> None:
        offsets = {m.queue_offset for m in gone}
        self._hold_exactly([m for m in self._all_held() if m.queue_offset not in offsets])
