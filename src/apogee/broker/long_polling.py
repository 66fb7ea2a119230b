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

The store hears of arrivals only while a pull is parked: ``bind_arrivals``
names the store's switch, which gets ``on_arrival`` when the first pull
parks and None when the last one leaves. Without a listener, dispatching a
message costs no call per message (a put-heavy broker with no consumer
waiting makes no such call at all). Dispatch and parking both run on the
loop, so no message is dispatched between a pull finding nothing and its
parking.

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

Cheap for the cycle collector, however many pulls are parked: nothing kept
for a parked pull is an object the collector tracks. A pull is a number;
its request and header are one ``bytes`` (``marshal`` of numbers and
strings, built again into a context and header when it is re-run); the
tables map numbers to numbers, ``bytes`` or None, and a dict holding only
such values is never tracked. Its tag codes are a tuple shared by every
pull with the same codes. Kept as objects (context, request, header, a
record: four per pull), 200,000 parked pulls were 800,000 objects that
each young collection moved on and each older one walked again:
collections of 30-130 ms while they were parked (a full one would take
~430 ms). A tuple per pull is tracked until a collection looks at it, and
so still made a young collection every ~7,000 pulls parked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import marshal
import math
import operator
from collections import deque
from collections.abc import Callable
from typing import Final

from apogee.codes import LanguageCode, SerializeType
from apogee.protocol.command import new_command
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.dispatch import Observer, RequestContext, Responder, ResponseBatch
from apogee.store.interface import ArrivalListener

log = logging.getLogger(__name__)

Resume = Callable[[RequestContext, PullMessageRequestHeader], None]
MaxOffset = Callable[[str, int], int]

#: Width of one deadline slot: a pull is answered at most this late after its hold time.
TICK_S = 0.05
#: Pulls of closed connections taken out of the tables in one loop turn.
DROP_SLICE = 1000
#: Woken or expired pulls re-run (each a read of the store and an answer) in one loop turn.
RUN_SLICE = 256
#: Tag-code sets up to this size are kept as one tuple shared by every pull with the same
#: codes (a subscription sent with each pull is a new frozenset each time; a tuple of ints
#: is untracked by the collector, a frozenset never is). Scanning a few ints costs what
#: hashing one does.
SMALL_CODES = 8
#: Distinct small tag-code sets remembered for sharing (the memory is cleared when full).
SHARED_CODES = 4096

Codes = tuple[int, ...] | frozenset[int]
#: PullMessageRequestHeader's fields, in its order.
HeaderFields = tuple[
    str, str, int, int, int, int, int, int, int, str | None, str | None, int | None
]
#: A parked pull as kept (marshalled): its connection's number, its deadline's slot in
#: the wheel; its request's code, language, version, opaque, flag, serialize type and
#: arrival (perf_counter); then HeaderFields.
Record = tuple[
    int, int, int, int, int, int, int, int, float,
    str, str, int, int, int, int, int, int, int, str | None, str | None, int | None,
]  # fmt: skip
_PEER: Final = 0
_TICK: Final = 1
_REQUEST: Final = 2
_HEADER: Final = 9
_TOPIC: Final = 10  # the header's topic and queue id (checked below)
_QUEUE: Final = 11
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(PullMessageRequestHeader))
if _FIELD_NAMES[_TOPIC - _HEADER : _QUEUE - _HEADER + 1] != ("topic", "queue_id"):
    raise ImportError("PullMessageRequestHeader's fields moved: update _TOPIC and _QUEUE")

_header_fields: Callable[[PullMessageRequestHeader], HeaderFields] = operator.attrgetter(
    *_FIELD_NAMES
)


