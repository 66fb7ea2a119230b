"""The client against a name server and a broker run as ``apogee`` processes.

* broadcasting: every consumer of the group gets everything; one restarted goes on from
  its local offset file, nothing delivered again, and the broker keeps no offset for it;
* a failing listener: the message comes back with reconsume times 0, 1, 2, then lies in
  ``%DLQ%<group>``, readable there;
* LitePullConsumer: each seek (offset, timestamp, beginning, end);
* transactions: commit and rollback, and the broker's check-back deciding the
  transactions of producer processes killed before they answered;
* a push consumer process SIGKILLed mid-stream: the next consumer of the group gets
  exactly what the dead one had not committed, so nothing is lost;
* a send to a stopped (SIGSTOP) broker raises the timeout error once the send timeout is
  spent, and the producer works again once the broker goes on (SIGCONT).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from apogee.client import (
    LitePullConsumer,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    ReceivedMessage,
    TransactionProducer,
)
from apogee.errors import RemotingTimeoutError
from apogee.testing.cluster import BrokerProcess, broker_processes, eventually
from apogee.testing.reading import read_queue
from tests.integration.client.helpers import committed_offset, read_topic

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
HERE = Path(__file__).parent
Cluster = tuple[str, BrokerProcess]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One name server and one broker process; transactions left open 300 ms are checked
    back, every 150 ms."""
    fast_checks = {"transactionCheckInterval": "150", "transactionTimeOut": "300"}
    with broker_processes(tmp_path_factory.mktemp("procs"), fast_checks) as found:
        yield found


async def send_all(namesrv: str, topic: str, bodies: list[bytes]) -> None:
    async with Producer("pg", namesrv=namesrv) as producer:
        for body in bodies:
            await producer.send(Message(topic, body))


def numbered(prefix: str, first: int, last: int) -> list[bytes]:
    return [b"%s%d" % (prefix.encode(), i) for i in range(first, last + 1)]


async def test_broadcasting_delivers_all_to_each_and_resumes_from_the_offset_file(
    cluster: Cluster, tmp_path: Path
) -> None:
    namesrv, _ = cluster
    offsets = tmp_path / "offsets"

    def member(name: str, got: list[bytes]) -> PushConsumer:
        consumer = PushConsumer(
            "cg-proc-bc",
            namesrv=namesrv,
            message_model="broadcasting",
            consume_from="first",
            listener=lambda m: got.append(m.body),
            instance_name=f"bc-{name}",
            offset_dir=offsets,
        )
        consumer.subscribe("ProcNews")
        return consumer

    await send_all(namesrv, "ProcNews", numbered("n", 0, 11))
    got_a: list[bytes] = []
    got_b: list[bytes] = []
    a, b = member("a", got_a), member("b", got_b)
    await a.start()
    await b.start()
    await eventually(lambda: _have(12, got_a, got_b), timeout_s=10)
    client_a = a.instance.client_id
    await a.close()
    await b.close()
    assert sorted(got_a) == sorted(got_b) == sorted(numbered("n", 0, 11))

    await send_all(namesrv, "ProcNews", numbered("m", 0, 5))
    again: list[bytes] = []
    async with member("a", again):  # the same client id, so the same offset file
        await eventually(lambda: _have(6, again), timeout_s=10)
    # a start from the first offset would have handed n0..n11 over with m0..m5, whose
    # queues and pull batches they share
    assert sorted(again) == sorted(numbered("m", 0, 5))
    table = orjson.loads((offsets / client_a / "cg-proc-bc" / "offsets.json").read_bytes())
    assert sum(table["offsetTable"].values()) == 18
    queue = MessageQueue("ProcNews", "broker-a", 0)
    assert await committed_offset(namesrv, "cg-proc-bc", queue) is None  # kept locally only


async def _have(count: int, *lists: list[Any]) -> bool:
    return all(len(items) >= count for items in lists)


