"""The official C++ push consumer, subscribed by tag, gets a delayed message when it is due.

Its pulls park for 15 s. The broker's periodic re-check of parked pulls is pushed out of
reach (``pullHoldCheckIntervalMs``), so only the delivery's arrival notice can wake a parked
pull: a message that waited for the hold to end would arrive about 15 s late.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from apogee.testing.cluster import BrokerProcess, broker_processes
from tests.harness.cpp import Line, start_cpp
from tests.interop.helpers import produce

pytestmark = pytest.mark.interop

#: level 1 is one second; the C++ client parks its pulls for 15 s
LEVELS = "1s 2s " + " ".join(["1s"] * 16)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    properties = {"messageDelayLevel": LEVELS, "pullHoldCheckIntervalMs": "600000"}
    with broker_processes(tmp_path_factory.mktemp("cpp-delay-arrival"), properties) as found:
        yield found


def late(lines: list[Line]) -> list[Line]:
    return [x for x in lines if x.get("event") == "message" and str(x["body"]).startswith("late")]


@pytest.mark.parametrize("expression", ["TagA || TagB", "TagA"])
async def test_a_parked_tag_consumer_gets_a_delayed_message_when_due(
    cluster: tuple[str, BrokerProcess], expression: str
) -> None:
    namesrv, _ = cluster
    topic = "DelayArrival" + str(len(expression))
    await produce(namesrv, topic, 4, tags="TagC", body="warm-{i}")  # the topic exists first
    consumer = await start_cpp(
        {"action": "push_consume", "namesrv": namesrv, "topic": topic, "group": f"cg_{topic}",
         "expression": expression, "run_s": 40},
        timeout_s=50,
    )  # fmt: skip
    try:
        assert await consumer.wait_event("started", 10), (await consumer.stop()).describe()
        await asyncio.sleep(3)  # its pulls find nothing of TagA and park
        await produce(namesrv, topic, 4, tags="TagA", delay_level=1, body="late-{i}")
        await produce(namesrv, topic, 4, tags="TagC", body="other-{i}")  # wakes nobody
        await consumer.wait_for(lambda lines: len(late(lines)) >= 4, 30)
    finally:
        run = await consumer.stop()
    got = late(run.lines)
    assert sorted(str(x["body"]) for x in got) == [f"late-{i}" for i in range(4)], run.describe()
    for line in got:
        waited_ms = int(str(line["received_ms"])) - int(str(line["born_timestamp"]))
        # its one-second delay, not the 15 s hold of a parked pull
        assert 1000 <= waited_ms < 8000, line
    assert not [x for x in run.lines if x.get("event") == "message" and x["tags"] == "TagC"]
