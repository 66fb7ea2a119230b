"""Offsets a read was planned with but the broker no longer has: fail, or skip with a warning."""

from __future__ import annotations

import pytest

from apogee.model.message import Message
from apogee.spark._io import Cluster
from apogee.spark.options import parse_source
from apogee.spark.reading import DataLossError, QueueRange, read_range
from tests.spark.helpers import SparkCluster


def test_a_range_the_broker_does_not_have_fails_or_is_skipped(
    cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 1)
    cluster.produce([(Message(topic_name, f"m{i}".encode()), 0) for i in range(5)])
    queue = Cluster.of(cluster.namesrv).queues(topic_name)[0]
    # planned when the queue held 12 messages (it was deleted and made again since)
    gone = QueueRange(queue, 3, 12)
    strict = parse_source({"namesrv": cluster.namesrv, "topics": topic_name}, streaming=False)
    lenient = parse_source(
        {"namesrv": cluster.namesrv, "topics": topic_name, "failOnDataLoss": "false"},
        streaming=False,
    )

    with pytest.raises(DataLossError, match="failOnDataLoss=false"):
        list(read_range(gone, strict))
    rows = [r for b in read_range(gone, lenient) for r in b.to_pylist()]
    assert [r["body"] for r in rows] == [b"m3", b"m4"]  # what is there is read, the rest skipped
