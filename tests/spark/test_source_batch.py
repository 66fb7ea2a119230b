"""Batch reads through the ``rocketmq`` source against a real broker process."""

from __future__ import annotations

import time
from typing import Any

import pytest

from apogee.model.message import Message
from tests.spark.helpers import SparkCluster

COLUMNS = [
    "topic",
    "brokerName",
    "queueId",
    "queueOffset",
    "msgId",
    "tags",
    "keys",
    "body",
    "properties",
    "bornTimestamp",
    "storeTimestamp",
    "reconsumeTimes",
]
COLORS = ("red", "green", "blue")


def body_of(topic: str, i: int) -> bytes:
    # NUL bytes inside and at both ends: the body must come back byte for byte
    return b"\x00" + f"{topic}#{i}".encode() + b"\x00\xff\x00" + bytes(range(8)) + b"\x00"


def load(spark: Any, cluster: SparkCluster, **options: str) -> Any:
    reader = spark.read.format("rocketmq").option("namesrv", cluster.namesrv)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def fill(cluster: SparkCluster, topics: list[str], per_topic: int) -> dict[bytes, Message]:
    sent: dict[bytes, Message] = {}
    batch: list[tuple[Message, int]] = []
    for topic in topics:
        cluster.create_topic(topic, 4)
        for i in range(per_topic):
            props = {"TAGS": COLORS[i % 3], "KEYS": f"k{i} order-{i}", "shop": f"s{i % 5}"}
            msg = Message(topic, body_of(topic, i), properties=props)
            sent[msg.body] = msg
            batch.append((msg, i % 4))
    cluster.produce(batch)
    return sent


