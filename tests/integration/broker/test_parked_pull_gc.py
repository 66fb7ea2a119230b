"""Parked pulls stay out of the cycle collector's way.

A broker may hold hundreds of thousands of parked pulls. Every container object
they keep alive is walked by each collection of the generation it sits in: four
per pull made the young collections during the parked-pull attack take 30-130 ms
and a full one ~430 ms. Parked, a pull is kept as numbers, strings and bytes only.
"""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from apogee.codes import ResponseCode
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually, run_broker
from tests.integration.broker.wire import pull_request, send

SUSPEND = 0x2 | 0x4  # FLAG_SUSPEND | FLAG_SUBSCRIPTION
#: Tracked objects a parked pull may add (the connections' own objects and the deadline
#: wheel's slots come to a few hundred in all).
MAX_TRACKED_PER_PULL = 0.25


async def test_parked_pulls_add_no_objects_for_the_cycle_collector(
    tmp_path: Path,
) -> None:
    connections, per_connection = 4, 1000
    total = connections * per_connection
    async with (
        run_broker(tmp_path / "store", max_parked_pulls_per_connection=per_connection) as broker,
        RemotingClient() as client,
    ):
        assert (await send(client, broker.address, "T", b"x")).code == ResponseCode.SUCCESS
        # half of them every tag, half a tag expression (kept as its tag codes)
        frames = b"".join(
            encode_bytes(_request(i, "*" if i % 2 else "A || B")) for i in range(per_connection)
        )
        peers = [
            await asyncio.open_connection("127.0.0.1", broker.port) for _ in range(connections)
        ]

        gc.collect()
        # No collection meanwhile: what parking creates is counted, even what a collection
        # would stop tracking (a tuple per pull would still make a collection every few
        # thousand pulls).
        gc.disable()
        try:
            before = len(gc.get_objects())
            for _, writer in peers:
                writer.write(frames)
            await eventually(lambda: _async(len(broker.holds) == total), timeout_s=60)
            per_pull = (len(gc.get_objects()) - before) / total
        finally:
            gc.enable()

        assert per_pull <= MAX_TRACKED_PER_PULL, f"{per_pull:.2f} tracked objects per parked pull"

        # Kept that way, each is still answered, with its own opaque, when a message comes.
        sent = await send(client, broker.address, "T", b"y", tags="A")
        assert sent.code == ResponseCode.SUCCESS
        for reader, writer in peers:
            answers = await _answers(reader, per_connection)
            assert {a.code for a in answers} == {ResponseCode.SUCCESS}
            assert sorted(a.opaque for a in answers) == list(range(per_connection))
            writer.close()


def _request(opaque: int, subscription: str) -> RemotingCommand:
    request = pull_request("T", 0, 1, sys_flag=SUSPEND, suspend_ms=60_000,
                           subscription=subscription)  # fmt: skip
    request.opaque = opaque
    return request


async def _answers(reader: asyncio.StreamReader, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    while len(got) < count:
        chunk = await asyncio.wait_for(reader.read(1 << 20), 30)
        assert chunk, f"connection closed after {len(got)} answers"
        got += decoder.feed(chunk)
    return got


async def _async(value: bool) -> bool:
    return value