class _Peer:
    """A connection with parked pulls: what a re-run's context needs, and its pulls."""

    __slots__ = ("channel", "number", "observer", "pulls", "responder")

    def __init__(self, number: int, ctx: RequestContext) -> None:
        self.number = number
        self.responder = ctx.responder
        self.channel = ctx.channel
        self.observer: Observer | None = ctx.observer
        self.pulls: dict[int, None] = {}  # its pulls' numbers


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
        # Pulls are numbers. Insertion-ordered dicts: a pull leaves in O(1) however many
        # wait. queue -> pull -> the offset it waits beyond:
        self._held: dict[tuple[str, int], dict[int, int]] = {}
        self._records: dict[int, bytes] = {}  # pull -> its Record, marshalled
        self._codes: dict[int, Codes] = {}  # pull -> its tag codes, if it filters by tag
        self._peers: dict[int, _Peer] = {}  # connections with parked pulls, by number
        self._peer_numbers: dict[Responder, int] = {}
        self._next_peer = 0
        self._next_pull = 0
        self._count = 0
        # the deadline wheel: slot number -> pulls due then; every slot >= _cursor
        self._due: dict[int, dict[int, None]] = {}
        self._cursor = 0
        self._sweep_handle: asyncio.Handle | None = None
        self._closing: deque[dict[int, None]] = deque()  # closed connections' pulls
        self._dropping = False
        # woken or expired, waiting for their turn to run: still in the tables until then
        self._ready: deque[int] = deque()
        self._woken: set[int] = set()
        self._small_codes: dict[frozenset[int], tuple[int, ...]] = {}
        self._scheduled: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._max_offset: MaxOffset | None = None
        self._check: asyncio.TimerHandle | None = None
        self._switch: Callable[[ArrivalListener | None], None] | None = None
        self.max_parked = max_parked
        self.max_per_connection = max_per_connection
        self.check_interval_s = check_interval_s
        self.refused = 0
        self.closed = False

    def bind(self, resume: Resume) -> None:
        """Name the function that runs a woken pull again (the pull handler)."""
        self._resume = resume

    def bind_arrivals(self, switch: Callable[[ArrivalListener | None], None]) -> None:
        """Have ``switch`` (the store's ``set_arrival_listener``) given ``on_arrival``
        while any pull is parked, and None while none is."""
        self._switch = switch
        switch(self.on_arrival if self._count else None)

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
        record: Record = (
            peer.number, tick, int(request.code), int(request.language), int(request.version),
            int(request.opaque), int(request.flag), int(request.serialize_type), ctx.started,
            *_header_fields(header),
        )  # fmt: skip
        self._records[seq] = marshal.dumps(record)
        self._held.setdefault((header.topic, header.queue_id), {})[seq] = header.queue_offset
        if codes is not None:
            self._codes[seq] = self._shared(codes)
        self._due.setdefault(tick, {})[seq] = None
        peer.pulls[seq] = None
        self._count += 1
        if self._count == 1 and self._switch is not None:
            self._switch(self.on_arrival)  # the first parked pull: arrivals are wanted
        return True

    def _shared(self, codes: frozenset[int]) -> Codes:
        """``codes`` as kept for a parked pull: a small set as a tuple, one per distinct set."""
        if len(codes) > SMALL_CODES:
            return codes  # the subscription's own, when it is a registered one
        shared = self._small_codes.get(codes)
        if shared is None:
            if len(self._small_codes) >= SHARED_CODES:
                self._small_codes.clear()
            shared = self._small_codes[codes] = tuple(codes)
        return shared

    def _forget(self, seq: int) -> tuple[Record, _Peer | None] | None:
        """Take pull ``seq`` out of the tables: its record and its connection if still open.

        None if it was not parked any more.
        """
        raw = self._records.pop(seq, None)
        if raw is None:
            return None
        record: Record = marshal.loads(raw)  # annotated, not cast: a call fewer per pull
        key = (record[_TOPIC], record[_QUEUE])
        waiting = self._held[key]
        del waiting[seq]
        if not waiting:
            del self._held[key]
        self._codes.pop(seq, None)
        tick = record[_TICK]
        due = self._due.get(tick)
        if due is not None:
            due.pop(seq, None)
            if not due:
                del self._due[tick]
        number = record[_PEER]
        peer = self._peers.get(number)  # None once its connection closed
        if peer is not None:
            del peer.pulls[seq]
            if not peer.pulls:
                del self._peers[number]
                del self._peer_numbers[peer.responder]
        self._count -= 1
        if not self._count and self._switch is not None:
            self._switch(None)  # nothing parked: nobody to tell of arrivals
        return record, peer

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
                seq, _ = mine.popitem()
                self._forget(seq)
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
        woken, codes_of = self._woken, self._codes
        for seq, wants in waiting.items():
            if offset >= wants and seq not in woken:
                codes = codes_of.get(seq)
                if codes is None or code in codes:
                    self._wake(seq)

    def _check_held(self) -> None:
        max_offset = self._max_offset
        assert max_offset is not None and self._loop is not None
        for (topic, queue_id), waiting in list(self._held.items()):
            newest = max_offset(topic, queue_id)
            for seq, wants in waiting.items():
                if newest > wants:
                    self._wake(seq)
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
                seq, _ = due.popitem()
                if not due:
                    del self._due[tick]
                self._wake(seq)
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

    def _wake(self, seq: int) -> None:
        if seq in self._woken:
            return
        self._woken.add(seq)
        self._ready.append(seq)
        if self._scheduled is None and self._loop is not None:
            self._scheduled = self._loop.call_soon(self._run_ready)

    def run_ready(self) -> None:
        """Answer the pulls woken so far now, instead of in the next loop turn.

        The store's dispatch step calls it once the records it dispatched
        woke their pulls: the answers then leave in the same turn, not one
        turn (a poll of the sockets) later. The same slice as a scheduled run.
        """
        if self._ready:
            if self._scheduled is not None:
                self._scheduled.cancel()
            self._run_ready()

    def _run_ready(self) -> None:
        self._scheduled = None
        self._run_woken(RUN_SLICE)
        if self._ready and self._loop is not None:
            self._scheduled = self._loop.call_soon(self._run_ready)

    def _run_woken(self, limit: int) -> None:
        ready = self._ready
        with ResponseBatch() as batch:  # a consumer's woken queues answered in one send
            for _ in range(min(len(ready), limit)):
                seq = ready.popleft()
                self._woken.discard(seq)
                # taken out here, not when woken: a storm of wakes costs a slice per turn
                forgotten = self._forget(seq)
                if forgotten is None:
                    continue  # dropped with its connection meanwhile
                record, peer = forgotten
                if peer is None or peer.responder.closed:
                    continue
                ctx = _context(peer, record)
                batch.hold(ctx)
                self._run(ctx, record)

    def _run(self, ctx: RequestContext, record: Record) -> None:
        assert self._resume is not None
        try:
            self._resume(ctx, PullMessageRequestHeader(*record[_HEADER:]))
        except Exception:
            log.exception("re-running a parked pull from %s failed", ctx.peer)

    def close(self) -> None:
        """Answer every parked pull now and park no more (shutdown)."""
        self.closed = True
        for handle in (self._check, self._sweep_handle):
            if handle is not None:
                handle.cancel()
        self._check = self._sweep_handle = None
        held = [seq for waiting in self._held.values() for seq in waiting]
        for seq in held:
            forgotten = self._forget(seq)
            if forgotten is not None:
                record, peer = forgotten
                if peer is not None and not peer.responder.closed:
                    self._run(_context(peer, record), record)
        self._closing.clear()
        self._run_woken(len(self._ready))


_LANGUAGES = {int(member): member for member in LanguageCode}
_SERIALIZE_TYPES = {int(member): member for member in SerializeType}


def _context(peer: _Peer, record: Record) -> RequestContext:
    """The context of a parked pull's request, built again to re-run it."""
    code, language, version, opaque, flag, serialize_type, started = record[_REQUEST:_HEADER]
    # the enum members by a dict look-up: calling an IntEnum costs more than the rest
    lang = _LANGUAGES.get(language)
    form = _SERIALIZE_TYPES.get(serialize_type)
    request = new_command(
        code,
        LanguageCode(language) if lang is None else lang,
        version,
        opaque,
        flag,
        None,
        {},
        b"",
        SerializeType(serialize_type) if form is None else form,
    )
    ctx = RequestContext(peer.responder, request, channel=peer.channel, observer=peer.observer)
    ctx.started = started  # its latency counts from when it came, not from the re-run
    return ctx