async def test_a_failing_message_is_retried_then_readable_in_the_dead_letter_queue(
    cluster: Cluster,
) -> None:
    namesrv, broker = cluster
    await send_all(namesrv, "ProcFlaky", [b"poison"])
    reconsumes: list[int] = []

    def listener(msg: ReceivedMessage) -> None:
        reconsumes.append(msg.reconsume_times)
        raise ValueError("cannot handle this one")

    async with PushConsumer(
        "cg-proc-retry",
        namesrv=namesrv,
        consume_from="first",
        listener=listener,
        max_reconsume_times=2,
        retry_delay_level=1,  # 1 s
    ) as consumer:
        consumer.subscribe("ProcFlaky")
        api = consumer.instance.broker_api

        async def dead() -> list[MessageExt]:
            return await read_queue(api, broker.address, "%DLQ%cg-proc-retry", 0)

        [letter] = await eventually(dead, timeout_s=12)
    assert reconsumes == [0, 1, 2]  # first delivery, then one per retry, then no more
    assert letter.body == b"poison"
    assert letter.properties["RETRY_TOPIC"] == "ProcFlaky"  # where it came from


async def test_every_seek_of_the_lite_pull_consumer(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("ProcLite", "broker-a", 2)
    async with Producer("pg", namesrv=namesrv) as producer:
        for body in numbered("l", 0, 4):
            await producer.send(Message(queue.topic, body), queue=queue)
        await asyncio.sleep(0.3)  # store timestamps apart, on each side of the boundary
        boundary = time.time()
        for body in numbered("l", 5, 9):
            await producer.send(Message(queue.topic, body), queue=queue)

        async with LitePullConsumer(
            "lg-proc", namesrv=namesrv, consume_from="first", auto_commit=False
        ) as consumer:
            consumer.assign([queue])
            assert await poll(consumer, 10) == numbered("l", 0, 9)
            await consumer.seek(queue, 7)
            assert await poll(consumer, 3) == numbered("l", 7, 9)
            await consumer.seek_by_timestamp(queue, boundary)
            assert await poll(consumer, 5) == numbered("l", 5, 9)
            await consumer.seek_to_begin(queue)
            assert await poll(consumer, 10) == numbered("l", 0, 9)
            await consumer.seek(queue, 2)
            await consumer.seek_to_end(queue)
            assert await consumer.poll(timeout=0.3) == []
            await producer.send(Message(queue.topic, b"l10"), queue=queue)
            assert await poll(consumer, 1) == [b"l10"]
            assert consumer.position(queue) == 11


async def poll(consumer: LitePullConsumer, count: int) -> list[bytes]:
    """Poll until ``count`` messages came (within 5 s); their bodies in order."""
    out: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(out) < count and time.monotonic() < deadline:
        out += [m.body for m in await consumer.poll(timeout=0.5)]
    return out


async def test_transactions_commit_roll_back_and_are_checked_back_after_the_producer_died(
    cluster: Cluster,
) -> None:
    namesrv, broker = cluster
    topic = "ProcTx"
    halves = [
        await _orphan(namesrv, topic, "kept", "keep"),
        await _orphan(namesrv, topic, "dropped", "drop"),
    ]
    asked: dict[str, LocalTransactionState] = {}

    def checker(half: MessageExt) -> LocalTransactionState:
        if half.keys not in ("keep", "drop"):
            # one of this producer's own, checked before its end arrived (a loaded machine):
            # the end decides it, whichever comes first
            return LocalTransactionState.UNKNOW
        assert half.uniq_key is not None
        asked[half.uniq_key] = decision = COMMIT if half.keys == "keep" else ROLLBACK
        return decision

    def decided(state: LocalTransactionState) -> Any:
        return lambda _msg, _arg: state

    async with TransactionProducer("tx-proc", namesrv=namesrv, checker=checker) as producer:
        ok = await producer.send_in_transaction(Message(topic, b"paid"), decided(COMMIT))
        no = await producer.send_in_transaction(Message(topic, b"cancelled"), decided(ROLLBACK))
        assert (ok.local_state, no.local_state) == (COMMIT, ROLLBACK)
        api = producer.instance.broker_api

        async def both_checked() -> bool:
            return set(asked) == set(halves)

        await eventually(both_checked, timeout_s=10)
        # a marker behind each queue: once all are readable, every earlier end is applied
        for queue_id in range(4):
            queue = MessageQueue(topic, "broker-a", queue_id)
            await producer.send(Message(topic, b"marker"), queue=queue)

        async def settled() -> list[bytes] | None:
            bodies = [m.body for m in await read_topic(api, broker.address, topic)]
            return bodies if bodies.count(b"marker") == 4 else None

        bodies = await eventually(settled, timeout_s=10)
    assert sorted(b for b in bodies if b != b"marker") == [b"kept", b"paid"]
    assert asked == {halves[0]: COMMIT, halves[1]: ROLLBACK}


async def _orphan(namesrv: str, topic: str, body: str, keys: str) -> str:
    """The UNIQ_KEY of a half message whose producer process was SIGKILLed before it ended
    its transaction."""
    args = [sys.executable, str(HERE / "tx_child.py"), namesrv, "tx-proc", topic, body, keys]
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 30)
            assert line.startswith("half "), line
        finally:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    return line.split()[1]


