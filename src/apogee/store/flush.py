"""Background services: flushing, group commit, preallocation, dispatch.

Owns: a small thread base class and the store's services (RocketMQ
FlushRealTimeService, GroupCommitService, FlushConsumeQueueService,
AllocateMappedFileService, ReputMessageService). Each is started and stopped
by its owner; the work of one round is a plain method, so tests can run a
round on their own thread. Imports: ``apogee.store.*``, ``apogee._util.clock``,
stdlib (threading, concurrent.futures).

Group commit: ``request(end_offset)`` returns a ``concurrent.futures.Future``
shared by every request that arrives before the service's next swap; one
fdatasync then completes the whole generation with PUT_OK. A generation the
flushes have not covered by its deadline (syncFlushTimeout after it opened)
completes with FLUSH_DISK_TIMEOUT. Futures are completed on the service
thread, never on the caller's; an asyncio caller awaits
``asyncio.wrap_future(fut)`` (and should wrap each distinct future once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from apogee._util.clock import Clock
from apogee.store.results import PutStatus

log = logging.getLogger(__name__)


class ServiceThread:
    """A daemon thread that runs ``run_once`` every ``interval_s`` or when woken."""

    name = "service"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.failures = 0

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopped.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopped.set()
        self._wake.set()
        thread.join(timeout_s)
        self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def wakeup(self) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stopped.is_set():
                break
            try:
                self.run_once()
                self.rounds += 1
            except Exception:  # a service must outlive one bad round
                self.failures += 1
                log.exception("%s round failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError


class CommitLogFlushService(ServiceThread):
    """ASYNC_FLUSH: flush when enough pages are dirty, fully every few seconds."""

    name = "apogee-flush-commitlog"

    def __init__(
        self,
        flush: Callable[[int], int],
        on_flushed: Callable[[], None],
        clock: Clock,
        *,
        interval_ms: int = 500,
        least_pages: int = 4,
        thorough_interval_ms: int = 10_000,
    ) -> None:
        super().__init__(interval_ms / 1000)
        self._flush = flush
        self._on_flushed = on_flushed
        self._clock = clock
        self._least_pages = least_pages
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = clock.monotonic()

    def run_once(self) -> None:
        now = self._clock.monotonic()
        least = self._least_pages
        if now - self._last_thorough >= self._thorough_s:
            least = 0
            self._last_thorough = now
        self._flush(least)
        self._on_flushed()


@dataclass(slots=True)
class _Generation:
    deadline: float
    max_end: int = 0
    future: Future[PutStatus] = field(default_factory=Future)


def _done(status: PutStatus) -> Future[PutStatus]:
    fut: Future[PutStatus] = Future()
    fut.set_result(status)
    return fut


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: one fdatasync releases every waiter whose bytes it covers."""

    name = "apogee-group-commit"

    def __init__(
        self,
        flush: Callable[[int], int],
        flushed_offset: Callable[[], int],
        on_flushed: Callable[[], None],
        clock: Clock,
        *,
        timeout_ms: int = 5000,
    ) -> None:
        super().__init__(0.010)  # RocketMQ waits at most 10 ms for requests
        self._flush = flush
        self._flushed_offset = flushed_offset
        self._on_flushed = on_flushed
        self._clock = clock
        self._timeout_s = timeout_ms / 1000
        self._lock = threading.Lock()
        self._current: _Generation | None = None
        self._pending: list[_Generation] = []
        self._ok = _done(PutStatus.PUT_OK)
        self.syncs = 0
        self.sync_seconds = 0.0  # time spent in flush calls, for the figures

    def request(self, end_offset: int) -> Future[PutStatus]:
        """A future that completes when a flush covers ``end_offset``."""
        if end_offset <= self._flushed_offset():
            return self._ok
        with self._lock:
            gen = self._current
            if gen is None:
                gen = self._current = _Generation(self._clock.monotonic() + self._timeout_s)
                opened = True
            else:
                opened = False
            if end_offset > gen.max_end:  # noqa: PLR1730 - no max() call per request
                gen.max_end = end_offset
        if opened:
            self.wakeup()  # later requests of this generation find the service awake
        return gen.future

    def waiting(self) -> int:
        """Generations not yet completed."""
        with self._lock:
            return len(self._pending) + (self._current is not None)

    def run_once(self) -> None:
        with self._lock:
            gen, self._current = self._current, None
        if gen is not None:
            self._pending.append(gen)
        if not self._pending:
            return
        try:
            began = time.perf_counter()
            flushed = self._flush(0)
            self.sync_seconds += time.perf_counter() - began
            self.syncs += 1
            self._on_flushed()
        except OSError:
            log.exception("commit-log flush failed")
            flushed = self._flushed_offset()
        now = self._clock.monotonic()
        still: list[_Generation] = []
        for g in self._pending:
            if flushed >= g.max_end:
                g.future.set_result(PutStatus.PUT_OK)
            elif now >= g.deadline:
                g.future.set_result(PutStatus.FLUSH_DISK_TIMEOUT)
            else:
                still.append(g)
        self._pending = still
        if still:
            self.wakeup()

    def fail_all(self, status: PutStatus = PutStatus.FLUSH_DISK_TIMEOUT) -> None:
        """Complete every open generation (the store is closing)."""
        with self._lock:
            gens = [*self._pending, *([self._current] if self._current else [])]
            self._pending, self._current = [], None
        for g in gens:
            if not g.future.done():
                g.future.set_result(status)


class ConsumeQueueFlushService(ServiceThread):
    """Flush consume queues (and the index) and then the checkpoint, every second."""

    name = "apogee-flush-consumequeue"

    def __init__(self, flush_round: Callable[[bool], None], clock: Clock, *, interval_ms: int,
                 thorough_interval_ms: int) -> None:  # fmt: skip
        super().__init__(interval_ms / 1000)
        self._flush_round = flush_round
        self._clock = clock
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = clock.monotonic()

    def run_once(self) -> None:
        now = self._clock.monotonic()
        thorough = now - self._last_thorough >= self._thorough_s
        if thorough:
            self._last_thorough = now
        self._flush_round(thorough)


class CallService(ServiceThread):
    """Runs one callable per round: preallocation, dispatch, cleaning."""

    def __init__(self, name: str, work: Callable[[], object], interval_s: float) -> None:
        super().__init__(interval_s)
        self.name = name
        self._work = work

    def run_once(self) -> None:
        self._work()
