"""How the exactly-once sink's half messages travel, outside Spark (``Cluster.send_halves``).

Against the test cluster's real broker: a batch per queue, and, when a broker
refuses a batch of half messages with MESSAGE_ILLEGAL (as RocketMQ's brokers
refuse every one), the same messages one per request, and that broker gets
no batch of half messages again.
"""

from __future__ import annotations

from collections import Counter

from apogee.client.transaction import LocalTransactionState
from apogee.model.message import PROPERTY_REAL_TOPIC, Message
from apogee.model.topic import TRANS_HALF_TOPIC
from apogee.spark._io import Cluster
from tests.spark.helpers import SparkCluster

GROUP = "halves-test"


def test_half_messages_travel_in_batches_and_singly_to_a_broker_refusing_batches(
    cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 2)
    io = Cluster(cluster.namesrv)  # not the shared one: this test changes what it knows
    try:
        queues = io.queues(topic_name, for_write=True)
        body = f"{topic_name}-%d".encode()
        batched = [(queues[i % 2], Message(topic_name, body % i)) for i in range(10)]
        refs = io.send_halves(batched, GROUP, 4).result(30)

        assert len({r[2] for r in refs}) == 10  # each its own place in the half queue
        assert io._single_halves == set()
        # a message that sets a property the broker writes for a whole batch gets the
        # batch refused: the rows go again one per request, and so does every later row
        odd = Message(topic_name, body % 10, properties={PROPERTY_REAL_TOPIC: topic_name})
        singles = [(queues[0], odd)] + [(queues[i % 2], Message(topic_name, body % i))
                                        for i in range(11, 14)]  # fmt: skip
        refs += io.send_halves(singles, GROUP, 4).result(30)
        assert io._single_halves == {cluster.broker}

        io.end_transactions(refs, GROUP, LocalTransactionState.COMMIT_MESSAGE)
        expected = [body % i for i in range(14)]
        assert Counter(m.body for m in cluster.read(topic_name, 2)) == Counter(expected)
        halves = [m for m in cluster.read(TRANS_HALF_TOPIC, 1) if m.body in set(expected)]
        assert len(halves) == len(expected)  # nothing of the refused batch was stored
    finally:
        io.close()
