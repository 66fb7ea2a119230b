"""Concurrent consumption: messages of any queue handled as they come, in any order.

Owns: :class:`ConcurrentService`, which a PushConsumer without ``orderly``
hands pulled messages to (``deliver``), in one of three ways:

* a plain-function listener runs inline, message by message, on the batch
  the fetcher just pulled (a plain function blocks the loop anyway: running
  it elsewhere would only add work). When the queue holds nothing else, the
  batch is not put into the ProcessQueue at all: nothing can happen between
  the calls, so only the messages that failed need holding;
* a coroutine-function listener runs in at most ``concurrency`` worker
  tasks taking messages from one line of work;
* without a listener, ``next_message`` hands messages to ``async for``: a
  message is done when the next one is asked for.

Done messages leave their ProcessQueue and the queue's offset becomes the
lowest offset still held (``ProcessQueue.remove``), so a crash redelivers
what was in flight and loses nothing. Failed messages of a CLUSTERING
consumer are sent back to the broker (``listener.Retrier``) and, when that
fails, handled again here after ``LOCAL_RETRY_DELAY_S`` with their
reconsume times raised by one; a BROADCASTING consumer drops them (logged),
as RocketMQ does. Messages of a dropped queue (rebalanced away) are skipped.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from apogee.client.consumer_offsets import ConsumerOffsets
from apogee.client.fetcher import Fetcher
from apogee.client.listener import (
    ConsumeStatus,
    Listener,
    Retrier,
    consume_one,
    failed,
    is_async_listener,
    outcome,
)
from apogee.model.received import ReceivedMessage

log = logging.getLogger(__name__)

#: a message the broker did not take back is handled again after this long
LOCAL_RETRY_DELAY_S = 5.0

_RECONSUME_LATER = ConsumeStatus.RECONSUME_LATER


def _offset(msg: ReceivedMessage) -> int:
    return msg.queue_offset


Spawn = Callable[[Coroutine[Any, Any, Any]], "asyncio.Task[Any]"]
_Batch = tuple[Fetcher, list[ReceivedMessage]]


class ConcurrentService:
    def __init__(
        self,
        offsets: ConsumerOffsets,
        retrier: Retrier | None,
        *,
        listener: Listener | None,
        concurrency: int,
        spawn: Spawn,
    ) -> None:
        self._offsets = offsets
        self._retrier = retrier  # None: BROADCASTING, failures are dropped
        self._listener = listener
        self._async = listener is not None and is_async_listener(listener)
        self._concurrency = concurrency
        self._spawn = spawn
        self._work: deque[tuple[Fetcher, ReceivedMessage]] = deque()
        self._workers = 0
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._stopping = False
        # async for: batches waiting, the batch being handed out, where acks start
        self._batches: deque[_Batch] = deque()
        self._batch: _Batch | None = None
        self._pos = 0
        self._acked = 0
        self._arrived = asyncio.Event()
        self.consumed = 0
        self.failed = 0

    # -- from the fetchers ---------------------------------------------------------------

    def deliver(self, fetcher: Fetcher, msgs: list[ReceivedMessage], max_offset: int) -> None:
        if self._stopping:
            return  # neither held nor consumed: pulled again by the next consumer
        if self._listener is not None and not self._async and not fetcher.pq.count:
            self._run_passing(fetcher, msgs)
            return
        fetcher.pq.put(msgs, max_offset=max_offset)
        self._dispatch(fetcher, msgs)

    def _dispatch(self, fetcher: Fetcher, msgs: list[ReceivedMessage]) -> None:
        """Hand held messages to the listener, the workers or ``async for``."""
        if self._listener is None:
            self._batches.append((fetcher, msgs))
            self._arrived.set()
        elif self._async:
            work = self._work
            for msg in msgs:
                work.append((fetcher, msg))
            while self._workers < self._concurrency and self._workers < len(work):
                self._workers += 1
                self._track(self._spawn(self._worker()))
        else:
            self._run_inline(fetcher, msgs)

    def _run_passing(self, fetcher: Fetcher, msgs: list[ReceivedMessage]) -> None:
        """A plain listener on the batch of a queue that holds nothing.

        Nothing runs between the listener calls, so the batch need not be held
        meanwhile (the hot path: no ProcessQueue bookkeeping per message); only
        what failed is held, until the broker took it back.
        """
        listener = self._listener
        assert listener is not None
        bad: list[ReceivedMessage] | None = None
        pending: list[tuple[ReceivedMessage, Awaitable[Any]]] | None = None
        for msg in msgs:
            try:
                answer = listener(msg)
            except Exception as exc:
                failed(exc, msg)
                bad = [*(bad or ()), msg]
                continue
            if answer is None:
                continue
            if answer is _RECONSUME_LATER:
                bad = [*(bad or ()), msg]
            elif inspect.isawaitable(answer):
                pending = [*(pending or ()), (msg, answer)]
        pq = fetcher.pq
        if bad is None and pending is None:
            self.consumed += len(msgs)
            pq.passed(msgs[-1].queue_offset)
            if not pq.dropped:
                self._offsets.update(fetcher.mq, msgs[-1].queue_offset + 1)
            return
        held = sorted([*(bad or ()), *(m for m, _ in pending or ())], key=_offset)
        self.consumed += len(msgs) - len(held)
        pq.put(held)
        pq.passed(msgs[-1].queue_offset)
        if not pq.dropped:
            self._offsets.update(fetcher.mq, held[0].queue_offset)
        if bad is not None:
            self._retry(fetcher, bad)
        if pending is not None:
            self._async = True  # a plain function that gives awaitables: a coroutine one
            for msg, answer in pending:
                self._track(self._spawn(self._settle(fetcher, msg, answer)))

    def _run_inline(self, fetcher: Fetcher, msgs: list[ReceivedMessage]) -> None:
        """A plain listener on held messages, one by one."""
        listener = self._listener
        assert listener is not None
        bad: list[ReceivedMessage] | None = None
        for msg in msgs:
            try:
                answer = listener(msg)
            except Exception as exc:
                failed(exc, msg)
                bad = [*(bad or ()), msg]
                self._retry(fetcher, [msg])
                continue
            if answer is None:
                continue
            if answer is _RECONSUME_LATER:
                bad = [*(bad or ()), msg]
                self._retry(fetcher, [msg])
            elif inspect.isawaitable(answer):
                self._async = True
                bad = [*(bad or ()), msg]
                self._track(self._spawn(self._settle(fetcher, msg, answer)))
        if bad is None:
            self._done(fetcher, msgs)
        else:
            gone = set(map(id, bad))
            self._done(fetcher, [m for m in msgs if id(m) not in gone])

    async def _settle(self, fetcher: Fetcher, msg: ReceivedMessage, answer: Awaitable[Any]) -> None:
        try:
            ok = outcome(await answer)
        except Exception as exc:
            ok = failed(exc, msg)
        self._finish(fetcher, msg, ok)

    async def _worker(self) -> None:
        listener = self._listener
        assert listener is not None
        work = self._work
        try:
            while work and not self._stopping:
                fetcher, msg = work.popleft()
                if fetcher.pq.dropped:
                    continue
                self._finish(fetcher, msg, await consume_one(listener, msg))
        finally:
            self._workers -= 1

    # -- outcomes ------------------------------------------------------------------------

    def _finish(self, fetcher: Fetcher, msg: ReceivedMessage, ok: bool) -> None:
        if ok:
            self._done(fetcher, [msg])
        else:
            self._retry(fetcher, [msg])

    def _done(self, fetcher: Fetcher, msgs: list[ReceivedMessage]) -> None:
        if not msgs:
            return
        self.consumed += len(msgs)
        pq = fetcher.pq
        offset = pq.remove(msgs)
        if offset is not None and not pq.dropped:
            self._offsets.update(fetcher.mq, offset)

    def _retry(self, fetcher: Fetcher, msgs: list[ReceivedMessage]) -> None:
        if not msgs:
            return
        self.failed += len(msgs)
        retrier = self._retrier
        if retrier is None:
            for msg in msgs:
                log.warning("BROADCASTING: message %s failed and is dropped", msg.client_msg_id)
            self._done(fetcher, msgs)
            return
        self._track(self._spawn(self._send_back(retrier, fetcher, msgs)))

    async def _send_back(
        self, retrier: Retrier, fetcher: Fetcher, msgs: list[ReceivedMessage]
    ) -> None:
        for msg in msgs:
            if fetcher.pq.dropped:
                return
            if await retrier.send_back(fetcher.mq, msg):
                self._done(fetcher, [msg])
            else:
                msg.reconsume_times += 1
                asyncio.get_running_loop().call_later(
                    LOCAL_RETRY_DELAY_S, self._again, fetcher, msg
                )

    def _again(self, fetcher: Fetcher, msg: ReceivedMessage) -> None:
        if not fetcher.pq.dropped and not self._stopping:
            self._dispatch(fetcher, [msg])  # still held

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    # -- async for -------------------------------------------------------------------------

    async def next_message(self) -> ReceivedMessage | None:
        """The next message for ``async for``; the one before is done. None once stopped."""
        while True:
            batch = self._batch
            if batch is not None:
                fetcher, msgs = batch
                pos = self._pos
                if pos < len(msgs) and not fetcher.pq.dropped:
                    self._pos = pos + 1
                    return msgs[pos]
                self._ack_batch()
                self._batch = None
            if self._batches:
                self._batch = self._batches.popleft()
                self._pos = self._acked = 0
                continue
            if self._stopping:
                return None
            self._arrived.clear()
            await self._arrived.wait()

    def _ack_batch(self) -> None:
        """Every message handed out of the current batch is done."""
        batch = self._batch
        if batch is not None:
            fetcher, msgs = batch
            self._done(fetcher, msgs[self._acked : self._pos])
            self._acked = self._pos
            if self._pos >= len(msgs):
                self._batch = None

    async def reconsume_later(self, msg: ReceivedMessage) -> None:
        """``msg``, the message ``async for`` gave last, failed: retry it (see the module)."""
        batch = self._batch
        given = batch is not None and self._pos > self._acked and batch[1][self._pos - 1] is msg
        if not given or batch is None:
            raise ValueError("reconsume_later takes the message async for gave last")
        fetcher = batch[0]
        self._pos -= 1
        self._ack_batch()  # the ones before it are done
        self._pos += 1
        self._acked = self._pos
        self.failed += 1
        if self._retrier is None:
            log.warning("BROADCASTING: message %s failed and is dropped", msg.client_msg_id)
            self._done(fetcher, [msg])
        else:
            await self._send_back(self._retrier, fetcher, [msg])

    def settle_current(self, ok: bool) -> None:
        """At close: the message ``async for`` gave last is done (ok) or not (left in process,
        so the group gets it again); the ones before it are done either way."""
        if self._batch is None:
            return
        if not ok and self._pos > self._acked:
            self._pos -= 1
        self._ack_batch()
        self._batch = None

    # -- stopping ----------------------------------------------------------------------------

    async def stop(self, timeout_s: float) -> None:
        """Take no new work; wait up to ``timeout_s`` for what is in flight."""
        self._stopping = True
        self._arrived.set()
        tasks = list(self._in_flight)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
