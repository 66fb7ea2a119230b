"""How the exactly-once sink's half messages travel, outside Spark (``Cluster.send_halves``
and ``Cluster.send_packed_halves``).

Against the test cluster's real broker: a batch per queue, one transaction
each, and, when a broker
refuses a batch of half messages with MESSAGE_ILLEGAL (as RocketMQ's brokers
refuse every one), the same messages one per request, and that broker gets
no batch of half messages again.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from apogee.client.transaction import LocalTransactionState
from apogee.model.message import PROPERTY_REAL_TOPIC, Message
from apogee.model.message_codec import decode_batch
from apogee.model.topic import TRANS_HALF_TOPIC
from apogee.spark._io import Cluster
from apogee.spark.columnar import Router, plan_sends
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
        refs = io.send_halves(batched, GROUP, 4, {"RUN": "batched"}).result(30)

        # five rows per queue, up to four per batch: four transactions, in send order
        assert len({r[2] for r in refs}) == 4
        assert io._single_halves == set()
        # a message that sets a property the broker writes for a whole batch gets the
        # batch refused: the rows go again one per request, and so does every later row
        odd = Message(topic_name, body % 10, properties={PROPERTY_REAL_TOPIC: topic_name})
        singles = [(queues[0], odd)] + [(queues[i % 2], Message(topic_name, body % i))
                                        for i in range(11, 14)]  # fmt: skip
        single_refs = io.send_halves(singles, GROUP, 4, {"RUN": "single"}).result(30)
        # queue 0's batch (odd, 12) was refused and went again as two; queue 1's (11, 13)
        # was already on its way, all batches go out at once, and it was taken
        assert len(single_refs) == 3
        assert io._single_halves == {cluster.broker}

        io.end_transactions(refs + single_refs, GROUP, LocalTransactionState.COMMIT_MESSAGE)
        expected = [body % i for i in range(14)]
        got = cluster.read(topic_name, 2)
        assert Counter(m.body for m in got) == Counter(expected)
        assert {m.body: m.properties["RUN"] for m in got} == {
            b: "batched" if i < 10 else "single" for i, b in enumerate(expected)
        }
        for q in range(2):  # each queue's rows in the order they were handed over
            handed = [m.body for qr, m in batched + singles if qr.queue_id == q]
            mine = [m.body for m in sorted(got, key=lambda m: m.queue_offset) if m.queue_id == q]
            assert mine == handed
        # the half queue is shared with other tests: this test's rows are its topic's
        halves = cluster.read(TRANS_HALF_TOPIC, 1)
        ours = [m for m in halves if m.properties.get("REAL_TOPIC") == topic_name]
        batched_halves = [m for m in ours if "APOGEE_HALF_BATCH" in m.properties]
        in_batches = [bytes(i.body) for m in batched_halves for i in decode_batch(m.body)]
        assert Counter(in_batches) == Counter([*expected[:10], body % 11, body % 13])
        # nothing of the refused batch was stored
        assert sorted(m.body for m in ours if m not in batched_halves) == [body % 10, body % 12]
    finally:
        io.close()


def test_packed_half_batches_commit_whole_and_go_singly_to_a_broker_refusing_batches(
    cluster: SparkCluster, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 2)
    io = Cluster(cluster.namesrv)
    try:
        router = Router(lambda t: io.queues(t, for_write=True), 0)
        rows = pa.RecordBatch.from_pydict(
            {"body": [b"row\x00%d" % i for i in range(10)], "tags": ["a", "b"] * 5}
        )
        sends = plan_sends(rows, topic_name, router, 4)  # runs of 4: queues 0, 1, 0
        refs = io.send_packed_halves(sends, GROUP, {"RUN": "batched"}).result(30)
        assert len(refs) == len(sends) == 3  # one transaction per send
        # a broker known to refuse batches of half messages (as RocketMQ's do) gets the
        # rows of each send one per request, decoded from the body written for it
        io._single_halves.add(cluster.broker)
        more = plan_sends(rows.slice(0, 3), topic_name, router, 4)
        single_refs = io.send_packed_halves(more, GROUP, {"RUN": "single"}).result(30)
        assert len(single_refs) == 3

        io.end_transactions(refs + single_refs, GROUP, LocalTransactionState.COMMIT_MESSAGE)
        got = cluster.read(topic_name, 2)
        bodies = [b"row\x00%d" % i for i in range(10)]
        assert Counter(m.body for m in got) == Counter(bodies + bodies[:3])
        for m in got:  # tags from the column
            assert m.tags == ("a" if int(m.body[4:]) % 2 == 0 else "b")
        # runs of 4 rows from turn 0: rows 0-3 and 8-9 to queue 0, 4-7 to queue 1, and
        # the three more rows, the next turn's, to queue 1 too
        in_order = sorted(got, key=lambda m: (m.queue_id, m.queue_offset))
        assert [(m.queue_id, int(m.body[4:]), m.properties["RUN"]) for m in in_order] == [
            *((0, i, "batched") for i in (0, 1, 2, 3, 8, 9)),
            *((1, i, "batched") for i in (4, 5, 6, 7)),
            *((1, i, "single") for i in (0, 1, 2)),
        ]
    finally:
        io.close()
