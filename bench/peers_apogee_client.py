"""bench-peers adapter: Apogee through its asyncio client library (apogee.client.Producer).

The produce workloads go through ``Producer`` (route lookup, queue choice, UNIQ_KEY, retries):
what an application gets. The read side reuses the harness's ``apogee_py`` adapter
(BrokerApi pulls), so both Apogee systems consume the same way.

    BENCH_PEERS_EXTRA=$PWD/bench/peers_extra.py \\
        bash run.sh --systems apogee-client,apogee-py,redis-streams,rabbitmq-stream --skip-phys
"""

from __future__ import annotations

import asyncio

from adapters.apogee_py import QUEUES
from adapters.apogee_py import Adapter as BrokerApiAdapter
from adapters.base import BATCH, WINDOW

from apogee.client import Message, Producer

GROUP = "bench_client_pg"


class Adapter(BrokerApiAdapter):
    MODES = {
        **BrokerApiAdapter.MODES,
        "produce_batched": (
            f"Producer.send_batch of {BATCH}, {WINDOW // BATCH} batches in flight, "
            f"round-robin over {QUEUES} queues"
        ),
        "produce_sync": "await Producer.send one by one (default retries and timeouts)",
        "latency": "await Producer.send per message; consumer long-polls each queue (BrokerApi)",
    }

    async def connect(self) -> None:
        await super().connect()
        self.producer = Producer(GROUP, namesrv=self.cfg["namesrv"], send_timeout=10)
        await self.producer.start()

    async def close(self) -> None:
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
