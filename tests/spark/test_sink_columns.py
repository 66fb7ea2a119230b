"""The sink's per-row destination (``topic`` column) and keys given as an array of strings."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from tests.spark.helpers import SparkCluster

SCHEMA = StructType(
    [
        StructField("body", BinaryType()),
        StructField("topic", StringType()),
        StructField("keys", ArrayType(StringType())),
    ]
)


def write(df: Any, cluster: SparkCluster, **options: str) -> None:
    writer = df.write.format("rocketmq").option("namesrv", cluster.namesrv)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def test_the_topic_column_routes_each_row_and_array_keys_are_space_separated(
    spark: Any, cluster: SparkCluster, topic_name: str
) -> None:
    left, right, override = f"{topic_name}l", f"{topic_name}r", f"{topic_name}o"
    for topic in (left, right, override):
        cluster.create_topic(topic, 2)
    rows: list[tuple[Any, ...]] = [
        (f"row{i}".encode(), left if i % 3 else right, [f"k{i}", f"order-{i}"]) for i in range(60)
    ]
    rows.append((b"no-keys", left, []))
    rows.append((b"null-key", right, ["a", None, "b"]))
    df = spark.createDataFrame(rows, SCHEMA).repartition(2)

    write(df, cluster)

    for topic in (left, right):
        got = {m.body: m for m in cluster.read(topic, 2)}
        want = {r[0]: r for r in rows if r[1] == topic}
        assert set(got) == set(want), topic  # each row in its own topic, once
        assert len(cluster.read(topic, 2)) == len(want)
        for body, (_, _, keys) in want.items():
            expected = " ".join(k for k in keys if k is not None) or None
            assert got[body].keys == expected, body
    assert cluster.read(override, 2) == []

    # the option names the destination of every row, whatever the column says (Kafka's rule)
    write(df, cluster, topic=override)

    assert sorted(m.body for m in cluster.read(override, 2)) == sorted(r[0] for r in rows)
    assert len(cluster.read(left, 2)) + len(cluster.read(right, 2)) == len(rows)
