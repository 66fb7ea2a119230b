"""One TCP connection carrying remoting frames in both directions.

Owns: the asyncio.Protocol that feeds a FrameDecoder, the pending table
opaque -> future for requests this side sent, handing requests the peer sent
to dispatch (it is their ``dispatch.Responder``), write flow control and the
idle timer.

Invariants:
* Opaques are allocated here, per connection, masked to a non-negative int32;
  responses may arrive in any order; one whose opaque is unknown (its request
  timed out) is logged and dropped.
* Request timeouts share one loop timer per connection, armed for the
  earliest deadline of the requests waiting: a request costs no timer of its
  own. When it fires, every request past its deadline fails with
  RemotingTimeoutError and the timer is armed for the next deadline. A
  deadline fires no earlier than a per-request timer would (the loop's timers
  may run up to ``TIMER_SLACK_S`` early) and, like one, as late as the loop
  gets to it; with thousands of requests waiting, sweeps are spaced by
  ``SWEEP_GAP_PER_REQUEST_S`` per request (10,000 waiting: 10 ms at most late),
  so that their cost stays a small share of the loop.
* When the connection closes, every pending request fails with
  RemotingClosedError and close listeners run once.
* At most ``COMMANDS_PER_TURN`` commands of one read are handled in one loop
  callback; the rest wait, reading paused, for the next turns, so a peer that
  pipelines thousands of requests shares the loop with the others. They wait
  as frames in the decoder, undecoded: no object each for the cycle
  collector to walk; each is decoded at its turn. With a
  ``TurnShare`` (a server's connections) those later turns are taken
  round-robin across the connections, at most ``COMMANDS_PER_ITERATION``
  commands per loop iteration in all: hundreds of pipelining peers would
  otherwise make every iteration handle 32 commands of each of them. First
  turns, handled as their read arrives, count against an iteration's share
  too: past it, a read of several frames waits for a later turn, while a read
  of one request is still answered at once.
* A malformed frame or one over the size limit closes this connection only.
  A length word is checked when it is read, a header at its frame's turn;
  either way the frames before it are handled and the answers written for
  them leave (for ``CLOSE_FLUSH_S`` at most), nothing after it is handled.
* Writes go out through ``transport.writelines`` so body buffers (memoryviews
  of mapped files) are gathered, not joined. Answers written while the
  requests of one read are dispatched go out together at the end of it, and
  so do writes between ``hold_writes`` and ``release_writes`` (see
  ``dispatch.ResponseBatch``).
  When the transport's buffer is over its high-water mark, requesters wait
  in ``invoke`` and a server-side connection stops reading until the peer
  drains its answers; past ``max_write_buffer_bytes`` it is cut off.
* With a ``FrameBudget`` the bytes of this connection's partial frame count
  against the server's total (see ``apogee.remoting.limits``), and
  ``partial_since`` tells since when a frame has been incomplete.
* ``sign``, when given, completes every request this side sends (the ACL
  signature) just before it is written; answers are never signed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import struct
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, cast

from apogee.codes import ResponseCode
from apogee.errors import ProtocolError, RemotingClosedError, RemotingTimeoutError
from apogee.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, Buffer, RemotingCommand
from apogee.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode
from apogee.protocol.header_json import decode as json_decode
from apogee.protocol.header_scan import PullAnswer, SendAnswer
from apogee.remoting.dispatch import HandlerTable, RequestContext
from apogee.remoting.limits import FrameBudget

log = logging.getLogger(__name__)

#: Commands of one read handled in one loop callback; the rest wait for a later turn.
COMMANDS_PER_TURN = 32
#: Commands of later turns handled per loop iteration across the connections of a TurnShare.
COMMANDS_PER_ITERATION = 64
#: After a malformed frame, how long the answers already written get to leave.
CLOSE_FLUSH_S = 2.0

#: A deadline this close is taken as reached: the loop's timers may fire this early
#: (uvloop counts in whole milliseconds), and re-arming for the rest would spin.
TIMER_SLACK_S = 0.001
#: Sweeps come at most every (requests waiting x this) seconds: a sweep reads every
#: waiting request, and thousands with deadlines spread out (a broker gone silent
#: under a pipelining producer) would otherwise be read again at each of them.
SWEEP_GAP_PER_REQUEST_S = 1e-6

CloseListener = Callable[["Connection"], None]
Signer = Callable[[RemotingCommand], None]
#: What may resolve a request's future besides a command (see ``request_encoded``).
COMMAND_ONLY = 0
SEND_ANSWER = 1  # a header_scan.SendAnswer
PULL_ANSWER = 2  # a header_scan.PullAnswer
#: a request waiting for its answer: (future, deadline in loop time, request code, timeout,
#: what may resolve it besides a command: COMMAND_ONLY, SEND_ANSWER or PULL_ANSWER)
_Waiting = tuple["asyncio.Future[Any]", float, int, float, int]
_INF = math.inf
_T = TypeVar("_T")
_pack_prefix = struct.Struct(">ii").pack


class Connection(asyncio.Protocol):
    """A remoting connection; the same class serves clients and servers."""

    def __init__(
        self,
        handlers: HandlerTable | None,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_timeout_s: float | None = None,
        write_high_water_bytes: int | None = None,
        server_side: bool = False,
        on_close: CloseListener | None = None,
        budget: FrameBudget | None = None,
        max_write_buffer_bytes: int | None = None,
        refuse: str | None = None,
        sign: Signer | None = None,
        share: TurnShare | None = None,
    ) -> None:
        # With no table every request is answered REQUEST_CODE_NOT_SUPPORTED, by dispatch.
        self._handlers = handlers if handlers is not None else HandlerTable()
        self._decoder = FrameDecoder(max_frame_bytes)
        self._idle_timeout_s = idle_timeout_s
        self._high_water = write_high_water_bytes
        self._server_side = server_side
        self._on_close = on_close
        self._sign = sign
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, _Waiting] = {}
        self._timer: asyncio.TimerHandle | None = None  # fires at _timer_at
        self._timer_at = _INF
        self._ids = itertools.count()
        self._write_paused = False
        self._batch: list[Buffer] | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._idle_handle: asyncio.TimerHandle | None = None
        self._last_activity = self._loop.time()
        self._closed = self._loop.create_future()
        self.accepting_requests = True
        self.peer = "?"  # "host:port", for logs
        self.peer_address: tuple[str, int] = ("", 0)
        self._budget = budget
        self._held = 0  # bytes of a partial frame counted in the budget
        #: loop time when the current partial frame began (0.0: none)
        self.partial_since = 0.0
        self._max_write = max_write_buffer_bytes
        self._refuse = refuse  # why to close at once (too many connections)
        self._turn_waiting = False  # frames wait in the decoder for a later turn
        self._abort_handle: asyncio.TimerHandle | None = None  # after a malformed frame
        self._share = share

    # -- asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer_address = (str(peer[0]), int(peer[1]))
            self.peer = f"{peer[0]}:{peer[1]}"
        if self._refuse is not None:
            log.warning("refusing connection from %s: %s", self.peer, self._refuse)
            transport.abort()
            return
        if self._high_water is not None:
            transport.set_write_buffer_limits(high=self._high_water)
        if self._idle_timeout_s is not None:
            self._idle_handle = self._loop.call_later(self._idle_timeout_s, self._check_idle)

    def data_received(self, data: bytes) -> None:
        self._last_activity = self._loop.time()
        decoder = self._decoder
        waiting = self._turn_waiting  # bytes read before the pause: after the frames waiting
        share = self._share
        # Past this iteration's share, a read of many frames waits its turn like a later one.
        held_back = not waiting and share is not None and share.spent >= share.per_iteration
        completed = False
        try:
            if waiting or held_back:
                completed = decoder.push(data) > 0
                commands: list[RemotingCommand] = []
            else:
                commands = decoder.read(data, COMMANDS_PER_TURN)
        except Exception as exc:
            self._broken(exc)
            return
        budget = self._budget
        if budget is not None:
            held = decoder.buffered
            if held or self._held:
                # frames completed by these bytes: those pushed, or those read (taken or left)
                if not waiting and not held_back:
                    completed = bool(commands) or decoder.pending
                if not self._account(held, budget, completed):
                    return
        if waiting:
            return
        if held_back:
            if decoder.waiting > 1 or decoder.failed:
                self._wait_turn()
                return
            # one request (or none): answered now, so a client that sends one at a
            # time is never queued behind the pipelining ones
            try:
                commands = decoder.take(1)
            except Exception as exc:
                self._broken(exc)
                return
        if len(commands) == 1 and not decoder.pending:
            cmd = commands[0]  # _on_command inlined: one read, one request is the usual
            if cmd.flag & FLAG_RESPONSE:
                self._on_response(cmd)
            else:
                self._on_request(cmd)
        else:
            if share is not None:
                share.charge(len(commands))
            self._handle(commands)

    def _handle(self, commands: list[RemotingCommand]) -> int:
        """Handle a turn's commands, and have a later turn take the frames left."""
        if self._decoder.pending:
            self._wait_turn()
        elif not commands:  # a partial frame only
            return 0
        if len(commands) == 1:
            self._on_command(commands[0])
            return 1
        # Answers written while these requests are handled leave in one writev,
        # not one send() each: on loopback a send costs as much as a request.
        outermost = self.hold_writes()
        try:
            for cmd in commands:
                self._on_command(cmd)
        finally:
            if outermost:
                self.release_writes()
        return len(commands)

    def _wait_turn(self) -> None:
        """Have a later turn take the frames waiting, reading paused meanwhile.

        A peer that pipelines thousands of requests gets them handled a turn at
        a time, so that the requests of other connections are not queued behind
        all of them. The frames wait undecoded (a malformed one ends the
        connection at its turn).
        """
        self._turn_waiting = True
        if self._transport is not None:
            self._transport.pause_reading()
        if self._share is not None:
            self._share.enqueue(self)
        else:
            self._loop.call_soon(self._next_turn)

    def _next_turn(self, limit: int = COMMANDS_PER_TURN) -> int:
        """Handle the next turn of waiting frames, at most ``limit``; how many were handled."""
        self._turn_waiting = False
        transport = self._transport
        if transport is None or transport.is_closing():
            return 0
        try:
            commands = self._decoder.take(limit)
        except Exception as exc:
            self._broken(exc)
            return 0
        handled = self._handle(commands)
        if not self._turn_waiting and not (self._write_paused and self._server_side):
            transport.resume_reading()
        return handled

    def _broken(self, exc: Exception) -> None:
        """A malformed frame (or a fault of the decoder on one): close with one log line."""
        if isinstance(exc, ProtocolError):
            log.warning("closing connection with %s: %.300s", self.peer, exc)
        else:  # a decoder fault must not reach the transport
            log.error("closing connection with %s: its bytes broke the decoder: %.300r",
                      self.peer, exc)  # fmt: skip
        self._close_broken()

    def _close_broken(self) -> None:
        """Close after a malformed frame: the answers written before it still leave."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.close()
        # A peer that does not read them must not keep the connection open.
        self._abort_handle = self._loop.call_later(CLOSE_FLUSH_S, transport.abort)

    def _account(self, held: int, budget: FrameBudget, completed: bool) -> bool:
        """Count this connection's partial frame in the budget; False if it was cut off.

        ``completed``: frames were completed by these bytes, so the partial frame
        held now began in them (a peer streaming frames may never be between two).
        """
        budget.held += held - self._held
        self._held = held
        if not held:
            self.partial_since = 0.0
            return True
        if completed or not self.partial_since:
            self.partial_since = self._loop.time()
        if budget.over():
            log.warning("closing connection with %s: partial frames of all connections hold "
                        "%d bytes, over the limit of %s", self.peer, budget.held,
                        budget.limit)  # fmt: skip
            self.abort()
            return False
        return True

    def _on_command(self, cmd: RemotingCommand) -> None:
        if cmd.flag & FLAG_RESPONSE:
            self._on_response(cmd)
        else:
            self._on_request(cmd)

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._server_side and self._transport is not None:
            # Stop taking requests from a peer that does not read its answers.
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        transport = self._transport
        # While commands wait for a turn, the last of those turns resumes reading.
        if (
            self._server_side
            and not self._turn_waiting
            and transport is not None
            and not transport.is_closing()
        ):
            transport.resume_reading()
        self._wake_drain_waiters()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        if self._abort_handle is not None:
            self._abort_handle.cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = _INF
        if self._budget is not None and self._held:
            self._budget.held -= self._held
            self._held = 0
        pending, self._pending = self._pending, {}
        error = RemotingClosedError(f"connection with {self.peer} closed")
        for fut, *_ in pending.values():
            if not fut.done():
                fut.set_exception(error)
        self._wake_drain_waiters()
        if not self._closed.done():
            self._closed.set_result(None)
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                log.exception("close listener of %s failed", self.peer)

    # -- incoming ---------------------------------------------------------------

    def _on_response(self, cmd: RemotingCommand) -> None:
        waiting = self._pending.pop(cmd.opaque, None)
        if waiting is None:
            log.warning(
                "dropping response code %d opaque %d from %s: no request waits for it",
                cmd.code,
                cmd.opaque,
                self.peer,
            )
            return
        fut = waiting[0]
        if not fut.done():  # its caller may have been cancelled
            fut.set_result(cmd)

    def _on_request(self, cmd: RemotingCommand) -> None:
        handlers = self._handlers
        # HandlerTable.context inlined: this runs for every request
        ctx = RequestContext(self, cmd, channel=self, observer=handlers.observer)
        if not self.accepting_requests:
            remark = "[REJECTREQUEST] the server is shutting down"
            ctx.respond(cmd.make_response(ResponseCode.SYSTEM_BUSY, remark))
        else:
            handlers.dispatch(ctx)

    # -- outgoing ---------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed.done() or self._transport is None or self._transport.is_closing()

    def _write(self, cmd: RemotingCommand) -> None:
        self._write_frame(encode(cmd))

    def _write_frame(self, buffers: list[Buffer]) -> None:
        """Write one encoded frame, or gather it while writes are held."""
        transport = self._transport
        if transport is None or transport.is_closing():
            raise RemotingClosedError(f"connection with {self.peer} is closed")
        if self._batch is not None:
            self._batch += buffers
        else:
            transport.writelines(buffers)
            if self._write_paused and self._max_write is not None:
                self._check_write_buffer(transport)
        self._last_activity = self._loop.time()

    def _check_write_buffer(self, transport: asyncio.Transport) -> None:
        size = transport.get_write_buffer_size()
        assert self._max_write is not None
        if size > self._max_write:
            log.warning("closing connection with %s: it does not read its answers "
                        "(%d bytes waiting, the limit is %d)", self.peer, size,
                        self._max_write)  # fmt: skip
            transport.abort()

    def hold_writes(self) -> bool:
        """Gather what is written from now on until ``release_writes``.

        False when writes are already held: the caller that held them first
        releases them.
        """
        if self._batch is not None:
            return False
        self._batch = []
        return True

    def release_writes(self) -> None:
        """Write everything gathered since ``hold_writes``, in one writelines."""
        batch, self._batch = self._batch, None
        transport = self._transport
        if batch and transport is not None and not transport.is_closing():
            transport.writelines(batch)
            if self._write_paused and self._max_write is not None:
                self._check_write_buffer(transport)

    def send_response(self, response: RemotingCommand) -> bool:
        """Write an answer; False (and logged) if the connection already closed."""
        try:
            self._write_frame(encode(response))  # _write inlined: every answer comes here
        except RemotingClosedError:
            log.debug("dropping response opaque %d: %s closed", response.opaque, self.peer)
            return False
        return True

    def request(
        self, request: RemotingCommand, timeout_s: float
    ) -> asyncio.Future[RemotingCommand]:
        """Send ``request``; the future of its answer (any order on the connection).

        A plain function, so the send paths await one future and no coroutine
        of this layer. The future fails with RemotingTimeoutError after
        ``timeout_s`` and with RemotingClosedError when the connection closes;
        a caller that stops waiting (cancels it) leaves the entry for the
        answer or the deadline to remove. While the transport's buffer is over
        its high-water mark, what is returned first waits for room in it.
        """
        opaque = next(self._ids) & 0x7FFFFFFF
        request.opaque = opaque
        request.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        if self._sign is not None:
            self._sign(request)
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        frame = encode(request)
        return self._expect(fut, opaque, request.code, timeout_s, frame, answer=COMMAND_ONLY)

    def _expect(
        self,
        fut: asyncio.Future[_T],
        opaque: int,
        code: int,
        timeout_s: float,
        frame: list[Buffer],
        *,
        answer: int,
    ) -> asyncio.Future[_T]:
        """Enter ``fut`` as the answer to ``opaque``, write the request's ``frame``;
        what ``request`` returns (see there). ``answer``: what else than a command may
        resolve it (COMMAND_ONLY, SEND_ANSWER, PULL_ANSWER)."""
        loop = self._loop
        deadline = loop.time() + timeout_s
        pending = self._pending
        pending[opaque] = (fut, deadline, code, timeout_s, answer)
        try:
            self._write_frame(frame)
        except BaseException:
            del pending[opaque]
            raise
        if deadline < self._timer_at:
            self._arm(deadline)
        if self._write_paused:
            return loop.create_task(self._after_drain(fut))
        return fut

    def request_encoded(  # noqa: PLR0917
        self,
        code: int,
        head: bytes,
        end: bytes,
        body: bytes | bytearray,
        timeout_s: float,
        answer: int = SEND_ANSWER,
    ) -> asyncio.Future[RemotingCommand | SendAnswer | PullAnswer]:
        """``request`` of a request whose JSON header the caller encoded, but for its opaque.

        The header is ``head``, the opaque's digits and ``end``; ``head`` must
        carry flag 0 (a request expecting an answer) and request ``code``. No
        command is built: a producer's one-by-one sends and a consumer's pulls
        encode their header from pieces. A connection that signs its requests
        decodes the header into a command and takes ``request``'s path (the
        signature covers the ext fields), so what leaves is signed all the same.

        For a send's request (``answer`` SEND_ANSWER), the answer may come as
        the ``SendAnswer`` of ``header_scan.send_answer`` instead of a command,
        for a pull's (PULL_ANSWER) as the ``PullAnswer`` of
        ``header_scan.pull_answer`` (a client connection reads an answer that
        arrives whole so, see ``client.ClientConnection``); for COMMAND_ONLY it
        is a command.
        """
        if self._sign is not None:
            signed: asyncio.Future[Any] = self.request(
                json_decode(head + b"0" + end, body), timeout_s
            )
            return signed
        opaque = next(self._ids) & 0x7FFFFFFF
        header = head + str(opaque).encode() + end
        h = len(header)
        b = len(body)
        # serialize type JSON (0) in the top byte of the second word
        prefix = _pack_prefix(4 + h + b, h) + header
        fut: asyncio.Future[RemotingCommand | SendAnswer | PullAnswer] = self._loop.create_future()
        frame: list[Buffer] = [prefix, body] if b else [prefix]
        return self._expect(fut, opaque, code, timeout_s, frame, answer=answer)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send ``request`` and wait for its answer (``request`` as a coroutine)."""
        return await self.request(request, timeout_s)

    async def _after_drain(self, fut: asyncio.Future[_T]) -> _T:
        # Wait for room in the buffer, but let the answer, the timeout or a
        # close end the wait too.
        waiter = self._drain_waiter()
        fut.add_done_callback(lambda _: _resolve(waiter))
        await waiter
        return await fut

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag; the peer never answers it."""
        request.opaque = next(self._ids) & 0x7FFFFFFF
        request.flag = (request.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        if self._sign is not None:
            self._sign(request)
        self._write(request)
        if self._write_paused:
            await self._drain_waiter()
            if self._closed.done():
                raise RemotingClosedError(f"connection with {self.peer} closed while sending")

    def _arm(self, deadline: float) -> None:
        """Have the connection's one timer fire at ``deadline`` (earlier than it was)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Fail the requests past their deadline; arm the timer for the next one."""
        self._timer = None
        self._timer_at = _INF
        pending = self._pending
        now = self._loop.time() + TIMER_SLACK_S
        late: list[int] = []
        following = _INF
        for opaque, waiting in pending.items():
            deadline = waiting[1]
            if deadline <= now:
                late.append(opaque)
            elif deadline < following:
                following = deadline
        for opaque in late:
            fut, _, code, timeout_s, _ = pending.pop(opaque)
            if not fut.done():
                fut.set_exception(
                    RemotingTimeoutError(
                        f"no answer to request code {code} from {self.peer} within {timeout_s}s"
                    )
                )
        if following < _INF:
            self._arm(max(following, now + len(pending) * SWEEP_GAP_PER_REQUEST_S))

    def _drain_waiter(self) -> asyncio.Future[None]:
        """A future resolved when the transport buffer drains or the connection closes."""
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        return waiter

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            _resolve(waiter)

    # -- lifetime ---------------------------------------------------------------

    def _check_idle(self) -> None:
        assert self._idle_timeout_s is not None
        idle_for = self._loop.time() - self._last_activity
        if idle_for >= self._idle_timeout_s:
            log.info("closing connection with %s: idle for %.1fs", self.peer, idle_for)
            self.close()
        else:
            self._idle_handle = self._loop.call_later(
                self._idle_timeout_s - idle_for, self._check_idle
            )

    def close(self) -> None:
        """Close after the buffered writes are flushed."""
        if self._transport is not None:
            self._transport.close()
        elif not self._closed.done():
            self._closed.set_result(None)  # never connected: nothing will call connection_lost

    def abort(self) -> None:
        """Close at once, dropping buffered writes."""
        if self._transport is not None:
            self._transport.abort()
        elif not self._closed.done():
            self._closed.set_result(None)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    async def close_and_wait(self, flush_timeout_s: float) -> None:
        """Close, give buffered writes ``flush_timeout_s`` to leave, then abort."""
        self.close()
        try:
            await asyncio.wait_for(self.wait_closed(), flush_timeout_s)
        except TimeoutError:
            # A peer that never reads would keep close() flushing forever.
            self.abort()
            await self.wait_closed()

    def __repr__(self) -> str:
        side = "server" if self._server_side else "client"
        return f"<Connection {side} peer={self.peer} pending={len(self._pending)}>"


