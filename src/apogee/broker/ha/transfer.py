"""SYNC_MASTER: sends wait until a slave has their bytes (RocketMQ GroupTransferService).

Owns: the waiters of replication, grouped in generations as the SYNC_FLUSH
group commit groups its waiters, the in-sync test (``slave_ok``) and the
joining of a send's flush and replication outcomes.

Generations: ``request(end)`` returns the future of the current generation,
shared by every request until the next acknowledgement from a slave; that
acknowledgement closes it, and completes with PUT_OK every closed generation
whose highest end offset a slave has acknowledged. A generation older than
``timeout_s`` (syncFlushTimeout) completes with FLUSH_SLAVE_TIMEOUT. Every
call happens on the event loop, so futures complete there and their callbacks
(the send handler's answers, one ResponseBatch per generation) run at once.

In sync (4.x ``isSlaveOK``): at least one slave is connected and the highest
offset any slave acknowledged is less than ``max_gap`` (haMaxGapNotInSync)
behind the end of the message; otherwise the send is answered
SLAVE_NOT_AVAILABLE at once (the message stays stored on the master).

A send under SYNC_FLUSH and SYNC_MASTER waits for both: ``join`` makes one
future per distinct pair of generations, so waiters stay grouped; a
replication failure outranks a flush failure, as in RocketMQ.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from apogee.store.results import PutStatus

Now = Callable[[], float]


@dataclass(slots=True)
class _Generation:
    deadline: float
    max_end: int = 0
    future: Future[PutStatus] = field(default_factory=Future)


def _completed(status: PutStatus) -> Future[PutStatus]:
    fut: Future[PutStatus] = Future()
    fut.set_result(status)
    return fut


class GroupTransfer:
    """Replication waiters of a SYNC_MASTER; see the module docstring."""

    def __init__(self, *, timeout_s: float, max_gap: int, now: Now = time.monotonic) -> None:
        self._timeout_s = timeout_s
        self._max_gap = max_gap
        self._now = now
        self._current: _Generation | None = None
        self._pending: list[_Generation] = []
        self._ok = _completed(PutStatus.PUT_OK)
        self._not_available = _completed(PutStatus.SLAVE_NOT_AVAILABLE)
        self._joined: dict[tuple[Future[PutStatus], Future[PutStatus]], Future[PutStatus]] = {}
        #: highest offset any slave acknowledged, and how many slaves are connected
        self.acked = 0
        self.slaves = 0
        self.generations = 0  # made so far (each answered as one)

    def slave_ok(self, end_offset: int) -> bool:
        return self.slaves > 0 and end_offset - self.acked < self._max_gap

    def request(self, end_offset: int) -> Future[PutStatus]:
        """A future that completes once a slave has every byte before ``end_offset``."""
        if not self.slave_ok(end_offset):
            return self._not_available
        if end_offset <= self.acked:
            return self._ok
        gen = self._current
        if gen is None:
            gen = self._current = _Generation(self._now() + self._timeout_s)
            self.generations += 1
        if end_offset > gen.max_end:  # noqa: PLR1730 - no max() call per request
            gen.max_end = end_offset
        return gen.future

    def waiting(self) -> int:
        return len(self._pending) + (self._current is not None)

    def on_ack(self, offset: int) -> None:
        """A slave acknowledged ``offset``: answer what it covers."""
        self.acked = max(self.acked, offset)
        self._round()

    def tick(self) -> None:
        """Answer generations whose time is up (called every few milliseconds)."""
        if self._pending or self._current is not None:
            self._round()

    def _round(self) -> None:
        gen, self._current = self._current, None
        if gen is not None:
            self._pending.append(gen)
        if not self._pending:
            return
        now, acked = self._now(), self.acked
        done: list[tuple[_Generation, PutStatus]] = []
        still: list[_Generation] = []
        for g in self._pending:
            if acked >= g.max_end:
                done.append((g, PutStatus.PUT_OK))
            elif now >= g.deadline:
                done.append((g, PutStatus.FLUSH_SLAVE_TIMEOUT))
            else:
                still.append(g)
        self._pending = still
        for g, status in done:
            g.future.set_result(status)

    def fail_all(self, status: PutStatus = PutStatus.FLUSH_SLAVE_TIMEOUT) -> None:
        """Answer every waiter (the broker is stopping)."""
        gens = [*self._pending, *([self._current] if self._current else [])]
        self._pending, self._current = [], None
        for g in gens:
            g.future.set_result(status)

    # -- flush and replication together ------------------------------------------------

    def join(self, flushed: Future[PutStatus], replicated: Future[PutStatus]) -> Future[PutStatus]:
        """One future for a send that waits for its flush and its replication."""
        if flushed.done():
            if flushed.result() is PutStatus.PUT_OK:
                return replicated  # ASYNC_FLUSH: waiters stay grouped by generation
            if replicated.done():
                return _completed(_combined(flushed.result(), replicated.result()))
        key = (flushed, replicated)
        joined = self._joined.get(key)
        if joined is None:
            joined = self._joined[key] = Future()

            def settle(_: Future[PutStatus]) -> None:
                if flushed.done() and replicated.done() and not joined.done():
                    self._joined.pop(key, None)
                    joined.set_result(_combined(flushed.result(), replicated.result()))

            flushed.add_done_callback(settle)
            replicated.add_done_callback(settle)
        return joined


def _combined(flushed: PutStatus, replicated: PutStatus) -> PutStatus:
    return replicated if replicated is not PutStatus.PUT_OK else flushed