def test_batch_read_returns_every_message_of_two_topics_once_with_all_columns(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    topics = [f"{topic_name}a", f"{topic_name}b"]
    before = int(time.time() * 1000) - 1000
    sent = fill(cluster, topics, 60)

    df = load(spark, cluster, topics=",".join(topics))
    rows = df.collect()

    assert df.columns == COLUMNS
    assert len(rows) == len(sent) == 120
    assert {bytes(r.body) for r in rows} == set(sent)  # binary bodies with NULs intact
    assert len({(r.topic, r.queueId, r.queueOffset) for r in rows}) == 120
    assert {(r.topic, r.queueId) for r in rows} == {(t, q) for t in topics for q in range(4)}
    for r in rows:
        msg = sent[bytes(r.body)]
        assert r.topic == msg.topic
        assert r.brokerName == "broker-a"
        assert r.tags == msg.properties["TAGS"]
        assert r.keys == msg.properties["KEYS"]
        assert r.msgId == msg.properties["UNIQ_KEY"]
        assert r.properties["shop"] == msg.properties["shop"]
        assert "TAGS" not in r.properties and "UNIQ_KEY" not in r.properties
        assert r.reconsumeTimes == 0
        assert r.bornTimestamp.timestamp() * 1000 >= before
        assert r.storeTimestamp >= r.bornTimestamp
    # queue offsets run 0..14 in every queue
    per_queue: dict[tuple[str, int], list[int]] = {}
    for r in rows:
        per_queue.setdefault((r.topic, r.queueId), []).append(r.queueOffset)
    assert all(sorted(v) == list(range(15)) for v in per_queue.values())


def test_a_schema_given_to_the_reader_reads_only_its_columns(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    sent = fill(cluster, [topic_name], 20)
    reader = spark.read.format("rocketmq").option("namesrv", cluster.namesrv)
    reader = reader.option("topics", topic_name)

    rows = reader.schema("queueOffset long, body binary, tags string").load().collect()

    assert [list(r.asDict()) for r in rows[:1]] == [["queueOffset", "body", "tags"]]
    assert sorted((bytes(r.body), r.tags) for r in rows) == sorted(
        (b, m.properties["TAGS"]) for b, m in sent.items()
    )
    assert sorted(r.queueOffset for r in rows) == sorted(list(range(5)) * 4)
    with pytest.raises(Exception, match="column 'value' is not one the rocketmq source reads"):
        reader.schema("value binary").load().collect()


def test_a_tags_filter_goes_to_the_broker_and_fewer_messages_leave_it(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    sent = fill(cluster, [topic_name], 90)
    red = {b for b, m in sent.items() if m.properties["TAGS"] == "red"}

    def transferred(action: Any) -> tuple[Any, int]:
        before = int(cluster.runtime()["msgGetTotalTodayNow"])
        result = action()
        return result, int(cluster.runtime()["msgGetTotalTodayNow"]) - before

    everything, all_moved = transferred(lambda: load(spark, cluster, topics=topic_name).count())
    filtered, red_moved = transferred(
        lambda: load(spark, cluster, topics=topic_name).where("tags = 'red'").collect()
    )
    by_option, option_moved = transferred(
        lambda: load(spark, cluster, topics=topic_name, tags="red || blue").collect()
    )
    in_list = load(spark, cluster, topics=topic_name).where("tags IN ('green', 'blue')").count()

    assert everything == 90
    assert {bytes(r.body) for r in filtered} == red
    assert all_moved >= 90
    assert red_moved == len(red) == 30  # the broker sent only the red ones
    assert {r.tags for r in by_option} == {"red", "blue"} and len(by_option) == 60
    assert option_moved == 60
    assert in_list == 60


def test_starting_and_ending_offsets_select_exactly_their_rows(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    fill(cluster, [topic_name], 40)  # 10 per queue, offsets 0..9
    start = f'{{"{topic_name}": {{"broker-a": {{"0": 3, "1": -2, "2": 9}}}}}}'
    end = f'{{"{topic_name}": {{"broker-a": {{"0": 5, "2": -1, "3": 4}}}}}}'

    rows = load(
        spark, cluster, topics=topic_name, startingOffsets=start, endingOffsets=end
    ).collect()

    got = sorted((r.queueId, r.queueOffset) for r in rows)
    want = sorted(
        [(0, o) for o in range(3, 5)]
        + [(1, o) for o in range(10)]  # earliest .. latest (not named at the end)
        + [(2, 9)]
        + [(3, o) for o in range(4)]  # earliest (not named at the start) .. 4
    )
    assert got == want


def test_starting_and_ending_timestamps_split_the_topic_where_the_time_falls(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 4)
    early = [(Message(topic_name, f"early{i}".encode()), i % 4) for i in range(12)]
    late = [(Message(topic_name, f"late{i}".encode()), i % 4) for i in range(12)]
    cluster.produce(early)
    time.sleep(0.3)
    cluster.produce(late)
    stored = {bytes(m.body): m.store_timestamp for m in cluster.read(topic_name)}
    boundary = min(t for b, t in stored.items() if b.startswith(b"late"))
    assert max(t for b, t in stored.items() if b.startswith(b"early")) < boundary

    after = load(spark, cluster, topics=topic_name, startingTimestamp=str(boundary)).collect()
    before = load(spark, cluster, topics=topic_name, endingTimestamp=str(boundary)).collect()

    assert sorted(bytes(r.body) for r in after) == sorted(m.body for m, _ in late)
    assert sorted(bytes(r.body) for r in before) == sorted(m.body for m, _ in early)


def test_min_partitions_splits_queues_and_a_pattern_finds_topics(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    fill(cluster, [f"{topic_name}x", f"{topic_name}y"], 40)

    df = load(spark, cluster, topicPattern=f"{topic_name}[xy]", minPartitions="20")
    rows = df.collect()

    assert df.rdd.getNumPartitions() >= 16
    assert len(rows) == 80
    assert len({(r.topic, r.queueId, r.queueOffset) for r in rows}) == 80


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topics": "a", "topicPattern": "a.*"}, "exactly one of the options"),
        ({"topics": "a", "startingOffsets": "latest"}, "cannot be 'latest' for a batch"),
        ({"topics": "a", "startingOffsets": "{nope"}, "startingOffsets"),
        ({"topics": "a", "maxOffsetsPerTrigger": "10"}, "for streaming reads only"),
        ({"topics": "a", "pullBatchSize": "-3"}, "pullBatchSize"),
        (
            {"topics": "a", "subscribe": "b"},
            "unknown source option(s) of format 'rocketmq': subscribe",
        ),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    spark: Any, cluster: SparkCluster, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception) as caught:
        load(spark, cluster, **options).count()
    assert message in str(caught.value)
