"""The blocking facade (apogee.client.sync) from plain threads, against broker processes.

These tests are not coroutines: they call the sync clients as a script would, while the
name server and the broker run as ``apogee`` processes. What was stored is read back with
BrokerApi on a loop of the test's own (``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from apogee.client import (
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    ReceivedMessage,
    SendStatus,
)
from apogee.client.broker_api import BrokerApi
from apogee.client.sync import LitePullConsumer as SyncLitePullConsumer
from apogee.client.sync import LoopThread, Producer, TransactionProducer
from apogee.client.sync import PushConsumer as SyncPushConsumer
from apogee.errors import ClientError
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, wait_registered
from apogee.testing.reading import read_queue

pytestmark = pytest.mark.slow

FAST_CHECKS = {"transactionCheckInterval": "150", "transactionTimeOut": "100"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(name server address, broker address), processes shared by the module."""
    root = tmp_path_factory.mktemp("sync")
    with NamesrvProcess(root / "ns") as ns:
        broker = BrokerProcess(root / "store", ns.address, properties=FAST_CHECKS)
        broker.start()
        try:
            wait_registered(ns.address, broker.address)  # it listens before it registers
            yield ns.address, broker.address
        finally:
            assert broker.stop() == 0, broker.log_text()


def read_topic(broker: str, topic: str) -> list[MessageExt]:
    async def read() -> list[MessageExt]:
        async with RemotingClient() as client:
            api = BrokerApi(client)
            return [m for q in range(4) for m in await read_queue(api, broker, topic, q)]

    return asyncio.run(read())


def wait_for(check: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s}s")
        time.sleep(0.05)


def test_a_sync_producer_sends_from_many_threads(cluster: tuple[str, str]) -> None:
    namesrv, broker = cluster
    with Producer("sync-pg", namesrv=namesrv) as producer:
        first = producer.send(Message("SyncT", b"\x00binary\x00", tags="t", keys=["k"]))
        with ThreadPoolExecutor(4) as pool:
            results = list(
                pool.map(lambda i: producer.send(Message("SyncT", b"thread-%d" % i)), range(40))
            )
        batch = producer.send_batch([Message("SyncT", b"batch-%d" % i) for i in range(5)])
        producer.send_oneway(Message("SyncT", b"oneway"))
    assert first.status is SendStatus.SEND_OK
    assert all(r.status is SendStatus.SEND_OK for r in results) and len(batch) == 1

    wanted = {b"\x00binary\x00", b"oneway"} | {b"thread-%d" % i for i in range(40)}
    wanted |= {b"batch-%d" % i for i in range(5)}
    wait_for(lambda: {m.body for m in read_topic(broker, "SyncT")} == wanted, "all stored")
    [binary] = [m for m in read_topic(broker, "SyncT") if m.tags == "t"]
    assert binary.body == b"\x00binary\x00" and binary.keys == "k"


def test_a_sync_transaction_runs_locally_and_is_checked_in_a_worker(
    cluster: tuple[str, str],
) -> None:
    namesrv, broker = cluster
    caller = threading.get_ident()
    ran_in: list[int] = []
    checked_in: list[int] = []

    def local_tx(msg: Message, arg: object) -> LocalTransactionState:
        ran_in.append(threading.get_ident())
        if arg == "fail":
            raise RuntimeError("no database")
        return LocalTransactionState.COMMIT_MESSAGE

    def checker(half: MessageExt) -> LocalTransactionState:
        checked_in.append(threading.get_ident())
        return LocalTransactionState.COMMIT_MESSAGE

    with TransactionProducer("sync-tx", namesrv=namesrv, checker=checker) as producer:
        done = producer.send_in_transaction(Message("SyncTx", b"committed"), local_tx)
        assert done.local_state is LocalTransactionState.COMMIT_MESSAGE
        with pytest.raises(RuntimeError, match="no database"):
            producer.send_in_transaction(Message("SyncTx", b"checked"), local_tx, "fail")
        wait_for(lambda: len(read_topic(broker, "SyncTx")) == 2, "the check-back commit")
    assert {m.body for m in read_topic(broker, "SyncTx")} == {b"committed", b"checked"}
    assert ran_in == [caller, caller]
    assert checked_in and caller not in checked_in
    assert LoopThread.get()._thread.ident not in checked_in  # a worker, not the loop