async def test_a_consumer_killed_mid_stream_leaves_its_uncommitted_messages_to_the_next(
    cluster: Cluster,
) -> None:
    namesrv, _ = cluster
    topic, group = "ProcKill", "cg-proc-kill"
    sent = numbered("k", 0, 199)
    await send_all(namesrv, topic, sent)
    queues = [MessageQueue(topic, "broker-a", q) for q in range(4)]
    args = [sys.executable, str(HERE / "consumer_child.py"), namesrv, group, topic]
    seen_by_dead: list[tuple[int, int, bytes]] = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            while len(seen_by_dead) < 60:
                line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 30)
                assert line.startswith("got "), line
                _, queue_id, offset, body = line.split()
                seen_by_dead.append((int(queue_id), int(offset), body.encode()))

            async def some_committed() -> bool:
                return any([await committed_offset(namesrv, group, mq) for mq in queues])

            await eventually(some_committed, timeout_s=10)
        finally:
            child.kill()  # mid-stream: 30 ms a message, 200 messages
    assert child.returncode == -signal.SIGKILL
    committed = {mq.queue_id: await committed_offset(namesrv, group, mq) or 0 for mq in queues}
    assert 0 < sum(committed.values()) < len(sent)

    got: list[ReceivedMessage] = []
    async with PushConsumer(
        group, namesrv=namesrv, consume_from="first", listener=got.append, instance_name="heir"
    ) as heir:
        heir.subscribe(topic)

        async def all_consumed() -> bool:
            return {m.body for m in got} | {b for *_, b in seen_by_dead} >= set(sent)

        await eventually(all_consumed, timeout_s=10)
        await heir.persist_offsets()
    heirs = {(m.queue_id, m.queue_offset, m.body) for m in got}
    assert len(heirs) == len(got)  # nothing twice to the heir
    uncommitted = {
        (m.queue_id, m.queue_offset, m.body)
        for q in range(4)
        for m in await read_queue_of(namesrv, topic, q)
        if m.queue_offset >= committed[q]
    }
    assert heirs == uncommitted  # from each committed offset on: no loss, no more
    assert {b for *_, b in heirs | set(seen_by_dead)} == set(sent)


async def read_queue_of(namesrv: str, topic: str, queue_id: int) -> list[MessageExt]:
    async with Producer("reader", namesrv=namesrv, instance_name="queue-reader") as p:
        routes = p.instance.routes
        await routes.get_route(topic)
        addr = routes.master_addr("broker-a")
        assert addr is not None
        return await read_queue(p.instance.broker_api, addr, topic, queue_id)


async def test_a_send_to_a_stopped_broker_times_out_and_the_producer_recovers(
    cluster: Cluster,
) -> None:
    namesrv, broker = cluster
    assert broker.proc is not None
    timeout = 1.0
    async with Producer("pg-stop", namesrv=namesrv, send_timeout=timeout) as producer:
        await producer.send(Message("ProcStop", b"before"))  # route and connection ready
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                await producer.send(Message("ProcStop", b"lost"))
            elapsed = time.monotonic() - start
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        assert timeout * 0.9 <= elapsed < timeout + 2
        result = await producer.send(Message("ProcStop", b"after"))
    assert result.message_queue.topic == "ProcStop"