class TurnShare:
    """The later turns of a server's connections: round-robin, a bounded number per iteration.

    A connection whose read held more than ``COMMANDS_PER_TURN`` commands waits
    here for each further turn. One loop callback serves the waiting
    connections in order until ``per_iteration`` commands were handled; a
    connection with more left goes to the back, and those not reached stay in
    front for the next iteration.
    """

    def __init__(self, per_iteration: int = COMMANDS_PER_ITERATION) -> None:
        self.per_iteration = per_iteration
        #: commands of first turns (handled as their read arrived) in this iteration
        self.spent = 0
        self._waiting: deque[Connection] = deque()
        self._scheduled = False

    def charge(self, commands: int) -> None:
        """Count ``commands`` handled as their read arrived against this iteration's share.

        Two hundred pipelining peers whose reads arrive in one iteration would
        otherwise each have a first turn of 32 handled in it, 6,400 commands
        before the loop looks at anything else.
        """
        if not self.spent:
            # runs at the next iteration, before its reads (asyncio: after the
            # select; uvloop: in the idle phase before the poll)
            asyncio.get_running_loop().call_soon(self._new_iteration)
        self.spent += commands

    def _new_iteration(self) -> None:
        self.spent = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def enqueue(self, conn: Connection) -> None:
        self._waiting.append(conn)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        self._scheduled = False
        budget = self.per_iteration
        waiting = self._waiting
        for _ in range(len(waiting)):  # each waiting connection at most once per iteration
            if budget <= 0:
                break
            conn = waiting.popleft()
            try:
                # the share drives its turns; the last one of an iteration may be short
                budget -= conn._next_turn(min(budget, COMMANDS_PER_TURN))
            except Exception:  # one connection's fault must not stall the others
                log.exception("a deferred turn of %s failed", conn.peer)
        if waiting:
            self._schedule()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
