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

Cheap for the cycle collector, however many pulls are parked: a parked pull
is one flat tuple of numbers and strings (``Held``), its connection named by
a number, its tag codes a tuple of ints shared by the pulls with the same
ones. The first young collection stops tracking such a tuple, so parked
pulls add nothing to the collector's generations (only a pull filtering on
more than ``SMALL_CODES`` tags keeps a frozenset, and so stays tracked).
Kept as objects (context, request, header, a record: four per pull),
200,000 parked pulls were 800,000 objects that each young collection moved
on and each older one walked again: collections of 30-130 ms while they
were parked; a full one would take ~430 ms. Flat, because a collection
reorders what it keeps, often putting a tuple before the tuples it holds:
a nested record would stay tracked into the next generation. The context
and header are built again when the pull is re-run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import operator
from collections import deque
from collections.abc import Callable
from typing import Final

from apogee.codes import LanguageCode, SerializeType
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.dispatch import Observer, RequestContext, Responder, ResponseBatch

log = logging.getLogger(__name__)

Resume = Callable[[RequestContext, PullMessageRequestHeader], None]
MaxOffset = Callable[[str, int], int]

#: Width of one deadline slot: a pull is answered at most this late after its hold time.
TICK_S = 0.05
#: Pulls of closed connections taken out of the tables in one loop turn.
DROP_SLICE = 1000
#: Woken or expired pulls re-run (each a read of the store and an answer) in one loop turn.
RUN_SLICE = 256
#: Tag-code sets up to this size are kept as a tuple: a tuple of ints is untracked by the
#: collector, a frozenset never is; scanning a few ints costs what hashing one does.
SMALL_CODES = 8
#: Distinct small tag-code sets remembered for sharing (the memory is cleared when full).
SHARED_CODES = 4096

Codes = tuple[int, ...] | frozenset[int] | None
#: PullMessageRequestHeader's fields, in its order.
HeaderFields = tuple[
    str, str, int, int, int, int, int, int, int, str | None, str | None, int | None
]
#: A parked pull, flat: its number, its connection's number, its deadline's slot in the
#: wheel, the queue offset it waits beyond, its tag codes; its request's code, language,
#: version, opaque, flag, serialize type and arrival (perf_counter); then HeaderFields.
Held = tuple[
    int, int, int, int, Codes, int, int, int, int, int, int, float,
    str, str, int, int, int, int, int, int, int, str | None, str | None, int | None,
]  # fmt: skip
_SEQ: Final = 0
_PEER: Final = 1
_TICK: Final = 2
_OFFSET: Final = 3
_CODES: Final = 4
_REQUEST: Final = 5
_HEADER: Final = 12
_TOPIC: Final = 13  # the header's topic and queue id
_QUEUE: Final = 14

_header_fields: Callable[[PullMessageRequestHeader], HeaderFields] = operator.attrgetter(
    *(f.name for f in dataclasses.fields(PullMessageRequestHeader))
)