def test_a_sync_batch_transaction_runs_locally_and_delivers_the_whole_batch(
    cluster: tuple[str, str],
) -> None:
    namesrv, broker = cluster
    caller = threading.get_ident()
    ran_in: list[int] = []

    def local_tx(messages: Sequence[Message], arg: object) -> LocalTransactionState:
        ran_in.append(threading.get_ident())
        ok = arg == "ok"
        return (
            LocalTransactionState.COMMIT_MESSAGE if ok else LocalTransactionState.ROLLBACK_MESSAGE
        )

    def checker(half: MessageExt) -> LocalTransactionState:
        raise AssertionError("every batch was ended by its producer")

    with TransactionProducer("sync-tx-batch", namesrv=namesrv, checker=checker) as producer:
        batch = [Message("SyncTxBatch", b"b%d" % i) for i in range(3)]
        done = producer.send_batch_in_transaction(batch, local_tx, "ok")
        assert done.local_state is LocalTransactionState.COMMIT_MESSAGE
        gone = [Message("SyncTxBatch", b"never")]
        producer.send_batch_in_transaction(gone, local_tx, "no", queue=done.message_queue)
        wait_for(lambda: len(read_topic(broker, "SyncTxBatch")) == 3, "the committed batch")
    assert [m.body for m in read_topic(broker, "SyncTxBatch")] == [b"b0", b"b1", b"b2"]
    assert ran_in == [caller, caller]


def test_a_sync_call_on_the_loop_thread_is_refused() -> None:
    runner = LoopThread.get()

    async def nested() -> str:
        try:
            runner.run(asyncio.sleep(0))
        except ClientError as exc:
            return str(exc)
        return "no error"

    assert "own loop thread" in runner.run(nested())


def test_closing_twice_and_using_a_closed_producer(cluster: tuple[str, str]) -> None:
    namesrv, _ = cluster
    producer = Producer("sync-closed", namesrv=namesrv)
    producer.start()
    producer.close()
    producer.close()
    with pytest.raises(ClientError, match="not started"):
        producer.send(Message("SyncT", b"x"))


def test_a_sync_push_consumer_runs_its_listener_in_worker_threads(
    cluster: tuple[str, str],
) -> None:
    namesrv, _ = cluster
    with Producer("sync-pg", namesrv=namesrv) as producer:
        for i in range(20):
            producer.send(Message("SyncC", b"c%d" % i))
    got: list[bytes] = []
    threads: set[int] = set()

    def listener(msg: ReceivedMessage) -> None:
        time.sleep(0.01)  # a listener may block: it runs in a pool thread
        threads.add(threading.get_ident())
        got.append(msg.body)

    consumer = SyncPushConsumer(
        "sync-cg", namesrv=namesrv, consume_from="first", listener=listener, consume_concurrency=4
    )
    consumer.subscribe("SyncC")
    with consumer:
        wait_for(lambda: len(got) == 20, "all consumed")
        assert len(consumer.assignment()) == 5  # 4 queues and the retry topic's
    assert sorted(got) == sorted(b"c%d" % i for i in range(20))
    assert threading.get_ident() not in threads
    assert LoopThread.get()._thread.ident not in threads and len(threads) > 1

    # iterating: the message the loop left by an exception is the next one's first
    seen: list[bytes] = []
    with pytest.raises(KeyError), SyncPushConsumer("sync-it", namesrv=namesrv) as it:
        it.subscribe("SyncC")
        wait_for(lambda: len(it.assignment()) == 5, "the queues taken")  # LAST: from now on
        with Producer("sync-pg", namesrv=namesrv) as producer:
            producer.send(Message("SyncC", b"one"), queue=MessageQueue("SyncC", "broker-a", 0))
        for msg in it:
            seen.append(msg.body)
            raise KeyError(msg.body)
    with SyncPushConsumer("sync-it", namesrv=namesrv) as it:
        it.subscribe("SyncC")
        seen.append(next(iter(it)).body)
    assert seen == [b"one", b"one"]


def test_a_sync_lite_pull_consumer_polls_seeks_and_commits(cluster: tuple[str, str]) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("SyncL", "broker-a", 2)
    with Producer("sync-pg", namesrv=namesrv) as producer:
        for i in range(5):
            producer.send(Message("SyncL", b"l%d" % i), queue=queue)
    with SyncLitePullConsumer(
        "sync-lg", namesrv=namesrv, consume_from="first", auto_commit=False
    ) as consumer:
        consumer.assign([queue])
        got: list[bytes] = []
        while len(got) < 5:
            got += [m.body for m in consumer.poll(timeout=1)]
        assert got == [b"l%d" % i for i in range(5)] and consumer.position(queue) == 5
        consumer.seek(queue, 3)
        assert [m.body for m in consumer.poll(timeout=2)] == [b"l3", b"l4"]
        consumer.commit()
        assert consumer.committed(queue) == 5
