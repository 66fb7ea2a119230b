"""The broker's CPU cost of a long-polling consumer per message, without sockets.

A tailing consumer costs the broker, per message, more than the send that
brought it: its parked pull is woken and answered, and its next pull arrives,
finds nothing and is parked again. This script measures that cycle in one
process: a broker on a temporary store, a producer's and a consumer's
server-side ``Connection`` whose transports are ``DiscardTransport`` (a
stand-in named so: it counts the answer bytes and drops them). Each cycle feeds
the consumer's PULL_MESSAGE for the next offset of queue 0 (suspend, commit
offset and subscription flags, as ``PushConsumer`` sends it: it is parked),
then one SEND_MESSAGE_V2 to queue 0 (stored; its dispatch wakes the pull,
which is answered with the message). The same sends alone are timed too, so
the difference is what the consumer adds. Figures are process CPU time per
message, best of several rounds; sockets' kernel time is not included.

    .venv/bin/python benchmarks/pull_cycle_cost.py --rounds 5 --messages 5000
    .venv/bin/python benchmarks/pull_cycle_cost.py --profile 30   # cProfile, top 30

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

from apogee.codes import RequestCode
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import encode_bytes
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting import run
from apogee.testing.cluster import run_broker

TOPIC = "pull_cycle_topic"
GROUP = "pull_cycle_group"
# PushConsumer's flags: commit offset, suspend, subscription
SYS_FLAG = 0x1 | 0x2 | 0x4


def pull_frames(first_offset: int, count: int, first_opaque: int) -> list[bytes]:
    """PULL_MESSAGE frames for queue 0 at ``first_offset``, ``first_offset + 1``, ..."""
    frames = []
    for i in range(count):
        offset = first_offset + i
        header = PullMessageRequestHeader(
            consumer_group=GROUP,
            topic=TOPIC,
            queue_id=0,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=SYS_FLAG,
            commit_offset=offset,
            suspend_timeout_millis=15_000,
            sub_version=1,
            subscription="*",
            expression_type="TAG",
        )
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        cmd.opaque = first_opaque + i
        frames.append(encode_bytes(cmd))
    return frames


async def settle() -> None:
    """Let the loop run the store's dispatch and the woken pulls' callbacks."""
    for _ in range(3):
        await asyncio.sleep(0)


async def cycles(producer: Any, consumer: Any, sends: list[bytes], pulls: list[bytes]) -> float:
    """CPU seconds for ``len(sends)`` messages, each pulled by a parked pull when given."""
    start = time.process_time()
    for i, frame in enumerate(sends):
        if pulls:
            consumer.data_received(pulls[i])
        producer.data_received(frame)
        await settle()
    return time.process_time() - start


def connect(broker: Any) -> tuple[Any, DiscardTransport]:
    conn = broker.server._new_connection()  # the seam measured
    transport = DiscardTransport()
    conn.connection_made(transport)
    return conn, transport


async def measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with run_broker(
            Path(tmp), store={"mapped_file_size_commit_log_bytes": 1 << 30}
        ) as broker:
            producer, _ = connect(broker)
            consumer, answers = connect(broker)
            try:
                await rounds(args, Frames(args.messages), producer, consumer, answers)
            finally:
                producer.connection_lost(None)
                consumer.connection_lost(None)


class Frames:
    """The next sends to queue 0, and pulls for the offsets they will take."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.offset = 0
        self.opaque = 0

    def next(self) -> tuple[list[bytes], list[bytes]]:
        n = self.count
        sends = send_frames(TOPIC, n, first_opaque=self.opaque, queues=1)
        pulls = pull_frames(self.offset, n, first_opaque=self.opaque)
        self.offset += n
        self.opaque += n
        return sends, pulls


async def rounds(
    args: argparse.Namespace, frames: Frames, producer: Any, consumer: Any, answers: Any
) -> None:
    n = args.messages
    await producer_first(producer, frames)  # creates the topic before any pull
    sends, pulls = frames.next()  # warms the caches
    await cycles(producer, consumer, sends, pulls)
    if answers.bytes_out < n * 1024:
        raise SystemExit(f"the pulls were not answered ({answers.bytes_out} bytes out)")
    if args.profile:
        sends, pulls = frames.next()
        profiler = cProfile.Profile()
        profiler.enable()
        await cycles(producer, consumer, sends, pulls)
        profiler.disable()
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.profile)
        return
    alone: list[float] = []
    cycle: list[float] = []
    for _ in range(args.rounds):
        if args.only != "alone":
            sends, pulls = frames.next()
            cycle.append(await cycles(producer, consumer, sends, pulls))
        if args.only != "cycle":
            sends, _ = frames.next()
            alone.append(await cycles(producer, consumer, sends, []))
    best_alone = min(alone) / n * 1e6 if alone else None
    best_cycle = min(cycle) / n * 1e6 if cycle else None
    if best_alone is not None:
        print(f"send alone                    {best_alone:7.2f} µs CPU per message")
    if best_cycle is not None:
        print(f"send + parked pull answered   {best_cycle:7.2f} µs CPU per message")
    if best_alone is not None and best_cycle is not None:
        print(f"the consumer's share          {best_cycle - best_alone:7.2f} µs CPU per message")


async def producer_first(producer: Any, frames: Frames) -> None:
    """One message: the topic exists when the first pull comes."""
    first = Frames(1)
    first.opaque = 1 << 30
    sends, _ = first.next()
    await cycles(producer, None, sends, [])
    frames.offset = 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", type=int, default=0, help="print the top N of a cycle run")
    parser.add_argument("--sort", default="tottime", help="pstats sort key")
    parser.add_argument(
        "--only",
        choices=["cycle", "alone"],
        help="time one workload (to count instructions under valgrind between two counts)",
    )
    run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
