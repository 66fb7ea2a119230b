"""A slow push consumer to be killed: run as a child process.

``python consumer_child.py NAMESRV GROUP TOPIC`` consumes TOPIC from the first offset in
GROUP, one message at a time, 30 ms each, and persists its offsets every 0.2 s. It prints
``got <queue id> <queue offset> <body>`` as each message is handed to its listener, so the
parent knows what it saw before it was SIGKILLed.
"""

from __future__ import annotations

import asyncio
import sys

from apogee.client import PushConsumer, ReceivedMessage


async def main(namesrv: str, group: str, topic: str) -> None:
    async def slow(msg: ReceivedMessage) -> None:
        print("got", msg.queue_id, msg.queue_offset, msg.body.decode(), flush=True)
        await asyncio.sleep(0.03)

    consumer = PushConsumer(
        group,
        namesrv=namesrv,
        listener=slow,
        consume_from="first",
        consume_concurrency=1,
        persist_offsets_interval=0.2,
        instance_name="doomed",
    )
    consumer.subscribe(topic)
    async with consumer:
        await asyncio.Event().wait()  # the process is killed here


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
