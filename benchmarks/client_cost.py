"""The client library's own CPU per message, against a broker in another process.

A name server and a broker run as subprocesses on 127.0.0.1 (``broker_processes``);
this process runs nothing but the client, so ``time.process_time()`` around a
workload (user + system time of this process, socket calls included) is the
client's cost, untouched by the broker's CPU and little by what else the
machine runs. The workloads are those of the bench-peers adapter
(``peers_apogee_client.py``), through the public API:

* ``batched``: ``Producer.send_batch`` of 100 messages (1 KiB random bodies,
  ``Message`` objects built in the timed loop), 10 batches in flight;
* ``sync``: ``await Producer.send`` one message at a time;
* ``consume``: catch-up consumption of a backlog by a new ``PushConsumer``
  group (consume_from first, a plain listener reading each body), from
  ``start`` to the listener's last message;
* ``lite``: the same backlog through ``LitePullConsumer.poll``;
* ``tail``: a ``PushConsumer`` (consume_from last) receives what a child process
  sends one at a time at ``--tail-rate`` msgs/s, so that most pulls are parked at
  the broker and answered with one message (the peer harness's e2e workload);
  the sender's frames are encoded ahead and its CPU is not this process's.

Each round runs every chosen workload once; the table gives the median and
the best round (the least disturbed round is the closest to the code's own
cost), with the broker's CPU per message beside it for context.

    .venv/bin/python benchmarks/client_cost.py --rounds 5
    .venv/bin/python benchmarks/client_cost.py --profile consume --top 30
    .venv/bin/python benchmarks/client_cost.py --workloads sync --sync 5000
    .venv/bin/python benchmarks/client_cost.py --profile tail --tail 10000
    # bigger pulls, which a broker gives only when configured to (RocketMQ's
    # maxTransferCountOnMessageInMemory is 32, a pull's pullBatchSize at most 1024)
    .venv/bin/python benchmarks/client_cost.py --workloads consume lite \\
        --broker-max-transfer 256 --pull-batch 256

Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from apogee.client import LitePullConsumer, Message, Producer, PushConsumer, ReceivedMessage
from apogee.client.broker_api import BrokerApi
from apogee.model.topic import TopicConfig
from apogee.remoting import RemotingClient, run
from apogee.testing.cluster import broker_processes

TOPIC = "client_cost"
# the tail workload's own topic: no backlog behind where a new group starts
TAIL_TOPIC = "client_cost_tail"
QUEUES = 4
BATCH = 100
IN_FLIGHT = 10
BODY = 1024
POOL = 1000
WORKLOADS = ("batched", "sync", "consume", "lite", "tail")
TARGETS_US = {"batched": 2.0, "sync": 40.0, "consume": 2.0, "lite": 2.0, "tail": float("nan")}


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def new_group(role: str) -> str:
    return f"cost_{role}_{os.getpid()}_{time.monotonic_ns()}"


async def produce_batched(producer: Producer, pool: list[bytes], n: int) -> int:
    """The adapter's ``produce_batched``: batches of 100, 10 of them in flight."""
    size = len(pool)
    slots = asyncio.Semaphore(IN_FLIGHT)
    send_batch = producer.send_batch

    async def one(start: int, end: int) -> int:
        try:
            await send_batch([Message(TOPIC, pool[i % size]) for i in range(start, end)])
            return end - start
        finally:
            slots.release()

    tasks = []
    for start in range(0, n, BATCH):
        await slots.acquire()
        tasks.append(asyncio.ensure_future(one(start, min(n, start + BATCH))))
    return sum(await asyncio.gather(*tasks))


async def send_sync(producer: Producer, pool: list[bytes], n: int) -> int:
    size = len(pool)
    for i in range(n):
        await producer.send(Message(TOPIC, pool[i % size]))
    return n


class BodyReader:
    """A plain listener that reads each body; ``done`` is set by its ``n``-th message."""

    __slots__ = ("done", "got", "n", "nbytes")

    def __init__(self, n: int) -> None:
        self.n = n
        self.got = 0
        self.nbytes = 0
        self.done = asyncio.Event()

    def __call__(self, msg: ReceivedMessage) -> None:
        self.nbytes += len(msg.body)
        self.got += 1
        if self.got >= self.n:
            self.done.set()


