"""Which transactions are still open: the broker's memory of its half queue.

Owns: TransactionBook, the lineages (see ``transaction``) that have a copy at
or after the check progress of the half queue, each with its newest copy and
whether an op record resolved it, plus the two progress offsets persisted as
group CID_RMQ_SYS_TRANS's offsets of the half and op queues.
No I/O: the send and end-transaction handlers and the check service tell it
what they stored; ``transaction_service.recover_book`` rebuilds it at start.

Invariants:
* ``half_progress``: every half copy below it is finished: resolved,
  superseded by a newer copy, or discarded. A lineage stays in the book while
  its newest copy is at or after ``half_progress``; so a lineage the book
  does not hold is finished, and an END_TRANSACTION for it changes nothing.
* ``op_progress()``: every op record that resolved a lineage still in the
  book is at or after it. Both offsets are taken together, so a restart from
  any persisted pair rebuilds the same open set from the two queues.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(slots=True)
class Lineage:
    newest: int  # queue offset of its newest copy in the half queue
    resolved: bool = False
    op_offset: int = -1  # op-queue offset of the record that resolved it; -1: none


class TransactionBook:
    def __init__(self, half_progress: int = 0, next_op_offset: int = 0) -> None:
        self.half_progress = half_progress
        self._next_op = next_op_offset
        self._lineages: dict[int, Lineage] = {}
        # (newest copy, lineage) of every copy stored, smallest first, so that
        # ``advance`` forgets lineages without walking all of them; an entry
        # whose lineage has a newer copy since is skipped when it comes up
        self._by_newest: list[tuple[int, int]] = []
        # the newest copy of every open lineage: what a check round reads (the other
        # copies it passes are finished, and reading them would only confirm it)
        self._to_check: set[int] = set()

    # -- what was stored ----------------------------------------------------------

    def opened(self, queue_offset: int) -> None:
        """A half message was stored at ``queue_offset``: a new lineage."""
        self._lineages[queue_offset] = Lineage(queue_offset)
        self._to_check.add(queue_offset)
        heapq.heappush(self._by_newest, (queue_offset, queue_offset))

    def renewed(self, lineage: int, queue_offset: int) -> None:
        """A newer copy of ``lineage`` was stored at ``queue_offset``."""
        entry = self._lineages.get(lineage)
        if entry is None:
            entry = self._lineages[lineage] = Lineage(queue_offset)
        elif queue_offset > entry.newest:
            self._to_check.discard(entry.newest)
            entry.newest = queue_offset
        else:
            return
        if not entry.resolved:
            self._to_check.add(queue_offset)
        heapq.heappush(self._by_newest, (queue_offset, lineage))

    def resolve(self, lineage: int, op_offset: int = -1) -> bool:
        """Mark ``lineage`` committed, rolled back or discarded; False if it was not open.

        ``op_offset``: where its op record went (-1: none was written).
        """
        entry = self._lineages.get(lineage)
        if entry is None or entry.resolved:
            return False
        entry.resolved = True
        entry.op_offset = op_offset
        self._to_check.discard(entry.newest)
        if op_offset >= self._next_op:
            self._next_op = op_offset + 1
        return True

    # -- questions ------------------------------------------------------------------

    def is_open(self, lineage: int) -> bool:
        entry = self._lineages.get(lineage)
        return entry is not None and not entry.resolved

    def is_current(self, lineage: int, queue_offset: int) -> bool:
        """The copy at ``queue_offset`` is the newest of an open lineage: it is to be checked."""
        entry = self._lineages.get(lineage)
        return entry is not None and not entry.resolved and entry.newest == queue_offset

    def to_check(self, queue_offset: int) -> bool:
        """The copy at ``queue_offset`` is the newest of an open lineage, whichever lineage
        it belongs to: ``is_current`` without reading the copy to learn its lineage."""
        return queue_offset in self._to_check

    @property
    def open_count(self) -> int:
        return sum(1 for e in self._lineages.values() if not e.resolved)

    def __len__(self) -> int:
        return len(self._lineages)

    # -- progress -------------------------------------------------------------------

    def advance(self, half_offset: int) -> None:
        """Every copy below ``half_offset`` is finished: forget lineages wholly below it."""
        if half_offset <= self.half_progress:
            return
        self.half_progress = half_offset
        by_newest, lineages = self._by_newest, self._lineages
        while by_newest and by_newest[0][0] < half_offset:
            newest, key = heapq.heappop(by_newest)
            entry = lineages.get(key)
            if entry is not None and entry.newest == newest:
                del lineages[key]
                self._to_check.discard(newest)

    def op_progress(self) -> int:
        """The op-queue offset a restart must read op records from."""
        pending = [e.op_offset for e in self._lineages.values() if e.op_offset >= 0]
        return min(pending, default=self._next_op)
