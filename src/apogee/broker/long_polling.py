"""Parked pulls (RocketMQ PullRequestHoldService): answer when a message arrives or time is up.

Owns: pulls that found nothing and may wait (SUSPEND bit), keyed by
``(topic, queue id)``; waking them when the store dispatches a matching
message into that queue; the per-pull deadline; answering everything at
shutdown. Imports: asyncio, ``apogee.protocol.headers``, ``apogee.remoting``.

Rules: a parked pull wakes when a message at or beyond its offset arrives
whose tag code passes its filter (``codes`` None = every tag), or when its
hold time is over; either way it is run again with suspension disallowed
and answered with the original opaque. Arrivals come from the store's
dispatch step, which runs on the event loop; woken pulls are re-run in one
loop callback after that step, never inside it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.dispatch import RequestContext, ResponseBatch

log = logging.getLogger(__name__)

Resume = Callable[[RequestContext, PullMessageRequestHeader], None]


@dataclass(slots=True, eq=False)
class HeldPull:
    ctx: RequestContext
    header: PullMessageRequestHeader
    codes: frozenset[int] | None
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class PullHoldService:
    """Parked pulls of one broker; ``on_arrival`` is the store's arrival listener."""

    def __init__(self, resume: Resume | None = None) -> None:
        self._resume = resume
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._ready: list[HeldPull] = []
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    def bind(self, resume: Resume) -> None:
        """Name the function that runs a woken pull again (the pull handler)."""
        self._resume = resume

    def __len__(self) -> int:
        return sum(len(v) for v in self._held.values())

    def hold(
        self,
        ctx: RequestContext,
        header: PullMessageRequestHeader,
        codes: frozenset[int] | None,
        timeout_s: float,
    ) -> None:
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        key = (header.topic, header.queue_id)
        pull = HeldPull(ctx, header, codes)
        pull.timer = loop.call_later(timeout_s, self._expire, key, pull)
        self._held.setdefault(key, []).append(pull)

    def on_arrival(self, topic: str, queue_id: int, offset: int, code: int, store_ts: int) -> None:
        if not self._held:
            return
        waiting = self._held.get((topic, queue_id))
        if not waiting:
            return
        keep: list[HeldPull] = []
        for pull in waiting:
            if offset >= pull.header.queue_offset and (pull.codes is None or code in pull.codes):
                self._wake(pull)
            else:
                keep.append(pull)
        if keep:
            self._held[(topic, queue_id)] = keep
        else:
            del self._held[(topic, queue_id)]

    def _wake(self, pull: HeldPull) -> None:
        if pull.timer is not None:
            pull.timer.cancel()
        self._ready.append(pull)
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._run_ready)

    def _expire(self, key: tuple[str, int], pull: HeldPull) -> None:
        waiting = self._held.get(key)
        if waiting is None or pull not in waiting:
            return
        waiting.remove(pull)
        if not waiting:
            del self._held[key]
        self._run(pull)

    def _run_ready(self) -> None:
        self._scheduled = False
        ready, self._ready = self._ready, []
        with ResponseBatch() as batch:  # a consumer's woken queues answered in one send
            for pull in ready:
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
        held, self._held = self._held, {}
        for pulls in held.values():
            for pull in pulls:
                if pull.timer is not None:
                    pull.timer.cancel()
                self._run(pull)
        self._run_ready()
