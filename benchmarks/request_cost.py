"""The broker's CPU cost per request, without sockets: frames fed to a connection.

A broker runs in this process on a temporary store. Pre-encoded SEND_MESSAGE_V2
frames (1 KiB bodies) are handed to a server-side ``Connection`` whose
transport is ``DiscardTransport`` (a stand-in named so: it counts the answer
bytes and drops them), one frame per ``data_received`` ("one at a time") or
100 frames per call ("pipelined"); the loop runs between calls so that the
store's dispatch work, scheduled per append, is counted too. The figure is
process CPU time per request, best of several rounds (the machine is shared,
the least disturbed round is the closest to the code's own cost). Kernel time
of real sockets is not included: add what ``/proc`` shows for a real run.

    .venv/bin/python benchmarks/request_cost.py --rounds 5 --requests 20000
    .venv/bin/python benchmarks/request_cost.py --profile 30   # cProfile, top 30 by own time

Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from cost_frames import DiscardTransport, send_frames

from apogee.remoting import run
from apogee.testing.cluster import run_broker

TOPIC = "cost_topic"
QUEUES = 4


async def feed(conn: Any, frames: list[bytes], per_call: int) -> float:
    """CPU seconds to hand ``frames`` to ``conn``, ``per_call`` at a time."""
    start = time.process_time()
    for i in range(0, len(frames), per_call):
        conn.data_received(b"".join(frames[i : i + per_call]) if per_call > 1 else frames[i])
        await asyncio.sleep(0)  # let the store's dispatch callbacks run
        while conn._turn_waiting:  # frames of the read left for later turns
            await asyncio.sleep(0)
    await asyncio.sleep(0)
    return time.process_time() - start


async def measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with run_broker(
            Path(tmp), store={"mapped_file_size_commit_log_bytes": 1 << 30}
        ) as broker:
            conn = broker.server._new_connection()  # the seam measured
            transport = DiscardTransport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            await feed(conn, send_frames(TOPIC, 500), 1)  # creates the topic, warms caches
            frames = send_frames(TOPIC, args.requests)
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                await feed(conn, frames, 1)
                profiler.disable()
                stats = pstats.Stats(profiler).sort_stats("tottime")
                stats.print_stats(args.profile)
                conn.connection_lost(None)
                return
            try:
                for per_call, name in ((1, "one at a time"), (100, "pipelined, 100 per read")):
                    best = min([await feed(conn, frames, per_call) for _ in range(args.rounds)])
                    print(f"{name:28s} {best / len(frames) * 1e6:7.2f} µs CPU per request")
            finally:
                conn.connection_lost(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", type=int, default=0, help="print the top N by own time")
    run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