async def consume_push(namesrv: str, n: int, pull_batch: int) -> int:
    """A new group reads ``n`` messages of the backlog with a plain listener."""
    listener = BodyReader(n)
    consumer = PushConsumer(
        new_group("push"),
        namesrv=namesrv,
        listener=listener,
        consume_from="first",
        instance_name="cost-consume",
        pull_batch_size=pull_batch,
    )
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        async with asyncio.timeout(300):
            await listener.done.wait()
    finally:
        # closing is not part of the figure: stop the clock first
        stop = _stop()
        await consumer.close()
        _STOPPED.append(stop)
    return listener.got


async def consume_lite(namesrv: str, n: int, pull_batch: int) -> int:
    got = 0
    nbytes = 0
    consumer = LitePullConsumer(
        new_group("lite"),
        namesrv=namesrv,
        consume_from="first",
        instance_name="cost-lite",
        pull_batch_size=pull_batch,
    )
    consumer.subscribe(TOPIC)
    await consumer.start()
    try:
        async with asyncio.timeout(300):
            while got < n:
                for msg in await consumer.poll(timeout=1.0):
                    nbytes += len(msg.body)
                    got += 1
    finally:
        stop = _stop()
        await consumer.close()
        _STOPPED.append(stop)
    return got


async def consume_tail(namesrv: str, broker_addr: str, n: int, rate: float) -> int:
    """A tailing ``PushConsumer`` receives ``n`` messages sent one at a time by a child."""
    listener = BodyReader(n)
    consumer = PushConsumer(
        new_group("tail"), namesrv=namesrv, listener=listener, consume_from="last",
        instance_name="cost-tail",
    )  # fmt: skip
    consumer.subscribe(TAIL_TOPIC)
    await consumer.start()
    await asyncio.sleep(0.5)  # every queue assigned and its first pull parked
    sender = subprocess.Popen(
        [sys.executable, __file__, "_tail_sender", broker_addr, str(n), str(rate)]
    )
    try:
        async with asyncio.timeout(60 + 2 * n / rate):
            await listener.done.wait()
    finally:
        stop = _stop()
        sender.wait(30)
        await consumer.close()
        _STOPPED.append(stop)
    return listener.got


def tail_sender(broker_addr: str, n: int, rate: float) -> None:
    """The child of ``consume_tail``: ``n`` sends, each answer awaited, paced to ``rate``."""
    from cost_frames import send_frames  # noqa: PLC0415  # the child's only import of it

    frames = send_frames(TAIL_TOPIC, n, first_opaque=time.monotonic_ns() % (1 << 30), queues=QUEUES)
    host, port = broker_addr.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        start = time.monotonic()
        for i, frame in enumerate(frames):
            sock.sendall(frame)
            head = _recv_exactly(sock, 4)
            _recv_exactly(sock, int.from_bytes(head, "big"))
            delay = start + (i + 1) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


#: a workload that must not count its own closing puts its stop time here
_STOPPED: list[tuple[float, float]] = []


class Run(NamedTuple):
    client_s: float  # CPU of this process: user + system
    system_s: float  # the system (kernel) part of it
    broker_s: float
    wall_s: float
    count: int


