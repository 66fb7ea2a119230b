"""Incoming-request dispatch: request code -> handler, with per-group limits.

Owns: Responder (the little a request needs of the transport to be
answered), RequestContext (what a handler gets besides the request),
HandlerTable and its named groups. Used on both sides: a server dispatches
client requests, a client dispatches the requests a broker sends it.
Dispatch knows the transport only as a Responder, so a handler that only
answers runs as well on a fake one.

Rules (NettyRemotingAbstract.processRequestCommand):
* No handler for the code: REQUEST_CODE_NOT_SUPPORTED (3), remark
  ``" request type <code> not supported"``; answered here only, also for a
  connection that serves no handlers at all.
* A group already running ``concurrency`` handlers with ``queue_capacity``
  more waiting: SYSTEM_BUSY (2), remark starting ``[OVERLOAD]``.
* A handler that raises: the exception's ``code`` if it is an ApogeeError,
  else SYSTEM_ERROR (1); the remark is the exception text.
* Oneway requests are processed like the others but never answered.
* A handler returning None answers nothing now; it may keep the context and
  call ``ctx.respond`` later (long polling parks pull requests this way).
* Synchronous handlers run inline in the read callback, without a task and
  outside any group: only for cheap requests that never wait.
* A ``guard`` (access control), when set, sees every request first with the
  peer's "host:port"; a command it returns is the answer, and the request
  goes no further. A guard that raises refuses with SYSTEM_ERROR.
* ``HandlerTable.observer``, when set, is told of every answer written, with
  the request's context (its ``started`` time): a server's refusal log and
  latency figures (``apogee.remoting.observe``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

from apogee.codes import LanguageCode, ResponseCode, SerializeType
from apogee.errors import ApogeeError, ConfigError
from apogee.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand

if TYPE_CHECKING:
    from apogee.remoting.connection import Connection

log = logging.getLogger(__name__)

SyncHandler: TypeAlias = Callable[["RequestContext", RemotingCommand], RemotingCommand | None]
AsyncHandler: TypeAlias = Callable[
    ["RequestContext", RemotingCommand], Awaitable[RemotingCommand | None]
]
Handler: TypeAlias = SyncHandler | AsyncHandler
#: request, peer "host:port" -> None to go on, or the answer that refuses it
Guard: TypeAlias = Callable[[RemotingCommand, str], RemotingCommand | None]
#: told of every answer written, with the request's context
Observer: TypeAlias = Callable[["RequestContext", RemotingCommand], None]

DEFAULT_GROUP = "default"

# looked up once: an enum member is a class attribute lookup each time
_CPP = LanguageCode.CPP
_JSON = SerializeType.JSON
_perf_counter = time.perf_counter


class Responder(Protocol):
    """What answering a request needs of the transport it came on."""

    @property
    def peer_address(self) -> tuple[str, int]:
        """The peer's (host, port)."""
        ...

    @property
    def closed(self) -> bool:
        """True once nothing more can be written (parked requests check it)."""
        ...

    def send_response(self, response: RemotingCommand) -> bool:
        """Write a finished answer; False if the transport was closed."""
        ...

    def hold_writes(self) -> bool:
        """Gather writes until ``release_writes``; False if already held."""
        ...

    def release_writes(self) -> None:
        """Write everything gathered since ``hold_writes`` at once."""
        ...


