"""Parked pulls (RocketMQ PullRequestHoldService): answer when a message arrives or time is up.

Owns: pulls that found nothing and may wait (SUSPEND bit), keyed by
``(topic, queue id)``; waking them when the store dispatches a matching
message into that queue; the per-pull deadline; the periodic check against
each queue's max offset; the bounds on parked pulls; answering everything at
shutdown.

Rules: a parked pull wakes when a message at or beyond its offset arrives
whose tag code passes its filter (``codes`` None = every tag), or when its
hold time is over; either way it is run again with suspension disallowed
and answered with the original opaque. Arrivals come from the store's
dispatch step, which runs on the event loop; woken pulls are re-run in loop
callbacks after that step, never inside it.

Safety net (RocketMQ's checkHoldRequest): every ``check_interval_s`` each
parked pull whose queue's max offset has gone past its offset is woken
whatever the tag, in case an arrival was not heard; the re-run answers it
with what it finds, or PULL_NOT_FOUND, and the consumer pulls again.

Bounds: at most ``max_parked`` pulls in all and ``max_per_connection`` per
connection; ``hold`` refuses beyond them (the caller answers SYSTEM_BUSY).

No long loop turns, however many pulls are parked (another client's request
waits behind any turn): deadlines are kept in one wheel of ``TICK_S`` slots
swept by a single timer, not a timer handle per pull (cancelling 1000 of
200,000 loop timers costs milliseconds); a closed connection's pulls are
detached from it at once (O(1) in its close callback, since a burst of
closes all run in one loop turn) and taken out of the tables at most
``DROP_SLICE`` per loop turn; a woken or expired pull is only marked and
queued, and leaves the tables when its turn to be re-run comes, at most
``RUN_SLICE`` per loop turn (one message can wake every pull parked on its
queue). Until it is dropped or re-run, a pull still counts against the
bounds; one whose connection closed meanwhile is not re-run.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.dispatch import RequestContext, Responder, ResponseBatch

log = logging.getLogger(__name__)

Resume = Callable[[RequestContext, PullMessageRequestHeader], None]
MaxOffset = Callable[[str, int], int]

#: Width of one deadline slot: a pull is answered at most this late after its hold time.
TICK_S = 0.05
#: Pulls of closed connections taken out of the tables in one loop turn.
DROP_SLICE = 1000
#: Woken or expired pulls re-run (each a read of the store and an answer) in one loop turn.
RUN_SLICE = 256


@dataclass(slots=True, eq=False)
class HeldPull:
    ctx: RequestContext
    header: PullMessageRequestHeader
    codes: frozenset[int] | None
    tick: int = 0  # its deadline's slot in the wheel
    woken: bool = False  # waiting for its turn to run: it stays in the tables until then


class PullHoldService:
    """Parked pulls of one broker; ``on_arrival`` is the store's arrival listener."""

    def __init__(
        self,
        resume: Resume | None = None,
        *,
        max_parked: int = 100_000,
        max_per_connection: int = 1000,
        check_interval_s: float = 5.0,
    ) -> None:
        self._resume = resume
        # insertion-ordered dicts: a pull leaves in O(1) however many wait
        self._held: dict[tuple[str, int], dict[HeldPull, None]] = {}
        self._by_connection: dict[Responder, dict[HeldPull, None]] = {}
        self._count = 0
        # the deadline wheel: slot number -> pulls due then; every slot >= _cursor
        self._due: dict[int, dict[HeldPull, None]] = {}
        self._cursor = 0
        self._sweep_handle: asyncio.Handle | None = None
        self._closing: deque[dict[HeldPull, None]] = deque()  # closed connections' pulls
        self._dropping = False
        self._ready: deque[HeldPull] = deque()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._max_offset: MaxOffset | None = None
        self._check: asyncio.TimerHandle | None = None
        self.max_parked = max_parked
        self.max_per_connection = max_per_connection
        self.check_interval_s = check_interval_s
        self.refused = 0
        self.closed = False

    def bind(self, resume: Resume) -> None:
        """Name the function that runs a woken pull again (the pull handler)."""
        self._resume = resume

    def start_checks(self, max_offset: MaxOffset) -> None:
        """Run the periodic check (see the module docstring) against ``max_offset``."""
        self._max_offset = max_offset
        self._loop = self._loop or asyncio.get_running_loop()
        self._check = self._loop.call_later(self.check_interval_s, self._check_held)

    def __len__(self) -> int:
        return self._count

    @property
    def dropping(self) -> int:
        """Pulls of closed connections not yet taken out of the tables."""
        return sum(len(mine) for mine in self._closing)

    def hold(
        self,
        ctx: RequestContext,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        timeout_s: float,
    ) -> bool:
        """Park a pull; False (nothing parked) when a bound is reached."""
        conn = ctx.responder
        mine = self._by_connection.get(conn)
        if self._count >= self.max_parked or (
            mine is not None and len(mine) >= self.max_per_connection
        ):
            self.refused += 1
            log.warning("not parking a pull from %s: %d parked in all (max %d), %d on its "
                        "connection (max %d)", ctx.peer, self._count, self.max_parked,
                        len(mine or ()), self.max_per_connection)  # fmt: skip
            return False
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        if self._sweep_handle is None:
            # the wheel is empty: it starts at the current slot
            self._cursor = math.floor(loop.time() / TICK_S)
            self._sweep_handle = loop.call_later(TICK_S, self._sweep)
        tick = max(math.ceil((loop.time() + timeout_s) / TICK_S), self._cursor)
        pull = HeldPull(ctx, header, codes, tick)
        self._held.setdefault((header.topic, header.queue_id), {})[pull] = None
        self._due.setdefault(tick, {})[pull] = None
        if mine is None:
            mine = self._by_connection[conn] = {}
        mine[pull] = None
        self._count += 1
        return True

    def _forget(self, pull: HeldPull) -> bool:
        """Take ``pull`` out of the tables; False if it was not parked any more."""
        key = (pull.header.topic, pull.header.queue_id)
        waiting = self._held.get(key)
        if waiting is None or pull not in waiting:
            return False
        del waiting[pull]
        if not waiting:
            del self._held[key]
        due = self._due.get(pull.tick)
        if due is not None:
            due.pop(pull, None)
            if not due:
                del self._due[pull.tick]
        conn = pull.ctx.responder
        mine = self._by_connection.get(conn)
        if mine is not None:
            mine.pop(pull, None)
            if not mine:
                del self._by_connection[conn]
        self._count -= 1
        return True

    def connection_closed(self, conn: Responder) -> None:
        """Drop the pulls parked by a connection that closed (nobody will read them).

        Only detaches them here: the pulls leave the tables a slice per loop turn.
        """
        mine = self._by_connection.pop(conn, None)
        if mine:
            self._closing.append(mine)
            if not self._dropping and self._loop is not None:
                self._dropping = True
                self._loop.call_soon(self._drop_closed)

    def _drop_closed(self) -> None:
        budget = DROP_SLICE
        closing = self._closing
        while closing and budget:
            mine = closing[0]
            while mine and budget:
                pull, _ = mine.popitem()
                self._forget(pull)
                budget -= 1
            if not mine:
                closing.popleft()
        self._dropping = bool(closing)
        if closing and self._loop is not None:
            self._loop.call_soon(self._drop_closed)

    def on_arrival(self, topic: str, queue_id: int, offset: int, code: int, store_ts: int) -> None:
        if not self._held:
            return
        waiting = self._held.get((topic, queue_id))
        if not waiting:
            return
        for pull in waiting:
            if (
                not pull.woken
                and offset >= pull.header.queue_offset
                and (pull.codes is None or code in pull.codes)
            ):
                self._wake(pull)

    def _check_held(self) -> None:
        max_offset = self._max_offset
        assert max_offset is not None and self._loop is not None
        for (topic, queue_id), waiting in list(self._held.items()):
            newest = max_offset(topic, queue_id)
            for pull in waiting:
                if not pull.woken and newest > pull.header.queue_offset:
                    self._wake(pull)
        if not self.closed:
            self._check = self._loop.call_later(self.check_interval_s, self._check_held)

    def _sweep(self) -> None:
        """Wake the pulls whose slot has come (re-run: PULL_NOT_FOUND, or what arrived)."""
        loop = self._loop
        assert loop is not None
        now = math.floor(loop.time() / TICK_S)
        budget = DROP_SLICE
        tick = self._cursor
        while tick <= now and budget:
            due = self._due.get(tick)
            while due and budget:
                pull, _ = due.popitem()
                if not due:
                    del self._due[tick]
                self._wake(pull)
                budget -= 1
            if due:  # the slice is spent in the middle of a slot
                break
            tick += 1
        self._cursor = tick  # every slot before it is empty
        if not self._due:
            self._sweep_handle = None
        elif tick <= now:  # more are due: the rest in the next turns
            self._sweep_handle = loop.call_soon(self._sweep)
        else:
            self._sweep_handle = loop.call_later(TICK_S, self._sweep)

    def _wake(self, pull: HeldPull) -> None:
        if pull.woken:
            return
        pull.woken = True
        self._ready.append(pull)
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._run_ready)

    def _run_ready(self) -> None:
        self._scheduled = False
        self._run_woken(RUN_SLICE)
        if self._ready and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._run_ready)

    def _run_woken(self, limit: int) -> None:
        ready = self._ready
        with ResponseBatch() as batch:  # a consumer's woken queues answered in one send
            for _ in range(min(len(ready), limit)):
                pull = ready.popleft()
                # taken out here, not when woken: a storm of wakes costs a slice per turn
                if not self._forget(pull) or pull.ctx.responder.closed:
                    continue  # dropped with its connection meanwhile
                batch.hold(pull.ctx)
                self._run(pull)

    def _run(self, pull: HeldPull) -> None:
        assert self._resume is not None
        try:
            self._resume(pull.ctx, pull.header)
        except Exception:
            log.exception("re-running a parked pull from %s failed", pull.ctx.peer)

    def close(self) -> None:
        """Answer every parked pull now and park no more (shutdown)."""
        self.closed = True
        for handle in (self._check, self._sweep_handle):
            if handle is not None:
                handle.cancel()
        self._check = self._sweep_handle = None
        held = [pull for waiting in self._held.values() for pull in waiting]
        for pull in held:
            self._forget(pull)
            if not pull.ctx.responder.closed:
                self._run(pull)
        self._closing.clear()
        self._run_woken(len(self._ready))
