"""The official C++ client against real ``apogee namesrv`` and ``apogee broker`` processes:
delayed messages, redelivery of failed messages, the dead-letter queue, orderly consumption
with queue locks, and retries shared by two clustering consumers.

The broker runs with one-second delay levels (level 2 is two seconds), so a retry is back
about a second after the consumer gave up on it. The C++ client has no max-reconsume-times
setting, so the dead-letter test gives its group a budget of 2 with the admin API, as an
operator would with ``updateSubGroup``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apogee.admin.admin_client import AdminClient
from apogee.client.broker_api import BrokerApi
from apogee.model.client import MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.topic import TopicConfig
from apogee.protocol.bodies import LockBatchRequestBody
from apogee.testing.cluster import BrokerProcess, broker_processes, eventually
from tests.harness.cpp import CppProcess, Line, run_cpp, start_cpp
from tests.interop.helpers import produce

pytestmark = pytest.mark.interop

LEVELS = "1s 2s " + " ".join(["1s"] * 16)
CLUSTER = "DefaultCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    with broker_processes(
        tmp_path_factory.mktemp("cpp-retry"), {"messageDelayLevel": LEVELS}
    ) as found:
        yield found


async def prepare_group(namesrv: str, group: str, **config: Any) -> None:
    """The group (with its settings) and its retry topic, routed before the consumer starts:
    the C++ client looks the retry topic up at start and then only every 30 s."""
    async with AdminClient(namesrv) as admin:
        if config:
            await admin.update_subscription_group(
                SubscriptionGroupConfig(group, **config), cluster=CLUSTER
            )
        await admin.create_topic(TopicConfig(f"%RETRY%{group}", 1, 1), cluster=CLUSTER)


async def consumer(namesrv: str, topic: str, group: str, **spec: Any) -> CppProcess:
    proc = await start_cpp(
        {"action": "push_consume", "namesrv": namesrv, "topic": topic, "group": group,
         "run_s": 40, **spec},
        timeout_s=45,
    )  # fmt: skip
    assert await proc.wait_event("started", 10), (await proc.stop()).describe()
    return proc


async def until(
    procs: list[CppProcess], done: Callable[[list[Line]], bool], timeout_s: float
) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if done([line for p in procs for line in p.events("message")]):
            return True
        await asyncio.sleep(0.1)
    return False


def successes(lines: list[Line]) -> list[Line]:
    return [line for line in lines if line["result"] == "success"]


def bodies(lines: list[Line]) -> set[str]:
    return {str(line["body"]) for line in lines}


def all_retried(want: set[str]) -> Callable[[list[Line]], bool]:
    """Every message consumed, and every failed one consumed again as a retry."""

    def check(lines: list[Line]) -> bool:
        ok = successes(lines)
        retried = {str(line["body"]) for line in ok if int(str(line["reconsume_times"])) >= 1}
        failed = {str(line["body"]) for line in lines if line["result"] == "reconsume_later"}
        return bodies(ok) >= want and failed <= retried

    return check


def expected(count: int) -> set[str]:
    return {f"message-{i}" for i in range(count)}


async def test_delayed_messages_arrive_after_their_delay(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    await produce(namesrv, "Delayed", 4, delay_level=2, properties={"ua": "v{i}"})
    run = await run_cpp(
        {"action": "push_consume", "namesrv": namesrv, "topic": "Delayed", "group": "cg_delay",
         "until": 4, "run_s": 20, "property_names": ["ua"]},
        timeout_s=30,
    )  # fmt: skip
    assert run.returncode == 0, run.describe()
    assert bodies(run.messages) == expected(4), run.describe()
    for line in run.messages:
        born, stored = line["born_timestamp"], line["store_timestamp"]
        assert isinstance(born, int) and isinstance(stored, int)
        assert stored >= born + 2000, line  # level 2 is two seconds here
        props = line["properties"]
        assert isinstance(props, dict)
        assert props["REAL_TOPIC"] == "Delayed"
        assert props["ua"] == "v" + str(line["body"]).removeprefix("message-")
        assert "DELAY" not in props and line["delay_level"] == 0
        assert line["topic"] == "Delayed"


async def test_a_failed_message_is_redelivered_with_its_reconsume_times(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    await prepare_group(namesrv, "cg_retry")
    await produce(namesrv, "Retried", 3)
    proc = await consumer(namesrv, "Retried", "cg_retry", fail_first_n=1)
    try:
        done = await until(
            [proc],
            lambda lines: (
                bodies(successes(lines)) >= expected(3)
                and any(line["reconsume_times"] for line in successes(lines))
            ),
            25,
        )
    finally:
        run = await proc.stop()
    assert done, run.describe()
    (failed,) = [line for line in run.messages if line["result"] == "reconsume_later"]
    again = [
        line for line in successes(run.messages)
        if line["body"] == failed["body"] and int(str(line["reconsume_times"])) >= 1
    ]  # fmt: skip
    assert again, run.describe()
    assert again[0]["topic"] == "Retried"  # shown under the topic it was first consumed from
    props = again[0]["properties"]
    assert isinstance(props, dict)
    assert props["RETRY_TOPIC"] == "Retried"
    assert props["ORIGIN_MESSAGE_ID"]


async def test_a_message_that_always_fails_ends_in_the_dead_letter_queue(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, broker = cluster
    await prepare_group(namesrv, "cg_dlq", retry_max_times=2)
    await produce(namesrv, "Doomed", 1, tags="TagD")
    proc = await consumer(namesrv, "Doomed", "cg_dlq", fail_always=True)
    try:
        await until([proc], lambda lines: len(lines) >= 3, 20)

        async def dead_letters() -> list[Any] | None:
            async with AdminClient(namesrv) as admin:
                try:
                    read = await admin.consume_messages("%DLQ%cg_dlq")
                except Exception:  # not routed yet
                    return None
            return [m for q in read for m in q.messages] or None

        (dead,) = await eventually(dead_letters, timeout_s=10, interval_s=0.2)
        await asyncio.sleep(1.5)  # a fourth delivery would come by now
    finally:
        run = await proc.stop()
    deliveries = run.messages
    assert [line["reconsume_times"] for line in deliveries] == [0, 1, 2], run.describe()
    assert {line["body"] for line in deliveries} == {"message-0"}
    assert dead.body == b"message-0" and dead.tags == "TagD"
    assert dead.reconsume_times == 3
    assert dead.properties["RETRY_TOPIC"] == "Doomed"
    assert dead.properties["ORIGIN_MESSAGE_ID"]
    assert dead.store_host == ("127.0.0.1", broker.port)


async def test_an_orderly_consumer_holds_its_locks_and_reads_each_queue_in_order(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, broker = cluster
    await produce(namesrv, "Ordered", 16, mode="orderly")  # queue = index % 4
    queues = tuple(MessageQueue("Ordered", "broker-a", i) for i in range(4))
    probe = LockBatchRequestBody("cg_orderly", "probe-client", queues)
    proc = await consumer(namesrv, "Ordered", "cg_orderly", orderly=True)
    try:
        done = await until([proc], lambda lines: len(lines) >= 16, 20)
        async with AdminClient(namesrv) as admin:
            api = BrokerApi(admin.remoting)
            taken = await api.lock_batch(broker.address, probe)
    finally:
        run = await proc.stop()
    assert done, run.describe()
    assert taken == (), "another client got a queue the orderly consumer holds"
    by_queue: dict[object, list[int]] = {}
    for line in run.messages:
        index = int(str(line["body"]).removeprefix("message-"))
        assert line["queue_id"] == index % 4
        by_queue.setdefault(line["queue_id"], []).append(index)
    assert by_queue == {q: list(range(q, 16, 4)) for q in range(4)}, run.describe()

    async with AdminClient(namesrv) as admin:  # what the client did not unlock expires in 60 s
        api = BrokerApi(admin.remoting)
        await api.unlock_batch(broker.address, probe)


async def test_two_clustering_consumers_lose_no_retried_message(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    await prepare_group(namesrv, "cg_split")
    await produce(namesrv, "Split", 1, body="warm-up")  # the topic exists before they look
    procs = [await consumer(namesrv, "Split", "cg_split", fail_first_n=1) for _ in range(2)]
    try:
        await asyncio.sleep(1.0)  # both join; the broker tells the first one to rebalance
        await produce(namesrv, "Split", 16, body="late-{i}")
        want = {"warm-up"} | {f"late-{i}" for i in range(16)}
        done = await until([procs[0], procs[1]], all_retried(want), 25)
    finally:
        runs = [await p.stop() for p in procs]
    assert done, runs[0].describe() + runs[1].describe()
    late = [{b for b in bodies(run.messages) if b.startswith("late")} for run in runs]
    assert late[0] and late[1], "both consumers should have had queues"
    lines = runs[0].messages + runs[1].messages
    assert [line for line in lines if line["result"] == "reconsume_later"]
