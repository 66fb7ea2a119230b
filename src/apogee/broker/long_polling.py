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
dispatch step, which runs on the event loop; woken pulls are re-run in one
loop callback after that step, never inside it.

Safety net (RocketMQ's checkHoldRequest): every ``check_interval_s`` each
parked pull whose queue's max offset has gone past its offset is woken
whatever the tag, in case an arrival was not heard; the re-run answers it
with what it finds, or PULL_NOT_FOUND, and the consumer pulls again.

Bounds: at most ``max_parked`` pulls in all and ``max_per_connection`` per
connection; ``hold`` refuses beyond them (the caller answers SYSTEM_BUSY). A
closed connection's pulls are dropped at once, never kept until a message
arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.dispatch import RequestContext, Responder, ResponseBatch

log = logging.getLogger(__name__)

Resume = Callable[[RequestContext, PullMessageRequestHeader], None]
MaxOffset = Callable[[str, int], int]


@dataclass(slots=True, eq=False)
class HeldPull:
    ctx: RequestContext
    header: PullMessageRequestHeader
    codes: frozenset[int] | None
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


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
        self._ready: list[HeldPull] = []
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
        key = (header.topic, header.queue_id)
        pull = HeldPull(ctx, header, codes)
        pull.timer = loop.call_later(timeout_s, self._expire, pull)
        self._held.setdefault(key, {})[pull] = None
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
        conn = pull.ctx.responder
        mine = self._by_connection.get(conn)
        if mine is not None:
            mine.pop(pull, None)
            if not mine:
                del self._by_connection[conn]
        self._count -= 1
        if pull.timer is not None:
            pull.timer.cancel()
        return True

    def connection_closed(self, conn: Responder) -> None:
        """Drop the pulls parked by a connection that closed (nobody will read them)."""
        mine = self._by_connection.get(conn)
        if mine:
            for pull in list(mine):
                self._forget(pull)

    def on_arrival(self, topic: str, queue_id: int, offset: int, code: int, store_ts: int) -> None:
        if not self._held:
            return
        waiting = self._held.get((topic, queue_id))
        if not waiting:
            return
        woken = [
            pull
            for pull in waiting
            if offset >= pull.header.queue_offset and (pull.codes is None or code in pull.codes)
        ]
        for pull in woken:
            self._forget(pull)
            self._wake(pull)

    def _check_held(self) -> None:
        max_offset = self._max_offset
        assert max_offset is not None and self._loop is not None
        for (topic, queue_id), waiting in list(self._held.items()):
            newest = max_offset(topic, queue_id)
            for pull in [p for p in waiting if newest > p.header.queue_offset]:
                self._forget(pull)
                self._wake(pull)
        if not self.closed:
            self._check = self._loop.call_later(self.check_interval_s, self._check_held)

    def _wake(self, pull: HeldPull) -> None:
        self._ready.append(pull)
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._run_ready)

    def _expire(self, pull: HeldPull) -> None:
        if self._forget(pull):
            self._run(pull)

    def _run_ready(self) -> None:
        self._scheduled = False
        ready, self._ready = self._ready, []
        with ResponseBatch() as batch:  # a consumer's woken queues answered in one send
            for pull in ready:
                if pull.ctx.responder.closed:
                    continue
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
        if self._check is not None:
            self._check.cancel()
            self._check = None
        held = [pull for waiting in self._held.values() for pull in waiting]
        for pull in held:
            self._forget(pull)
            self._run(pull)
        self._run_ready()
