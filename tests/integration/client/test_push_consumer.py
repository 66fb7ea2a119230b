"""The PushConsumer against a real name server and broker on 127.0.0.1 (in-process).

What the Producer sends comes back whole (bodies byte for byte, tags, keys, properties);
filters, starting points, retries and the dead-letter queue, broadcasting, the offset a
group commits, orderly suspension, and pulls that follow the broker's suggestion.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from apogee.broker.broker import Broker
from apogee.client import ConsumeStatus, Message, Producer, PushConsumer, ReceivedMessage
from apogee.errors import ClientError
from apogee.model.client import MessageQueue
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.topic import TopicConfig
from apogee.store.config import BrokerRole
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.reading import read_queue
from tests.integration.client.helpers import committed_offset

Cluster = tuple[str, Broker]
TEXT = b"compressible text, repeated. " * 400  # 11,600 bytes: sent compressed


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    """A name server and a broker that also evaluates SQL92 subscriptions."""
    async with run_namesrv(tmp_path / "ns") as ns:
        addr = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "store", addr, enable_property_filter=True) as broker:
            yield addr, broker


async def send_all(namesrv: str, msgs: list[Message], **options: object) -> None:
    async with Producer("pg", namesrv=namesrv) as producer:
        for msg in msgs:
            await producer.send(msg, **options)  # type: ignore[arg-type]


async def wait_for(check: object, timeout_s: float = 10.0) -> None:
    async def holds() -> bool:
        return bool(check())  # type: ignore[operator]

    await eventually(holds, timeout_s)


async def test_a_listener_gets_bodies_tags_keys_and_properties_whole(cluster: Cluster) -> None:
    namesrv, _ = cluster
    binary = bytes(range(256)) * 4 + b"\x00\x00end\x00"
    noise = os.urandom(6000)
    bodies = {"bin": binary, "big": TEXT, "noise": noise, "skip": b"not wanted"}
    await send_all(
        namesrv,
        [
            Message("Round", body, tags=tag, keys=[f"k-{tag}", "shared"], properties={"ua": tag})
            for tag, body in bodies.items()
        ],
    )
    got: dict[str, ReceivedMessage] = {}

    def keep(msg: ReceivedMessage) -> None:
        got[msg.tags or ""] = msg

    consumer = PushConsumer("cg", namesrv=namesrv, consume_from="first", listener=keep)
    consumer.subscribe("Round", "bin || big || noise")
    async with consumer:
        await wait_for(lambda: len(got) == 3)
        await asyncio.sleep(0.2)  # nothing else comes: "skip" is filtered out
    assert sorted(got) == ["big", "bin", "noise"]
    for tag, msg in got.items():
        assert msg.body == bodies[tag] and bytes(msg.body_view) == bodies[tag]
        assert (msg.topic, msg.keys, msg.properties["ua"]) == ("Round", f"k-{tag} shared", tag)
        assert msg.uniq_key is not None and msg.client_msg_id == msg.uniq_key
    assert got["big"].body_size < len(TEXT)  # it travelled compressed


async def test_async_for_commits_what_the_loop_finished(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("Iter", "broker-a", 0)
    await send_all(namesrv, [Message("Iter", b"m%d" % i) for i in range(4)], queue=queue)

    seen: list[bytes] = []
    with pytest.raises(RuntimeError, match="boom"):
        async with PushConsumer("cg-iter", namesrv=namesrv, consume_from="first") as consumer:
            consumer.subscribe("Iter")
            async for msg in consumer:
                seen.append(msg.body)
                if msg.body == b"m2":
                    raise RuntimeError("boom")  # m2 not done: the group must see it again
    assert seen == [b"m0", b"m1", b"m2"]
    assert await committed_offset(namesrv, "cg-iter", queue) == 2

    again: list[bytes] = []
    async with PushConsumer("cg-iter", namesrv=namesrv) as consumer:
        consumer.subscribe("Iter")
        async for msg in consumer:
            again.append(msg.body)
            if len(again) == 2:
                break
    assert again == [b"m2", b"m3"]
    assert await committed_offset(namesrv, "cg-iter", queue) == 4


async def test_sql92_subscriptions_select_by_property(cluster: Cluster) -> None:
    namesrv, _ = cluster
    await send_all(
        namesrv,
        [Message("Sql", b"%d" % i, properties={"amount": str(i * 10)}) for i in range(10)],
    )
    got: list[int] = []
    async with PushConsumer(
        "cg-sql", namesrv=namesrv, consume_from="first", listener=lambda m: got.append(int(m.body))
    ) as consumer:
        consumer.subscribe("Sql", sql="amount >= 50 AND amount < 80")
        await wait_for(lambda: len(got) == 3)
        await asyncio.sleep(0.2)
    assert sorted(got) == [5, 6, 7]


async def test_a_subscription_whose_header_has_no_pieces_pulls_by_command(
    cluster: Cluster,
) -> None:
    # The tag text "\u0000" (backslash, u, digits) is what stands for a value in
    # PullPieces: its pulls go out as commands, and are filtered all the same.
    namesrv, _ = cluster
    tag = "odd\\u0000tag"
    await send_all(
        namesrv, [Message("Odd", b"%d" % i, tags=tag if i % 2 else "x") for i in range(6)]
    )
    got: list[int] = []
    async with PushConsumer(
        "cg-odd", namesrv=namesrv, consume_from="first", listener=lambda m: got.append(int(m.body))
    ) as consumer:
        consumer.subscribe("Odd", tag)
        await wait_for(lambda: len(got) == 3)
        await asyncio.sleep(0.2)
    assert sorted(got) == [1, 3, 5]


async def test_where_a_new_group_starts(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("From", "broker-a", 0)
    await send_all(namesrv, [Message("From", b"old-%d" % i) for i in range(3)], queue=queue)
    await asyncio.sleep(0.3)
    boundary = time.time()  # the nearest message stored is new-0 (search by time: nearest)
    await send_all(namesrv, [Message("From", b"new-%d" % i) for i in range(2)], queue=queue)

    async def first_bodies(group: str, **options: object) -> list[bytes]:
        async with PushConsumer(group, namesrv=namesrv, **options) as consumer:  # type: ignore[arg-type]
            consumer.subscribe("From")
            out = []
            async for msg in consumer:
                out.append(msg.body)
                if msg.body == b"new-1":
                    return out
        return out

    assert await first_bodies("cg-first", consume_from="first") == [
        b"old-0", b"old-1", b"old-2", b"new-0", b"new-1"
    ]  # fmt: skip
    timed = await first_bodies("cg-time", consume_from="timestamp", consume_timestamp=boundary)
    assert timed == [b"new-0", b"new-1"]

    last: list[bytes] = []
    async with PushConsumer(
        "cg-last", namesrv=namesrv, listener=lambda m: last.append(m.body)
    ) as c:
        c.subscribe("From")
        await wait_for(c.assignment)
        await asyncio.sleep(0.1)
        await send_all(namesrv, [Message("From", b"latest")], queue=queue)
        await wait_for(lambda: last)
    assert last == [b"latest"]


async def test_failures_are_retried_then_dead_lettered(cluster: Cluster) -> None:
    namesrv, broker = cluster
    await send_all(namesrv, [Message("Flaky", b"always"), Message("Flaky", b"once")])
    tries: Counter[bytes] = Counter()
    reconsumes: dict[bytes, list[int]] = {}

    def listener(msg: ReceivedMessage) -> ConsumeStatus | None:
        tries[msg.body] += 1
        reconsumes.setdefault(msg.body, []).append(msg.reconsume_times)
        assert msg.topic == "Flaky"  # retried messages get their topic back
        if msg.body == b"always":
            raise ValueError("cannot handle this one")
        return ConsumeStatus.RECONSUME_LATER if tries[msg.body] == 1 else None

    async with PushConsumer(
        "cg-retry",
        namesrv=namesrv,
        consume_from="first",
        listener=listener,
        max_reconsume_times=2,
        retry_delay_level=1,  # 1 s
    ) as consumer:
        consumer.subscribe("Flaky")
        api = consumer.instance.broker_api

        async def dead() -> list[bytes]:
            return [m.body for m in await read_queue(api, broker.address, "%DLQ%cg-retry", 0)]

        await eventually(dead, timeout_s=20)
        await wait_for(lambda: tries[b"once"] == 2)
        assert await dead() == [b"always"]
    assert (tries[b"always"], reconsumes[b"always"]) == (3, [0, 1, 2])
    assert reconsumes[b"once"] == [0, 1]


async def test_broadcasting_delivers_everything_to_every_consumer(
    cluster: Cluster, tmp_path: Path
) -> None:
    namesrv, _ = cluster
    await send_all(namesrv, [Message("News", b"n%d" % i) for i in range(12)])
    got: dict[str, list[bytes]] = {"a": [], "b": []}
    consumers = [
        PushConsumer(
            "cg-bc",
            namesrv=namesrv,
            message_model="broadcasting",
            consume_from="first",
            listener=lambda m, name=name: got[name].append(m.body),  # type: ignore[misc]
            instance_name=f"bc-{name}",
            offset_dir=tmp_path / "offsets",
        )
        for name in got
    ]
    for consumer in consumers:
        consumer.subscribe("News")
        await consumer.start()
    await wait_for(lambda: all(len(v) == 12 for v in got.values()))
    ids = [c.instance.client_id for c in consumers]
    for consumer in consumers:
        assert len(consumer.assignment()) == 4  # every queue, no retry topic
        await consumer.close()
    for name, client_id in zip(got, ids, strict=True):
        assert sorted(got[name]) == sorted(b"n%d" % i for i in range(12))
        table = orjson.loads(
            (tmp_path / "offsets" / client_id / "cg-bc" / "offsets.json").read_bytes()
        )
        assert sum(table["offsetTable"].values()) == 12


async def test_the_committed_offset_is_the_lowest_still_in_process(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("Slow", "broker-a", 0)
    await send_all(namesrv, [Message("Slow", b"%d" % i) for i in range(5)], queue=queue)
    release = asyncio.Event()
    done: list[int] = []

    async def listener(msg: ReceivedMessage) -> None:
        if msg.queue_offset == 1:
            await release.wait()
        done.append(msg.queue_offset)

    async with PushConsumer(
        "cg-slow", namesrv=namesrv, consume_from="first", listener=listener
    ) as consumer:
        consumer.subscribe("Slow")
        await wait_for(lambda: len(done) == 4)
        assert consumer.offsets.get(queue) == 1  # 0, 2, 3, 4 done; 1 still in process
        release.set()
        await wait_for(lambda: consumer.offsets.get(queue) == 5)


async def test_an_orderly_queue_retries_in_place_then_dead_letters(cluster: Cluster) -> None:
    namesrv, broker = cluster
    queue = MessageQueue("Steps", "broker-a", 2)
    await send_all(namesrv, [Message("Steps", b"s%d" % i) for i in range(5)], queue=queue)
    seen: list[bytes] = []

    def listener(msg: ReceivedMessage) -> ConsumeStatus | None:
        seen.append(msg.body)
        if msg.body == b"s1" and seen.count(b"s1") == 1:
            return ConsumeStatus.RECONSUME_LATER  # suspended, then handed over again
        if msg.body == b"s3":
            raise ValueError("never works")
        return None

    async with PushConsumer(
        "cg-order",
        namesrv=namesrv,
        consume_from="first",
        orderly=True,
        listener=listener,
        suspend_time=0.05,
        max_reconsume_times=1,
    ) as consumer:
        consumer.subscribe("Steps")
        await wait_for(lambda: b"s4" in seen)
        api = consumer.instance.broker_api
        dead = await read_queue(api, broker.address, "%DLQ%cg-order", 0)
    # nothing after s1 or s3 before they are done; s3 gives up after 1 + 1 tries
    assert seen == [b"s0", b"s1", b"s1", b"s2", b"s3", b"s3", b"s4"]
    assert [m.body for m in dead] == [b"s3"]


async def test_pulls_follow_the_suggested_broker(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path / "ns") as ns:
        namesrv = f"127.0.0.1:{ns.port}"
        async with (
            run_broker(tmp_path / "master", namesrv, slave_read_enable=True) as master,
            run_broker(
                tmp_path / "slave",
                namesrv,
                broker_id=1,
                slave_read_enable=True,
                store={"broker_role": BrokerRole.SLAVE},
            ) as slave,
            Producer("pg", namesrv=namesrv) as producer,
        ):
            api = producer.instance.broker_api
            # (without replication the slave does not have the topic: its answers are
            # errors, after which the consumer goes back to the master)
            await api.create_topic(master.address, TopicConfig("Far", 1, 1))
            # the group reads from broker id 1 when it is not lagging (SubscriptionGroupConfig)
            await api.update_subscription_group(
                master.address, SubscriptionGroupConfig("cg-far", broker_id=1)
            )
            routes = producer.instance.routes

            async def routed() -> bool:
                await routes.refresh("Far")
                return len(routes.broker_addrs("broker-a")) == 2

            await eventually(routed)
            for i in range(5):
                await producer.send(Message("Far", b"%d" % i))
            got: list[bytes] = []
            async with PushConsumer(
                "cg-far",
                namesrv=namesrv,
                consume_from="first",
                listener=lambda m: got.append(m.body),
            ) as consumer:
                consumer.subscribe("Far")
                await wait_for(lambda: len(got) == 5 and consumer.fetchers)
                [fetcher] = [f for mq, f in consumer.fetchers.items() if mq.topic == "Far"]
                await wait_for(lambda: fetcher.pulled_from.get(slave.address, 0) > 0)
            assert fetcher.pulled_from[master.address] >= 1


async def test_bad_use_is_refused_clearly(cluster: Cluster) -> None:
    namesrv, _ = cluster
    consumer = PushConsumer("cg-bad", namesrv=namesrv, listener=print)
    with pytest.raises(ClientError, match="listener"):
        consumer.__aiter__()
    with pytest.raises(ClientError, match="callable"):
        PushConsumer("cg-bad", namesrv=namesrv, listener=42)  # type: ignore[arg-type]
    with pytest.raises(ClientError, match="retry topic"):
        consumer.subscribe("%RETRY%cg-bad")


async def test_async_for_hands_failures_back_in_both_modes(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("Again", "broker-a", 3)
    await send_all(namesrv, [Message("Again", b"a%d" % i) for i in range(3)], queue=queue)

    seen: list[bytes] = []
    async with PushConsumer(
        "cg-again-o", namesrv=namesrv, consume_from="first", orderly=True, suspend_time=0.05
    ) as consumer:
        consumer.subscribe("Again")
        async for msg in consumer:
            seen.append(msg.body)
            if msg.body == b"a1" and seen.count(b"a1") == 1:
                await consumer.reconsume_later(msg)  # handed over again before a2
            if msg.body == b"a2":
                break
    assert seen == [b"a0", b"a1", b"a1", b"a2"]

    async with PushConsumer(
        "cg-again-c", namesrv=namesrv, consume_from="first", retry_delay_level=1
    ) as consumer:
        consumer.subscribe("Again")
        retried: list[tuple[bytes, int]] = []
        async for msg in consumer:
            retried.append((msg.body, msg.reconsume_times))
            if msg.body == b"a1" and msg.reconsume_times == 0:
                await consumer.reconsume_later(msg)  # back to the broker, again in 1 s
                with pytest.raises(ValueError, match="gave last"):
                    await consumer.reconsume_later(msg)
            if (b"a1", 1) in retried:
                break
    assert retried[:3] == [(b"a0", 0), (b"a1", 0), (b"a2", 0)] and retried[-1] == (b"a1", 1)
    assert await committed_offset(namesrv, "cg-again-c", queue) == 3


async def test_running_info_and_an_offset_reset(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("Reset", "broker-a", 0)
    await send_all(namesrv, [Message("Reset", b"r%d" % i) for i in range(4)], queue=queue)
    got: list[bytes] = []
    async with PushConsumer(
        "cg-reset", namesrv=namesrv, consume_from="first", listener=lambda m: got.append(m.body)
    ) as consumer:
        consumer.subscribe("Reset", "*")
        await wait_for(lambda: len(got) == 4 and len(consumer.assignment()) == 5)
        info = consumer.running_info()
        orjson.dumps(info, default=str)  # the answer's body
        assert info["properties"]["consumeType"] == "CONSUME_PASSIVELY"  # type: ignore[index]
        table = info["mqTable"]
        assert isinstance(table, dict) and len(table) == 5
        [row] = [v for k, v in table.items() if '"Reset"' in k and '"queueId":0' in k]
        assert row["commitOffset"] == 4 and row["cachedMsgCount"] == 0
        await consumer.reset_offsets("Reset", {queue: 1})  # what resetOffsetByTime sends
        await wait_for(lambda: len(got) == 7)
    assert got[4:] == [b"r1", b"r2", b"r3"]


async def test_concurrency_limit_and_flow_control(cluster: Cluster) -> None:
    namesrv, _ = cluster
    queue = MessageQueue("Busy", "broker-a", 0)
    await send_all(namesrv, [Message("Busy", b"%d" % i) for i in range(150)], queue=queue)
    running = 0
    most = 0
    release = asyncio.Event()
    done: list[int] = []

    async def listener(msg: ReceivedMessage) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        done.append(msg.queue_offset)

    async with PushConsumer(
        "cg-busy",
        namesrv=namesrv,
        consume_from="first",
        listener=listener,
        consume_concurrency=3,
        pull_threshold_for_queue=40,
        pull_batch_size=16,
    ) as consumer:
        consumer.subscribe("Busy")
        await wait_for(lambda: most == 3)
        fetcher = consumer.fetchers[queue]
        await asyncio.sleep(0.3)  # the fetcher stops once more than 40 are held
        assert 40 < fetcher.pq.count <= 40 + 16 and fetcher.next_offset < 150
        assert consumer.offsets.get(queue) == 0
        release.set()
        await wait_for(lambda: len(done) == 150)
        await wait_for(lambda: consumer.offsets.get(queue) == 150)
    assert most == 3 and sorted(done) == list(range(150))


async def test_a_subscription_changed_while_running_applies_at_once(cluster: Cluster) -> None:
    namesrv, _ = cluster
    got: list[bytes] = []
    async with PushConsumer(
        "cg-change", namesrv=namesrv, consume_from="first", listener=lambda m: got.append(m.body)
    ) as consumer:
        consumer.subscribe("Change", "A")
        await send_all(namesrv, [Message("Change", b"a1", tags="A")])
        await wait_for(lambda: got == [b"a1"])
        consumer.subscribe("Change", "B")  # the queues already read pull with "B" from now on
        await send_all(
            namesrv, [Message("Change", b"a2", tags="A"), Message("Change", b"b1", tags="B")]
        )
        await wait_for(lambda: b"b1" in got)
        consumer.unsubscribe("Change")
        await wait_for(
            lambda: not {mq.topic for mq in consumer.assignment()} - {"%RETRY%cg-change"}
        )
    assert got == [b"a1", b"b1"]
