"""The client for code without an event loop: scripts, notebooks, worker threads.

Owns: LoopThread (one daemon thread per process running the event loop every
sync client shares; uvloop when installed) and the blocking Producer,
TransactionProducer, PushConsumer and LitePullConsumer, each a thin shell
around its asyncio twin running there.

::

    from apogee.client import Message
    from apogee.client.sync import Producer

    with Producer("scripts", namesrv="127.0.0.1:9876") as producer:
        producer.send(Message("orders", b"..."))

Rules:
* any number of threads may call one producer at once; their sends run
  concurrently on the loop thread;
* a transaction's local transaction runs in the thread that called
  ``send_in_transaction`` (it may use that thread's database session), the
  ``checker`` in a worker thread of the loop (it may block);
* a PushConsumer's listener runs in a pool of ``consume_concurrency``
  threads of its own (it may block), never on the loop thread; iterating
  (``for msg in consumer``) hands the messages to the iterating thread, a
  message being done when the next one is asked for;
* calling a sync method on the loop thread itself (from a callback of an
  asyncio client) would wait forever, so it raises ClientError instead;
* at interpreter exit the loop closes what is still open (producers leave
  their groups) before the thread ends.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from apogee.client import instance as instance_module
from apogee.client import lite_pull_consumer as async_lite
from apogee.client import producer as async_producer
from apogee.client import push_consumer as async_push
from apogee.client import transaction_producer as async_tx
from apogee.client.latency import LatencyFaultTable
from apogee.client.selectors import QueueSelector
from apogee.client.transaction import LocalTransactionState
from apogee.errors import ClientError
from apogee.model.client import MessageQueue
from apogee.model.message import Message, MessageExt
from apogee.model.received import ReceivedMessage
from apogee.model.results import SendResult, SendStatus
from apogee.remoting.runner import loop_factory

T = TypeVar("T")

_CLOSE_TIMEOUT_S = 10.0


class LoopThread:
    """The process's event loop for sync clients, on a daemon thread started on first use."""

    _shared: LoopThread | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        factory = loop_factory()
        self.loop = factory() if factory is not None else asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="apogee-client-loop", daemon=True
        )
        self._thread.start()
        ready.wait()

    @classmethod
    def get(cls) -> LoopThread:
        with cls._lock:
            if cls._shared is None or not cls._shared._thread.is_alive():
                cls._shared = cls()
                atexit.register(cls._shared.stop)
            return cls._shared

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop and wait for its result in the calling thread."""
        if threading.current_thread() is self._thread:
            work.close()
            raise ClientError(
                "a sync client method was called on the client's own loop thread "
                "(from a callback?): use the asyncio client there"
            )
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result()
        except (KeyboardInterrupt, concurrent.futures.CancelledError):
            future.cancel()
            raise

    def stop(self) -> None:
        """Close every client instance still open on the loop, then end the thread."""
        if not self._thread.is_alive():
            return

        async def close_all() -> None:
            live = [i for i in instance_module.live_instances() if i.loop is self.loop]
            await asyncio.gather(*(i.close() for i in live), return_exceptions=True)

        # a client that cannot say goodbye in time is left to the brokers' expiry
        with contextlib.suppress(TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(_CLOSE_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(_CLOSE_TIMEOUT_S)


class _Lifecycle(Protocol):
    """What a sync shell needs of its asyncio twin."""

    @property
    def group(self) -> str: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


A = TypeVar("A", bound=_Lifecycle)


class _Shell(Generic[A]):
    """A blocking client around its asyncio twin ``_async``, which runs on the loop thread:
    start, close, ``with`` and the group name, shared by every sync client."""

    _runner: LoopThread
    _async: A

    @property
    def group(self) -> str:
        return self._async.group

    def start(self) -> None:
        self._runner.run(self._async.start())

    def close(self) -> None:
        self._runner.run(self._async.close())

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Producer(_Shell[async_producer.Producer]):
    """``apogee.client.Producer`` with blocking methods; the same options."""

    def __init__(
        self,
        group: str = async_producer.DEFAULT_PRODUCER_GROUP,
        *,
        namesrv: str | Sequence[str],
        **options: Any,
    ) -> None:
        self._runner = LoopThread.get()
        self._async = self._make(group, namesrv, options)

    def _make(
        self, group: str, namesrv: str | Sequence[str], options: dict[str, Any]
    ) -> async_producer.Producer:
        return async_producer.Producer(group, namesrv=namesrv, **options)

    @property
    def config(self) -> async_producer.ProducerConfig:
        return self._async.config

    @property
    def fault_table(self) -> LatencyFaultTable | None:
        return self._async.fault_table

    @property
    def asyncio_producer(self) -> async_producer.Producer:
        """The asyncio producer this one drives (use it only on ``LoopThread.get().loop``)."""
        return self._async

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send ``msg`` and return the broker's answer (see ``apogee.client.Producer.send``)."""
        work = self._async.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout)
        return self._runner.run(work)

    def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        self._runner.run(self._async.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_batch(
        self,
        messages: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> list[SendResult]:
        work = self._async.send_batch(
            messages, queue=queue, selector=selector, arg=arg, timeout=timeout
        )
        return self._runner.run(work)


#: A sync checker: it may block; it runs in a worker thread.
SyncChecker = Callable[[MessageExt], LocalTransactionState]


class TransactionProducer(Producer):
    """``apogee.client.TransactionProducer`` with blocking methods; the same options."""

    def __init__(
        self,
        group: str,
        *,
        namesrv: str | Sequence[str],
        checker: SyncChecker,
        **options: Any,
    ) -> None:
        if not callable(checker):
            raise ClientError(f"checker: {checker!r} is not callable")

        async def in_a_thread(half: MessageExt) -> LocalTransactionState:
            return await asyncio.to_thread(checker, half)

        super().__init__(group, namesrv=namesrv, checker=in_a_thread, **options)

    def _make(
        self, group: str, namesrv: str | Sequence[str], options: dict[str, Any]
    ) -> async_tx.TransactionProducer:
        return async_tx.TransactionProducer(group, namesrv=namesrv, **options)

    @property
    def _tx(self) -> async_tx.TransactionProducer:
        tx = self._async
        assert isinstance(tx, async_tx.TransactionProducer)
        return tx

    def send_in_transaction(
        self,
        msg: Message,
        local_tx: Callable[[Message, Any], LocalTransactionState],
        arg: Any = None,
        *,
        timeout: float | None = None,
    ) -> async_tx.TransactionSendResult:
        """Send a half message, run ``local_tx(msg, arg)`` in this thread, end the transaction."""
        half = self._runner.run(self._tx.send_half(msg, timeout=timeout))
        return self._settle(half, lambda: local_tx(msg, arg))

    def send_batch_in_transaction(
        self,
        messages: Sequence[Message],
        local_tx: Callable[[Sequence[Message], Any], LocalTransactionState],
        arg: Any = None,
        *,
        properties: Mapping[str, str] | None = None,
        queue: MessageQueue | None = None,
        timeout: float | None = None,
    ) -> async_tx.TransactionSendResult:
        """A batch in one transaction (see the asyncio method), ``local_tx`` in this thread."""
        step = self._tx.send_batch_half(
            messages, properties=properties, queue=queue, timeout=timeout
        )
        return self._settle(self._runner.run(step), lambda: local_tx(messages, arg))

    def _settle(
        self, half: SendResult, run_local: Callable[[], LocalTransactionState]
    ) -> async_tx.TransactionSendResult:
        tx, run = self._tx, self._runner.run
        if half.status is not SendStatus.SEND_OK:
            return run(tx.end_unstored(half))
        try:
            outcome = run_local()
        except Exception as exc:
            run(tx.end_transaction(half, LocalTransactionState.UNKNOW, remark=async_tx.failed(exc)))
            raise
        return run(tx.end_with(half, outcome))


class PushConsumer(_Shell[async_push.PushConsumer]):
    """``apogee.client.PushConsumer`` with blocking methods; the same options.

    ``listener`` is a plain function: it runs in a pool of ``consume_concurrency``
    threads. Without one, iterate: ``for msg in consumer`` (inside ``with consumer``).
    """

    def __init__(
        self,
        group: str,
        *,
        namesrv: str | Sequence[str],
        listener: Callable[[ReceivedMessage], object] | None = None,
        consume_concurrency: int = 20,
        **options: Any,
    ) -> None:
        if listener is not None and not callable(listener):
            raise ClientError(f"listener: {listener!r} is not callable")
        self._runner = LoopThread.get()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        in_pool = None
        if listener is not None:
            sync_listener = listener
            pool = self._pool = concurrent.futures.ThreadPoolExecutor(
                consume_concurrency, thread_name_prefix=f"apogee-consume-{group}"
            )

            async def in_pool(msg: ReceivedMessage) -> object:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(pool, sync_listener, msg)

        self._async = async_push.PushConsumer(
            group,
            namesrv=namesrv,
            listener=in_pool,
            consume_concurrency=consume_concurrency,
            **options,
        )

    @property
    def asyncio_consumer(self) -> async_push.PushConsumer:
        """The asyncio consumer this one drives (use it only on ``LoopThread.get().loop``)."""
        return self._async

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        self._runner.run(_call(self._async.subscribe, topic, expression, sql=sql))

    def unsubscribe(self, topic: str) -> None:
        self._runner.run(_call(self._async.unsubscribe, topic))

    def assignment(self) -> set[MessageQueue]:
        return self._runner.run(_call(self._async.assignment))

    def close(self) -> None:
        super().close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._runner.run(self._async.__aexit__(exc_type, exc, tb))
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def __iter__(self) -> Self:
        self._async.__aiter__()  # refuses a consumer with a listener
        return self

    def __next__(self) -> ReceivedMessage:
        try:
            return self._runner.run(self._async.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def reconsume_later(self, msg: ReceivedMessage) -> None:
        """The message the iteration gave last failed: retry it later."""
        self._runner.run(self._async.reconsume_later(msg))


class LitePullConsumer(_Shell[async_lite.LitePullConsumer]):
    """``apogee.client.LitePullConsumer`` with blocking methods; the same options."""

    def __init__(self, group: str, *, namesrv: str | Sequence[str], **options: Any) -> None:
        self._runner = LoopThread.get()
        self._async = async_lite.LitePullConsumer(group, namesrv=namesrv, **options)

    @property
    def asyncio_consumer(self) -> async_lite.LitePullConsumer:
        return self._async

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        self._runner.run(_call(self._async.subscribe, topic, expression, sql=sql))

    def unsubscribe(self, topic: str) -> None:
        self._runner.run(_call(self._async.unsubscribe, topic))

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._runner.run(_call(self._async.assign, list(queues)))

    def assignment(self) -> set[MessageQueue]:
        return self._runner.run(_call(self._async.assignment))

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._runner.run(self._async.fetch_queues(topic))

    def poll(self, timeout: float = 5.0, max_messages: int | None = None) -> list[ReceivedMessage]:
        return self._runner.run(self._async.poll(timeout, max_messages))

    def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        self._runner.run(self._async.commit(offsets))

    def committed(self, mq: MessageQueue) -> int | None:
        return self._runner.run(self._async.committed(mq))

    def position(self, mq: MessageQueue) -> int | None:
        return self._runner.run(_call(self._async.position, mq))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._runner.run(self._async.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._runner.run(self._async.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._runner.run(self._async.seek_to_end(mq))

    def seek_by_timestamp(self, mq: MessageQueue, when: float | datetime) -> None:
        self._runner.run(self._async.seek_by_timestamp(mq, when))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._runner.run(_call(self._async.pause, list(queues)))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._runner.run(_call(self._async.resume, list(queues)))


async def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args)`` on the loop thread (the asyncio clients are not thread-safe)."""
    return fn(*args, **kwargs)
