"""``apogee bench consume``: how fast a C++ client PushConsumer drains a preloaded topic.

Owns: creating the topic on the cluster's first master, preloading it with batch sends
through our own client (its rate is reported too), running one
``apogee.bench.cpp_consumer`` process in a new consumer group, and the report: messages/s
from the first message delivered to the last, and the broker's CPU use while it ran when
this command started the cluster (``apogee.bench.cluster``). The C++ consumer runs by its
command line, never imported here: its module loads librocketmq.

Needs PyPI ``rocketmq==0.4.4`` (the dev extra). Measures, never asserts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import uvloop

from apogee._util.progress import print_summary
from apogee.bench.cluster import cluster, cpu_seconds, namesrv_option, ticking
from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.errors import TopicNotExistError
from apogee.model.message import Message
from apogee.model.topic import TopicConfig
from apogee.remoting.client import RemotingClient

BATCH = 100  # messages per SEND_BATCH_MESSAGE while preloading
IN_FLIGHT = 4  # batches sent at once


@dataclass(frozen=True)
class Target:
    namesrv: str
    topic: str
    queues: int


async def _master(namesrv: NamesrvApi, deadline_s: float = 30.0) -> tuple[str, str]:
    """(broker name, address) of the first master the name server knows."""
    deadline = time.monotonic() + deadline_s
    while True:
        info = await namesrv.get_cluster_info()
        for name, data in sorted(info.broker_addr_table.items()):
            addr = data.master_addr()
            if addr is not None:
                return name, addr
        if time.monotonic() > deadline:
            raise click.ClickException("no master broker registered with the name server")
        await asyncio.sleep(0.2)


async def create_topic(api: BrokerApi, target: Target) -> tuple[str, str]:
    """Create the topic on the first master; its (broker name, address)."""
    name, addr = await _master(NamesrvApi(api.remoting, target.namesrv.split(";")))
    await api.create_topic(addr, TopicConfig(target.topic, target.queues, target.queues))
    return name, addr


async def ensure_topic(target: Target) -> None:
    """Create the topic unless the name servers already route it (an existing one is kept)."""
    async with RemotingClient() as remoting:
        namesrv = NamesrvApi(remoting, target.namesrv.split(";"))
        try:
            await namesrv.get_route(target.topic)
        except TopicNotExistError:
            await create_topic(BrokerApi(remoting, timeout_s=10), target)


async def _preload(target: Target, messages: int, body: bytes) -> float:
    """Create the topic and fill it; the rate of the fill, msgs/s."""
    async with RemotingClient() as remoting:
        api = BrokerApi(remoting, timeout_s=10)
        name, addr = await create_topic(api, target)
        sizes = [min(BATCH, messages - i) for i in range(0, messages, BATCH)]
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(n: int, size: int) -> None:
            batch = [Message(target.topic, body, properties={"TAGS": "Bench"}) for _ in range(size)]
            async with gate:
                await api.send_batch(addr, name, batch, queue_id=n % target.queues,
                                     producer_group="apogee_bench_preload")  # fmt: skip

        begin = time.perf_counter()
        await asyncio.gather(*(one(n, size) for n, size in enumerate(sizes)))
        return messages / (time.perf_counter() - begin)


def _consume(target: Target, messages: int, threads: int, work: Path) -> dict[str, Any]:
    spec = {
        "namesrv": target.namesrv,
        "topic": target.topic,
        "group": f"apogee_bench_consume_{int(time.time())}",
        "threads": threads,
        "expect": messages,
        "samples_file": str(work / "samples.bin"),
    }
    command = [sys.executable, "-m", "apogee.bench.cpp_consumer", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    lines = done.stdout.strip().splitlines()
    summary: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if "received" not in summary:
        raise click.ClickException(f"the consumer failed: {summary or done.stderr[-500:]}")
    return summary


@click.command("consume")
@namesrv_option
@click.option("--messages", default=200_000, show_default=True, help="Messages preloaded.")
@click.option("--threads", default=4, show_default=True, help="The consumer's thread pool.")
@click.option("--queues", default=8, show_default=True, help="Queues of the topic.")
@click.option("--body-size", default=1024, show_default=True, help="Message body bytes.")
@click.option("--topic", default="BenchConsume", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def consume_bench(
    *,
    namesrv: str | None,
    messages: int,
    threads: int,
    queues: int,
    body_size: int,
    topic: str,
    as_json: bool,
) -> None:
    """Preload a topic, then drain it with a C++ PushConsumer; report the rate."""
    work = Path(tempfile.mkdtemp(prefix="apogee-bench-consume-"))
    broker_pid = None
    try:
        with contextlib.ExitStack() as stack:
            if namesrv is None:
                namesrv, broker_pid = stack.enter_context(cluster(work, "ASYNC_FLUSH"))
            target = Target(namesrv, topic, queues)
            with ticking(f"preloading {messages} messages", None):
                preload = uvloop.run(_preload(target, messages, b"x" * body_size))
            cpu_before = cpu_seconds(broker_pid)
            with ticking(f"draining {messages} messages", None):
                summary = _consume(target, messages, threads, work)
            cpu_after = cpu_seconds(broker_pid)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    received = int(summary["received"])
    span_s = (int(summary["last_ns"]) - int(summary["first_ns"])) / 1e9
    rate = (received - 1) / span_s if received > 1 and span_s > 0 else 0.0
    cpu = None
    if cpu_before is not None and cpu_after is not None and span_s > 0:
        cpu = round(100 * (cpu_after - cpu_before) / span_s, 1)  # over the whole drain
    result = {
        "messages": messages,
        "body_size": body_size,
        "received": received,
        "consume_msgs_per_s": round(rate, 1),
        "consume_mb_per_s": round(rate * body_size / 1e6, 1),
        "preload_msgs_per_s": round(preload, 1),
        "broker_cpu_percent": cpu,
    }
    if as_json:
        click.echo(json.dumps(result))
        return
    cpu_text = "-" if cpu is None else f"{cpu}%"
    print_summary("bench consume", [
        ("messages", f"{messages:,} x {body_size} B"),
        ("preloaded at", f"{preload:,.0f} msgs/s (batches of {BATCH})"),
        ("received", f"{received:,}"),
        ("consumed at", f"{rate:,.0f} msgs/s ({rate * body_size / 1e6:.1f} MB/s)"),
        ("broker CPU", cpu_text),
    ])  # fmt: skip