class RequestContext:
    """One request in flight: where it came from and how to answer it.

    ``responder`` is all dispatch and answering use. ``channel`` is the
    full connection, None when the request came another way (tests): for
    the handlers that keep it as a client's channel or send requests on it.
    """

    __slots__ = ("channel", "observer", "request", "responder", "started")

    def __init__(
        self,
        responder: Responder,
        request: RemotingCommand,
        *,
        channel: Connection | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.responder = responder
        self.request = request
        self.channel = channel
        self.observer = observer
        self.started = _perf_counter()  # for the latency of the answer

    @property
    def peer(self) -> str:
        """The peer as "host:port", for logs and the guard."""
        host, port = self.responder.peer_address
        return f"{host}:{port}"

    def require_channel(self) -> Connection:
        """The connection the request came on; SYSTEM_ERROR when there is none."""
        if self.channel is None:
            raise ApogeeError(f"request code {self.request.code} came on no connection")
        return self.channel

    def respond(self, response: RemotingCommand) -> bool:
        """Write ``response`` as the answer to this request; False if not written.

        Nothing is written for oneway requests or once the connection closed.
        """
        request = self.request
        if request.flag & FLAG_ONEWAY:  # not the property: this runs for every answer
            return False
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        if request.language == _CPP:
            response.serialize_type = _JSON
        if self.observer is not None:
            self.observer(self, response)
        return self.responder.send_response(response)


class ResponseBatch:
    """Answers to many requests at once, one writelines per responder.

    For answers that become ready together outside a read, such as every
    send a group commit's sync covered or the parked pulls one dispatch
    woke: each connection's answers leave in one system call when the batch
    closes, not one each.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: list[Responder] = []

    def __enter__(self) -> ResponseBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        held, self._held = self._held, []
        for responder in held:
            try:
                responder.release_writes()
            except Exception:  # one broken transport must not keep the others' answers
                log.exception("cannot write the held answers to %s", responder.peer_address)

    def hold(self, ctx: RequestContext) -> None:
        """Whatever is written to ``ctx``'s responder waits for the batch to close."""
        responder = ctx.responder
        if responder.hold_writes():
            self._held.append(responder)

    def respond(self, ctx: RequestContext, response: RemotingCommand) -> bool:
        """``ctx.respond(response)``, written when the batch closes.

        An answer that cannot be written is logged and replaced by an error
        answer where possible; it never stops the batch's other answers.
        """
        self.hold(ctx)
        return respond_safely(ctx, response)


@dataclass(slots=True)
class HandlerGroup:
    """Handlers sharing ``concurrency`` running slots and a waiting line."""

    name: str
    concurrency: int
    queue_capacity: int
    running: int = 0
    waiting: deque[tuple[AsyncHandler, RequestContext]] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class _Entry:
    handler: Handler
    is_async: bool
    group: HandlerGroup


class HandlerTable:
    """Request code -> handler; shared by every connection of one server or client."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._groups: dict[str, HandlerGroup] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.guard: Guard | None = None
        self.add_group(DEFAULT_GROUP, concurrency=64, queue_capacity=10_000)
        #: told of every answer written (see the module docstring)
        self.observer: Observer | None = None

    def add_group(self, name: str, *, concurrency: int, queue_capacity: int) -> None:
        if concurrency < 1 or queue_capacity < 0:
            raise ConfigError(f"handler group {name!r}: concurrency >= 1 and capacity >= 0")
        self._groups[name] = HandlerGroup(name, concurrency, queue_capacity)

    def register(
        self, codes: int | Iterable[int], handler: Handler, *, group: str = DEFAULT_GROUP
    ) -> None:
        """Route ``codes`` to ``handler``; coroutine functions run in ``group``."""
        if group not in self._groups:
            raise ConfigError(f"unknown handler group {group!r}; add_group() it first")
        entry = _Entry(handler, inspect.iscoroutinefunction(handler), self._groups[group])
        for code in [codes] if isinstance(codes, int) else codes:
            self._entries[int(code)] = entry

    def group(self, name: str) -> HandlerGroup:
        return self._groups[name]

    def groups(self) -> dict[str, HandlerGroup]:
        return dict(self._groups)

    @property
    def codes(self) -> list[int]:
        """The request codes with a handler, in ascending order."""
        return sorted(self._entries)

    @property
    def in_flight(self) -> int:
        """Async handler runs still executing or waiting."""
        return sum(g.running + len(g.waiting) for g in self._groups.values())

    # -- dispatch ---------------------------------------------------------------

    def context(
        self, responder: Responder, request: RemotingCommand, channel: Connection | None = None
    ) -> RequestContext:
        """A context for ``request`` whose answers this table's observer sees."""
        return RequestContext(responder, request, channel=channel, observer=self.observer)

    def dispatch(self, ctx: RequestContext) -> None:
        """Run the handler of ``ctx.request``, or answer that there is none."""
        request = ctx.request
        if self.guard is not None and self._refused(ctx):
            return
        entry = self._entries.get(request.code)
        if entry is None:
            remark = f" request type {request.code} not supported"
            ctx.respond(request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark))
            return
        if not entry.is_async:  # run here, not in a helper: most requests are served so
            sync_handler: SyncHandler = entry.handler  # type: ignore[assignment]
            try:
                response = sync_handler(ctx, request)
            except Exception as exc:  # any fault becomes a response
                response = _error_response(ctx, exc)
            if response is not None:
                _respond(ctx, response)
            return
        group = entry.group
        handler: AsyncHandler = entry.handler  # type: ignore[assignment]
        if group.running < group.concurrency:
            group.running += 1
            task = asyncio.get_running_loop().create_task(self._worker(group, handler, ctx))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif len(group.waiting) < group.queue_capacity:
            group.waiting.append((handler, ctx))
        else:
            remark = (
                f"[OVERLOAD] group {group.name!r} is full ({group.concurrency} running, "
                f"{group.queue_capacity} waiting), try again later"
            )
            ctx.respond(request.make_response(ResponseCode.SYSTEM_BUSY, remark))

    def _refused(self, ctx: RequestContext) -> bool:
        assert self.guard is not None
        try:
            refusal = self.guard(ctx.request, ctx.peer)
        except Exception as exc:  # a faulty guard refuses; it never lets a request through
            log.exception("the guard failed on request code %d from %s", ctx.request.code, ctx.peer)
            refusal = ctx.request.make_response(ResponseCode.SYSTEM_ERROR, f"guard failed: {exc}")
        if refusal is None:
            return False
        _respond(ctx, refusal)
        return True

    async def _worker(
        self, group: HandlerGroup, handler: AsyncHandler, ctx: RequestContext
    ) -> None:
        # One task drains the group's waiting line instead of a task per queued request.
        try:
            while True:
                try:
                    response = await handler(ctx, ctx.request)
                except Exception as exc:  # any fault becomes a response
                    response = _error_response(ctx, exc)
                if response is not None:
                    _respond(ctx, response)
                if not group.waiting:
                    return
                handler, ctx = group.waiting.popleft()
        finally:
            group.running -= 1

    async def drain(self, timeout_s: float) -> bool:
        """Wait until no async handler runs or waits; False if ``timeout_s`` passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._tasks:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait(set(self._tasks), timeout=remaining)
        return True

    def cancel_all(self) -> None:
        for task in self._tasks:
            task.cancel()


def _error_response(ctx: RequestContext, exc: Exception) -> RemotingCommand:
    request = ctx.request
    if isinstance(exc, ApogeeError):
        if ctx.observer is None:  # else the observer logs the refusal
            log.warning("request code %d from %s failed: %s", request.code, ctx.peer, exc)
        code = exc.code
    else:
        log.exception("request code %d from %s raised", request.code, ctx.peer)
        code = ResponseCode.SYSTEM_ERROR
    return request.make_response(code, str(exc) or type(exc).__name__)


def respond_safely(ctx: RequestContext, response: RemotingCommand) -> bool:
    """Write an answer; one that cannot be encoded becomes SYSTEM_ERROR.

    Never raises: a request whose answer cannot be written at all is logged
    and left unanswered (False), so the caller goes on with other answers.
    """
    try:
        return ctx.respond(response)
    except Exception as exc:
        log.exception("cannot send the answer to code %d from %s", ctx.request.code, ctx.peer)
        remark = f"bad response: {exc}"[:200]
        try:
            ctx.respond(ctx.request.make_response(ResponseCode.SYSTEM_ERROR, remark))
        except Exception:
            log.error("request code %d from %s left unanswered", ctx.request.code, ctx.peer)
        return False


_respond = respond_safely