def _stop() -> tuple[float, float]:
    """(process CPU s, system CPU s) now."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_stime


async def timed(run_it: Callable[[], Awaitable[int]], broker_pid: int) -> Run:
    """The CPU and wall time of one run."""
    _STOPPED.clear()
    broker0 = proc_cpu_s(broker_pid)
    wall0 = time.perf_counter()
    cpu0, sys0 = _stop()
    count = await run_it()
    cpu1, sys1 = _STOPPED[0] if _STOPPED else _stop()
    wall = time.perf_counter() - wall0
    return Run(cpu1 - cpu0, sys1 - sys0, proc_cpu_s(broker_pid) - broker0, wall, count)


async def create_topic(broker_addr: str) -> None:
    async with RemotingClient() as remoting:
        for topic in (TOPIC, TAIL_TOPIC):
            config = TopicConfig(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
            await BrokerApi(remoting).create_topic(broker_addr, config)


async def measure(args: argparse.Namespace, namesrv: str, broker_addr: str, pid: int) -> None:
    pool = [os.urandom(BODY) for _ in range(POOL)]
    await create_topic(broker_addr)
    producer = Producer("cost_pg", namesrv=namesrv, send_timeout=10)
    await producer.start()
    try:
        # the backlog the consumers read (and a warm-up of the send path)
        backlog = await produce_batched(producer, pool, args.backlog)
        await send_sync(producer, pool, 200)
        runs: dict[str, Callable[[], Awaitable[int]]] = {
            "batched": lambda: produce_batched(producer, pool, args.batched),
            "sync": lambda: send_sync(producer, pool, args.sync),
            "consume": lambda: consume_push(namesrv, backlog, args.pull_batch),
            "lite": lambda: consume_lite(namesrv, backlog, args.pull_batch),
            "tail": lambda: consume_tail(namesrv, broker_addr, args.tail, args.tail_rate),
        }
        if args.profile:
            # CPU time, not wall time: the figure is the client's CPU, and a send
            # that wakes the broker may lose the core to it for a while
            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
            count = await runs[args.profile]()
            profiler.disable()
            print(f"{args.profile}: {count} messages")
            stats = pstats.Stats(profiler).sort_stats(args.sort)
            stats.print_stats(args.top)
            return
        results: dict[str, list[Run]] = {w: [] for w in args.workloads}
        for r in range(args.rounds):
            for name in args.workloads:
                one = await timed(runs[name], pid)
                results[name].append(one)
                if args.verbose:
                    n = one.count / 1e6
                    print(f"round {r} {name:8s} {one.client_s / n:7.2f} µs client "
                          f"({one.system_s / n:.2f} system) {one.broker_s / n:7.2f} µs broker "
                          f"{one.count / one.wall_s:9.0f} msg/s")  # fmt: skip
    finally:
        await producer.close()
    report(results, args.json)


def report(results: dict[str, list[Run]], as_json: bool) -> None:
    rows = {}
    for name, runs in results.items():
        per = [r.client_s / r.count * 1e6 for r in runs]
        rows[name] = {
            "client_us_median": statistics.median(per),
            "client_us_best": min(per),
            "system_us_median": statistics.median(r.system_s / r.count * 1e6 for r in runs),
            "broker_us_median": statistics.median(r.broker_s / r.count * 1e6 for r in runs),
            "msgs_per_s_median": statistics.median(r.count / r.wall_s for r in runs),
            "target_us": TARGETS_US[name],
            "rounds": per,
        }
    if as_json:
        print(json.dumps(rows))
        return
    print(f"{'workload':10s} {'client µs/msg':>14s} {'best':>7s} {'of it system':>13s} "
          f"{'target':>7s} {'broker µs/msg':>14s} {'msg/s':>9s}")  # fmt: skip
    for name, row in rows.items():
        print(f"{name:10s} {row['client_us_median']:14.2f} {row['client_us_best']:7.2f} "
              f"{row['system_us_median']:13.2f} {row['target_us']:7.1f} "
              f"{row['broker_us_median']:14.2f} {row['msgs_per_s_median']:9.0f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batched", type=int, default=100_000, help="messages per batched run")
    parser.add_argument("--sync", type=int, default=5_000, help="messages per one-by-one run")
    parser.add_argument("--backlog", type=int, default=200_000, help="messages consumed per run")
    parser.add_argument("--tail", type=int, default=5_000, help="messages per tail run")
    parser.add_argument("--tail-rate", type=float, default=2_000, help="the tail's sends per s")
    parser.add_argument(
        "--pull-batch", type=int, default=32, help="consumers' pull_batch_size (RocketMQ: 32)"
    )
    parser.add_argument(
        "--broker-max-transfer",
        type=int,
        default=0,
        help="the broker's maxTransferCountOnMessageInMemory (0: its default, 32), with "
        "maxTransferBytesOnMessageInMemory 4 MiB",
    )
    parser.add_argument("--profile", choices=WORKLOADS, help="cProfile one run of a workload")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="tottime", help="pstats sort key")
    parser.add_argument("--asyncio", action="store_true", help="asyncio's loop, not uvloop")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every round")
    args = parser.parse_args()
    props = {"mappedFileSizeCommitLog": str(256 << 20)}
    if args.broker_max_transfer:
        props["maxTransferCountOnMessageInMemory"] = str(args.broker_max_transfer)
        props["maxTransferBytesOnMessageInMemory"] = str(4 << 20)
    with (
        tempfile.TemporaryDirectory() as tmp,
        broker_processes(Path(tmp), props) as (namesrv, broker),
    ):
        assert broker.proc is not None
        main_coro = measure(args, namesrv, broker.address, broker.proc.pid)
        if args.asyncio:
            asyncio.run(main_coro)
        else:
            run(main_coro)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_tail_sender"]:
        tail_sender(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        with contextlib.suppress(KeyboardInterrupt):
            main()
