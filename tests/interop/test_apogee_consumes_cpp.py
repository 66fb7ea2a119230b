"""The official C++ client's messages and consumers with Apogee's consumers, through processes.

What a C++ producer sends (tags, keys, user properties, its unique ids, bodies it compressed)
reaches Apogee's PushConsumer as the C++ consumer would see it; a C++ push consumer and an
Apogee PushConsumer in one group divide the topic's queues between them and together get
every message once the group has settled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from apogee.client import Message, Producer, PushConsumer, ReceivedMessage
from apogee.testing.cluster import BrokerProcess, broker_processes, eventually
from tests.harness.cpp import start_cpp
from tests.interop.helpers import produce

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    with broker_processes(tmp_path_factory.mktemp("cpp-to-py")) as found:
        yield found


async def test_a_cpp_producers_messages_reach_an_apogee_consumer_whole(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    tagged = await produce(
        namesrv,
        "CppToPy",
        6,
        tags="TagA",
        keys="key-{i} shared",
        properties={"ua": "v-{i}", "trace": "on"},
    )
    await produce(namesrv, "CppToPy", 3, tags="TagB", body="skipped-{i}")
    big = await produce(  # the C++ client compresses bodies over 4 KiB
        namesrv, "CppToPy", 2, tags="TagA", body_size=9000, compress_over=4096
    )
    got: dict[str, ReceivedMessage] = {}
    consumer = PushConsumer(
        "py_cg_cpp",
        namesrv=namesrv,
        consume_from="first",
        listener=lambda m: got.setdefault(m.client_msg_id, m),
    )
    consumer.subscribe("CppToPy", "TagA")
    async with consumer:
        await eventually(lambda: _count(got, 8), timeout_s=20)
        await asyncio.sleep(0.3)  # the TagB messages never come
    assert len(got) == 8
    for i, line in enumerate(tagged.sent):
        msg = got[str(line["msg_id"])]
        assert (msg.topic, msg.tags, msg.keys) == ("CppToPy", "TagA", f"key-{i} shared")
        assert msg.body == f"message-{i}".encode()
        assert (msg.properties["ua"], msg.properties["trace"]) == (f"v-{i}", "on")
    for i, line in enumerate(big.sent):
        msg = got[str(line["msg_id"])]
        filler = f"{i}:" + "abcdefghijklmnopqrstuvwxyz0123456789" * 251  # the driver's body
        assert msg.body == filler.encode()[:9000]
        assert msg.body_size < 9000  # stored compressed by the C++ client, inflated here


async def _count(got: dict[str, ReceivedMessage], n: int) -> bool:
    return len(got) >= n


async def test_cpp_and_apogee_consumers_share_one_groups_queues(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    group = "mixed_group"
    await produce(namesrv, "Mixed", 4, body="warm-up-{i}")  # the topic exists first
    cpp = await start_cpp(
        {
            "action": "push_consume",
            "namesrv": namesrv,
            "topic": "Mixed",
            "group": group,
            "model": "clustering",
            "run_s": 40,
        },
        timeout_s=50,
    )
    got: list[ReceivedMessage] = []
    try:
        assert await cpp.wait_event("started", 10), (await cpp.stop()).describe()
        async with PushConsumer(
            group, namesrv=namesrv, listener=got.append, rebalance_interval=1.0
        ) as consumer:
            consumer.subscribe("Mixed")

            async def both_read() -> bool:  # each side has queues of the topic
                mine = {mq.queue_id for mq in consumer.assignment() if mq.topic == "Mixed"}
                return 0 < len(mine) < 4

            await eventually(both_read, timeout_s=20)
            await asyncio.sleep(1.5)  # the C++ consumer rebalances on the broker's notice
            async with Producer("py_mixed_pg", namesrv=namesrv) as producer:
                for i in range(40):
                    await producer.send(Message("Mixed", b"late-%d" % i))

            def late(bodies: set[str]) -> set[str]:
                return {b for b in bodies if b.startswith("late-")}

            async def all_read() -> bool:
                theirs = late({str(line["body"]) for line in cpp.events("message")})
                ours = late({m.body.decode() for m in got})
                return len(theirs | ours) == 40

            await eventually(all_read, timeout_s=20)
    finally:
        run = await cpp.stop()
    theirs = [line for line in run.messages if str(line["body"]).startswith("late-")]
    ours = [m for m in got if m.body.startswith(b"late-")]
    assert theirs and ours, run.describe()
    assert len(theirs) + len(ours) == 40  # each message once
    assert not {int(str(t["queue_id"])) for t in theirs} & {m.queue_id for m in ours}
