"""bench-peers adapter: Apogee through its asyncio client library (apogee.client).

Every workload goes through what an application uses: ``Producer`` for sends (route lookup,
queue choice, UNIQ_KEY, retries) and ``PushConsumer`` for reads (rebalancing, one
long-polling fetcher per queue, offsets committed as messages are done), with a plain
listener that reads each body. Topic creation and the stored count reuse the harness's
``apogee_py`` adapter (BrokerApi).

    BENCH_PEERS_EXTRA=$PWD/benchmarks/peers_extra.py \\
        bash run.sh --systems apogee-client,apogee-py,redis-streams,rabbitmq-stream --skip-phys
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from collections.abc import Callable

from adapters.apogee_py import QUEUES
from adapters.apogee_py import Adapter as BrokerApiAdapter
from adapters.base import BATCH, WINDOW

from apogee.client import Message, Producer, PushConsumer, ReceivedMessage

GROUP = "bench_client_pg"


def consumer_group(role: str) -> str:
    """A group of its own per run: a new group reads from where it is told to."""
    return f"bench_client_{role}_{os.getpid()}_{time.monotonic_ns()}"


class Adapter(BrokerApiAdapter):
    MODES = {
        **BrokerApiAdapter.MODES,
        "produce_batched": (
            f"Producer.send_batch of {BATCH}, {WINDOW // BATCH} batches in flight, "
            f"round-robin over {QUEUES} queues"
        ),
        "produce_sync": "await Producer.send one by one (default retries and timeouts)",
        "consume": (
            f"PushConsumer (consume_from first) with a plain listener reading each body, "
            f"one long-polling fetcher per queue, {QUEUES} queues"
        ),
        "latency": (
            "await Producer.send per message; PushConsumer listener (long polling); "
            "gc.freeze() once the clients are started"
        ),
    }

    async def connect(self) -> None:
        await super().connect()
        self.tail: PushConsumer | None = None
        self.producer = Producer(GROUP, namesrv=self.cfg["namesrv"], send_timeout=10)
        await self.producer.start()
        # As docs/python-client.md advises for latency: what start-up made (modules, the
        # client instance) is never walked by a collection again. Without it the sending
        # process's full collections cost 10-15 ms of CPU each at 2,000 msgs/s.
        gc.freeze()

    async def close(self) -> None:
        if self.tail is not None:
            await self.tail.close()
        await self.producer.close()
        await super().close()

    async def produce_batched(self, topic: str, pool: list[bytes], n: int) -> int:
        size = len(pool)
        slots = asyncio.Semaphore(WINDOW // BATCH)
        send_batch = self.producer.send_batch

        async def one(start: int, end: int) -> int:
            try:
                await send_batch([Message(topic, pool[i % size]) for i in range(start, end)])
                return end - start
            finally:
                slots.release()

        tasks = []
        for start in range(0, n, BATCH):
            await slots.acquire()
            tasks.append(asyncio.ensure_future(one(start, min(n, start + BATCH))))
        return sum(await asyncio.gather(*tasks))

    async def send_sync(self, topic: str, payload: bytes) -> None:
        await self.producer.send(Message(topic, payload))

    async def consume(self, topic: str, n: int, deadline: float) -> tuple[int, int]:
        got = 0
        nbytes = 0
        done = asyncio.Event()

        def listener(msg: ReceivedMessage) -> None:
            nonlocal got, nbytes
            nbytes += len(msg.body)
            got += 1
            if got >= n:
                done.set()

        consumer = PushConsumer(
            consumer_group("consume"),
            namesrv=self.cfg["namesrv"],
            listener=listener,
            consume_from="first",
            instance_name="bench-consume",
        )
        consumer.subscribe(topic)
        await consumer.start()
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                    await done.wait()
        finally:
            await consumer.close()
        return got, nbytes

    async def subscribe_tail(self, topic: str, on_msg: Callable[[bytes], None]) -> None:
        self.tail = PushConsumer(
            consumer_group("tail"),
            namesrv=self.cfg["namesrv"],
            listener=lambda msg: on_msg(msg.body),
            consume_from="last",
            instance_name="bench-tail",
        )
        self.tail.subscribe(topic)
        await self.tail.start()
        gc.freeze()  # and the consumer's start-up too (see connect)
        await asyncio.sleep(0.2)
