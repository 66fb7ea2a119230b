"""The mqadmin commands an operator reaches for when consumers misbehave, against a cluster of
real processes with the official C++ client consuming.

One name server and one broker for the module; the commands run in-process (``admin_cli``)
and every check reads ``--json``. The C++ push consumer answers the broker's requests
(running info, offset resets) as it would for RocketMQ.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from apogee.admin.admin_client import AdminClient
from apogee.client.producer import Producer
from apogee.model.message import Message
from apogee.model.topic import TopicConfig
from apogee.testing.cluster import BrokerProcess, broker_processes, eventually
from tests.harness.cpp import CppProcess, start_cpp
from tests.integration.admin.helpers import AdminCli, json_of

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TOPIC = "OpsOrders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    with broker_processes(tmp_path_factory.mktemp("ops")) as found:
        yield found


async def consumer(namesrv: str, group: str, topic: str = TOPIC) -> CppProcess:
    spec = {"action": "push_consume", "namesrv": namesrv, "topic": topic, "group": group,
            "run_s": 40}  # fmt: skip
    proc = await start_cpp(spec, timeout_s=50)
    assert await proc.wait_event("started", 10), (await proc.stop()).describe()
    return proc


async def _registered(admin: AdminClient, topic: str) -> bool:
    return topic in await admin.topic_list()


async def test_consumer_and_producer_operations(
    cluster: tuple[str, BrokerProcess], admin_cli: AdminCli
) -> None:
    ns, _ = cluster
    assert json_of(await admin_cli("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC,
                                   "-r", "2", "-w", "2", "--json"))["brokers"]  # fmt: skip
    started = int(time.time() * 1000)
    reader = await consumer(ns, "cg_ops")
    try:
        async with Producer("pg_ops", namesrv=ns) as producer:
            for i in range(10):
                tags = "TagA" if i % 2 == 0 else "TagB"
                await producer.send(Message(TOPIC, b"order-%d" % i, tags=tags, keys=[f"k{i}"]))
            assert len(await reader.wait_messages(10, 20)) >= 10

            producers = json_of(await admin_cli("producerConnection", "-n", ns, "-g", "pg_ops",
                                                "-t", TOPIC, "--json"))  # fmt: skip
            assert len(producers["connections"]) == 1
            assert producers["connections"][0]["language"] == "PYTHON"

        connection = json_of(
            await admin_cli("consumerConnection", "-n", ns, "-g", "cg_ops", "--json")
        )
        (client,) = connection["connections"]
        assert client["language"] == "CPP"
        assert TOPIC in [s["topic"] for s in connection["subscriptions"]]
        assert connection["messageModel"] == "CLUSTERING"

        status = json_of(await admin_cli("consumerStatus", "-n", ns, "-g", "cg_ops", "--json"))
        info = status["consumers"][client["clientId"]]
        assert "error" not in info, info
        assert info.get("properties") or info.get("mqTable") is not None

        stats = json_of(await admin_cli("statsAll", "-n", ns, "-t", TOPIC, "--json"))["stats"]
        row = next(r for r in stats if r["consumerGroup"] == "cg_ops")
        assert row["inMsg24Hour"] == 10 and row["outMsg24Hour"] >= 10, stats
        assert row["accumulation"] >= 0

        # back to the start: the running C++ consumer is told, and gets all ten again.
        # The broker resets only a group with offsets on the topic: wait for the
        # consumer's offset save (every 5 s) to have committed all ten.
        async def committed() -> bool:
            async with AdminClient(ns) as admin:
                stats = await admin.consumer_progress("cg_ops", TOPIC)
            return sum(w.consumer_offset for w in stats.offset_table.values()) == 10

        await eventually(committed, 15, 0.2)
        since = str(started - 60_000)
        reset = json_of(await admin_cli("resetOffsetByTime", "-n", ns, "-g", "cg_ops",
                                        "-t", TOPIC, "-s", since, "--json"))  # fmt: skip
        assert {q["offset"] for q in reset["offsets"]} == {0}
        again = await reader.wait_messages(20, 25)
        assert len(again) >= 20, (await reader.stop()).describe(80)

        skipped = json_of(await admin_cli("skipAccumulatedMessage", "-n", ns, "-g", "cg_ops",
                                          "-t", TOPIC, "--json"))  # fmt: skip
        assert sum(q["offset"] for q in skipped["offsets"]) == 10
    finally:
        await reader.stop()


async def test_browsing_messages(cluster: tuple[str, BrokerProcess], admin_cli: AdminCli) -> None:
    ns, broker = cluster
    async with AdminClient(ns) as admin:
        await admin.create_topic(TopicConfig("Browse", 2, 2), cluster="DefaultCluster")
        for i in range(4):
            await admin.send_message(Message("Browse", f"b{i}".encode(), tags=f"T{i % 2}"))
    every = json_of(await admin_cli("printMsg", "-n", ns, "-t", "Browse", "--json"))
    messages = [m for q in every["queues"] for m in q["messages"]]
    assert sorted(m["body"] for m in messages) == ["b0", "b1", "b2", "b3"]
    tagged = json_of(await admin_cli("printMsg", "-n", ns, "-t", "Browse", "-s", "T1", "--json"))
    assert sorted(m["body"] for q in tagged["queues"] for m in q["messages"]) == ["b1", "b3"]
    future = json_of(await admin_cli("printMsg", "-n", ns, "-t", "Browse", "-b", "now", "--json"))
    assert [m for q in future["queues"] for m in q["messages"]] == []

    first = messages[0]
    at = json_of(await admin_cli("queryMsgByOffset", "-n", ns, "-t", "Browse", "-b", "broker-a",
                                 "-i", str(first["queueId"]), "-o", str(first["queueOffset"]),
                                 "--json"))  # fmt: skip
    assert at["body"] == first["body"]
    by_key = json_of(await admin_cli("queryMsgByUniqueKey", "-n", ns, "-t", "Browse",
                                     "-i", first["msgId"], "--json"))  # fmt: skip
    assert by_key["messages"][0]["offsetMsgId"] == first["offsetMsgId"]
    queue = json_of(await admin_cli("printMsgByQueue", "-n", ns, "-t", "Browse", "-a", "broker-a",
                                    "-i", str(first["queueId"]), "--json"))  # fmt: skip
    assert first["body"] in [m["body"] for q in queue["queues"] for m in q["messages"]]

    clusters = json_of(await admin_cli("topicClusterList", "-n", ns, "-t", "Browse", "--json"))
    assert clusters["clusters"] == ["DefaultCluster"]
    config = json_of(await admin_cli("getBrokerConfig", "-n", ns, "-b", broker.address, "--json"))
    assert config["brokerName"] == "broker-a" and config["listenPort"] == str(broker.port)


async def test_dead_letters_are_listed_and_resent(
    cluster: tuple[str, BrokerProcess], admin_cli: AdminCli
) -> None:
    ns, broker = cluster
    async with AdminClient(ns) as admin:
        await admin.create_topic(TopicConfig("Fragile", 1, 1), cluster="DefaultCluster")
        await admin.create_topic(TopicConfig("Quiet", 1, 1), cluster="DefaultCluster")
        sent = await admin.send_message(Message("Fragile", b"poison", keys=["p-1"]))
        msg = await admin.query_msg_by_id(sent.offset_msg_id)
        await admin.broker.send_back(broker.address, msg, "cg_dlq", delay_level=-1)
        # the name server lists %DLQ%cg_dlq once the broker has registered its new topic
        await eventually(lambda: _registered(admin, "%DLQ%cg_dlq"), timeout_s=10)
    summary = json_of(await admin_cli("dlq", "-n", ns, "--json"))["deadLetters"]
    assert [(d["group"], d["count"]) for d in summary] == [("cg_dlq", 1)]
    listed = json_of(await admin_cli("dlq", "-n", ns, "-g", "cg_dlq", "--json"))
    assert [m["body"] for m in listed["messages"]] == ["poison"]

    # subscribed elsewhere: only the resent copy (through %RETRY%cg_dlq) can reach it
    receiver = await consumer(ns, "cg_dlq", "Quiet")
    try:
        await asyncio.sleep(2)  # the consumer takes the retry topic's queue
        resent = json_of(await admin_cli("dlq", "-n", ns, "-g", "cg_dlq", "-r", "--json"))
        assert len(resent["resent"]) == 1
        got = await receiver.wait_messages(1, 20)
        assert [(m["topic"], m["body"]) for m in got] == [("Fragile", "poison")]
    finally:
        await receiver.stop()

    deleted = json_of(await admin_cli("deleteSubGroup", "-n", ns, "-g", "cg_dlq",
                                      "-c", "DefaultCluster", "-r", "true", "--json"))  # fmt: skip
    assert deleted["brokers"] == [broker.address]
    gone = await admin_cli("dlq", "-n", ns, "-g", "cg_dlq")
    assert gone.exit_code == 1 and "no dead-letter queue" in gone.stderr