class _Peer:
    """A connection with parked pulls: what a re-run's context needs, and its pulls."""

    __slots__ = ("channel", "number", "observer", "pulls", "responder")

    def __init__(self, number: int, ctx: RequestContext) -> None:
        self.number = number
        self.responder = ctx.responder
        self.channel = ctx.channel
        self.observer: Observer | None = ctx.observer
        self.pulls: dict[int, Held] = {}  # pull number -> pull


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
        # pull number -> pull, insertion-ordered: a pull leaves in O(1) however many wait
        self._held: dict[tuple[str, int], dict[int, Held]] = {}
        self._peers: dict[int, _Peer] = {}  # connections with parked pulls, by number
        self._peer_numbers: dict[Responder, int] = {}
        self._next_peer = 0
        self._next_pull = 0
        self._count = 0
        # the deadline wheel: slot number -> pulls due then; every slot >= _cursor
        self._due: dict[int, dict[int, Held]] = {}
        self._cursor = 0
        self._sweep_handle: asyncio.Handle | None = None
        self._closing: deque[dict[int, Held]] = deque()  # closed connections' pulls
        self._dropping = False
        # woken or expired, waiting for their turn to run: still in the tables until then
        self._ready: deque[Held] = deque()
        self._woken: set[int] = set()
        self._small_codes: dict[frozenset[int], tuple[int, ...]] = {}
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
        number = self._peer_numbers.get(ctx.responder)
        peer = None if number is None else self._peers[number]
        if self._count >= self.max_parked or (
            peer is not None and len(peer.pulls) >= self.max_per_connection
        ):
            self.refused += 1
            log.warning("not parking a pull from %s: %d parked in all (max %d), %d on its "
                        "connection (max %d)", ctx.peer, self._count, self.max_parked,
                        len(peer.pulls) if peer else 0, self.max_per_connection)  # fmt: skip
            return False
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        if self._sweep_handle is None:
            # the wheel is empty: it starts at the current slot
            self._cursor = math.floor(loop.time() / TICK_S)
            self._sweep_handle = loop.call_later(TICK_S, self._sweep)
        tick = max(math.ceil((loop.time() + timeout_s) / TICK_S), self._cursor)
        if peer is None:
            peer = _Peer(self._next_peer, ctx)
            self._next_peer += 1
            self._peers[peer.number] = peer
            self._peer_numbers[peer.responder] = peer.number
        request = ctx.request
        seq = self._next_pull
        self._next_pull += 1
        pull: Held = (
            seq, peer.number, tick, header.queue_offset, self._shared(codes),
            request.code, request.language.value, request.version, request.opaque,
            request.flag, request.serialize_type.value, ctx.started,
            *_header_fields(header),
        )  # fmt: skip
        self._held.setdefault((header.topic, header.queue_id), {})[seq] = pull
        self._due.setdefault(tick, {})[seq] = pull
        peer.pulls[seq] = pull
        self._count += 1
        return True

    def _shared(self, codes: frozenset[int] | None) -> Codes:
        """``codes`` as kept in a parked pull: a small set as a tuple, one per distinct set.

        Shared, the tuple is referenced from outside the young generation, so a young
        collection leaves it in place and stops tracking it before the pulls that hold it.
        """
        if codes is None or len(codes) > SMALL_CODES:
            return codes
        shared = self._small_codes.get(codes)
        if shared is None:
            if len(self._small_codes) >= SHARED_CODES:
                self._small_codes.clear()
            shared = self._small_codes[codes] = tuple(codes)
        return shared

    def _forget(self, pull: Held) -> bool:
        """Take ``pull`` out of the tables; False if it was not parked any more."""
        seq, number, tick = pull[_SEQ], pull[_PEER], pull[_TICK]
        key = (pull[_TOPIC], pull[_QUEUE])
        waiting = self._held.get(key)
        if waiting is None or waiting.pop(seq, None) is None:
            return False
        if not waiting:
            del self._held[key]
        due = self._due.get(tick)
        if due is not None:
            due.pop(seq, None)
            if not due:
                del self._due[tick]
        peer = self._peers.get(number)  # None once its connection closed
        if peer is not None:
            peer.pulls.pop(seq, None)
            if not peer.pulls:
                del self._peers[number]
                del self._peer_numbers[peer.responder]
        self._count -= 1
        return True

    def connection_closed(self, conn: Responder) -> None:
        """Drop the pulls parked by a connection that closed (nobody will read them).

        Only detaches them here: the pulls leave the tables a slice per loop turn.
        """
        number = self._peer_numbers.pop(conn, None)
        if number is not None:
            self._closing.append(self._peers.pop(number).pulls)
            if not self._dropping and self._loop is not None:
                self._dropping = True
                self._loop.call_soon(self._drop_closed)

    def _drop_closed(self) -> None:
        budget = DROP_SLICE
        closing = self._closing
        while closing and budget:
            mine = closing[0]
            while mine and budget:
                _, pull = mine.popitem()
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
        woken = self._woken
        for pull in waiting.values():
            codes = pull[_CODES]
            if (
                offset >= pull[_OFFSET]
                and (codes is None or code in codes)
                and pull[_SEQ] not in woken
            ):
                self._wake(pull)

    def _check_held(self) -> None:
        max_offset = self._max_offset
        assert max_offset is not None and self._loop is not None
        for (topic, queue_id), waiting in list(self._held.items()):
            newest = max_offset(topic, queue_id)
            for pull in waiting.values():
                if newest > pull[_OFFSET]:
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
                _, pull = due.popitem()
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

    def _wake(self, pull: Held) -> None:
        if pull[_SEQ] in self._woken:
            return
        self._woken.add(pull[_SEQ])
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
                self._woken.discard(pull[_SEQ])
                peer = self._peers.get(pull[_PEER])  # before _forget, which may remove it
                # taken out here, not when woken: a storm of wakes costs a slice per turn
                if not self._forget(pull) or peer is None or peer.responder.closed:
                    continue  # dropped with its connection meanwhile
                ctx = _context(peer, pull)
                batch.hold(ctx)
                self._run(ctx, pull)

    def _run(self, ctx: RequestContext, pull: Held) -> None:
        assert self._resume is not None
        try:
            self._resume(ctx, PullMessageRequestHeader(*pull[_HEADER:]))
        except Exception:
            log.exception("re-running a parked pull from %s failed", ctx.peer)

    def close(self) -> None:
        """Answer every parked pull now and park no more (shutdown)."""
        self.closed = True
        for handle in (self._check, self._sweep_handle):
            if handle is not None:
                handle.cancel()
        self._check = self._sweep_handle = None
        held = [pull for waiting in self._held.values() for pull in waiting.values()]
        for pull in held:
            peer = self._peers.get(pull[_PEER])
            self._forget(pull)
            if peer is not None and not peer.responder.closed:
                self._run(_context(peer, pull), pull)
        self._closing.clear()
        self._run_woken(len(self._ready))


def _context(peer: _Peer, pull: Held) -> RequestContext:
    """The context of a parked pull's request, built again to re-run it."""
    code, language, version, opaque, flag, serialize_type, started = pull[_REQUEST:_HEADER]
    request = RemotingCommand(
        code,
        language=LanguageCode(language),
        version=version,
        opaque=opaque,
        flag=flag,
        serialize_type=SerializeType(serialize_type),
    )
    ctx = RequestContext(peer.responder, request, channel=peer.channel, observer=peer.observer)
    ctx.started = started  # its latency counts from when it came, not from the re-run
    return ctx
