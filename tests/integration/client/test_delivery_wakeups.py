"""A PushConsumer is woken by each arrival, never by a timer.

Send-to-receive latency is only as short as the slowest wake-up on the way: the broker
answers a parked pull when the store dispatches a message into its queue (not at its
periodic check), and the consumer pulls again at once and hands each answer to the
listener as it comes (no batching, no poll interval). Here the broker's periodic check
and the pulls' hold time are far longer than the test, so every message that arrives
came by the arrival path; and each one, sent after the previous one was received, took
exactly one pull answer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from apogee.client import Message, Producer, PushConsumer, ReceivedMessage
from apogee.model.topic import TopicConfig
from apogee.testing.cluster import eventually, run_broker, run_namesrv

NEVER_MS = 600_000  # longer than any test: a path on this timer is never taken


async def test_each_message_is_answered_by_its_arrival_in_one_pull(tmp_path: Path) -> None:
    async with (
        run_namesrv(tmp_path / "ns") as ns,
        run_broker(tmp_path / "store", f"127.0.0.1:{ns.port}",
                   pull_hold_check_interval_ms=NEVER_MS) as broker,
    ):  # fmt: skip
        namesrv = f"127.0.0.1:{ns.port}"
        got: asyncio.Queue[ReceivedMessage] = asyncio.Queue()
        consumer = PushConsumer(
            "cg-wake", namesrv=namesrv, listener=got.put_nowait, consume_from="last",
            pull_suspend=NEVER_MS / 1000,
        )  # fmt: skip
        async with Producer("pg-wake", namesrv=namesrv) as producer:
            await producer.instance.broker_api.create_topic(
                broker.address, TopicConfig("Wake", 2, 2)
            )
            consumer.subscribe("Wake")
            async with consumer:

                async def parked() -> bool:  # its queues (and its retry queue) held
                    return len(consumer.fetchers) == 3 and len(broker.holds) == 3

                await eventually(parked, 20)
                pulls = sum(f.pulls for f in consumer.fetchers.values())
                for n in range(6):
                    await producer.send(Message("Wake", f"m{n}".encode()))
                    # bounded only as a safety net: the timers above would take 600 s
                    msg = await asyncio.wait_for(got.get(), 30)
                    assert msg.body == f"m{n}".encode()
                    # the answer, then the next pull (sent before the listener ran)
                    assert sum(f.pulls for f in consumer.fetchers.values()) == pulls + n + 1
                await eventually(lambda: _async(len(broker.holds) == 3))
                assert got.empty()


async def _async(value: bool) -> bool:
    return value
