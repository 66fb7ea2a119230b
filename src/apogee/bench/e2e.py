"""``apogee bench e2e``: from send to delivery through a broker, C++ clients at both ends.

Owns: one ``apogee.bench.cpp_consumer`` process subscribed first, then one
``apogee.bench.cpp_producer`` process whose sends carry their wall-clock time; and the
report: the send rate, the delivery rate and the send-to-delivery latency (p50, p99) of the
messages sent inside the producer's measured window. The cluster is throw-away
(``apogee.bench.cluster``) unless ``--namesrv`` names one. The two C++ client processes run
by their command lines, never imported here: their modules load librocketmq.

Producer and consumer run on this machine, so their clocks are the same clock. Needs PyPI
``rocketmq==0.4.4`` (the dev extra). Measures, never asserts.
"""

from __future__ import annotations

import array
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import uvloop

from apogee._util.progress import print_summary
from apogee.bench.cluster import cluster, flush_option, namesrv_option, percentile, ticking
from apogee.bench.consume import Target, create_topic
from apogee.client.broker_api import BrokerApi
from apogee.remoting.client import RemotingClient

SETTLE_S = 1.0  # for the consumer to take its queues before the first send


async def _topic(target: Target) -> None:
    async with RemotingClient() as remoting:
        await create_topic(BrokerApi(remoting, timeout_s=10), target)


def _last_json(out: str, who: str) -> dict[str, Any]:
    lines = out.strip().splitlines()
    summary: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if "error" in summary or not summary:
        raise click.ClickException(f"the {who} failed: {summary}")
    return summary


def _run(target: Target, options: dict[str, Any], work: Path) -> dict[str, Any]:
    seconds, warmup = float(options["seconds"]), float(options["warmup"])
    samples = work / "samples.bin"
    consumer_spec = {
        "namesrv": target.namesrv, "topic": target.topic,
        "group": f"apogee_bench_e2e_{int(time.time())}",
        "threads": options["consumer_threads"], "expect": 1 << 62, "idle_s": 3.0,
        "timeout_s": warmup + seconds + 120, "samples_file": str(samples),
    }  # fmt: skip
    consumer = subprocess.Popen(
        [sys.executable, "-m", "apogee.bench.cpp_consumer", json.dumps(consumer_spec)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert consumer.stdout is not None
        _last_json(consumer.stdout.readline(), "consumer")  # {"started": true}
        time.sleep(SETTLE_S)
        producer_spec = {
            "namesrv": target.namesrv, "topic": target.topic, "threads": options["threads"],
            "seconds": seconds, "warmup_s": warmup, "body_size": options["body_size"],
            "group": "apogee_bench_e2e", "latency_file": str(work / "send.bin"), "stamp": True,
        }  # fmt: skip
        with ticking("sending and receiving", warmup + seconds):
            sent = subprocess.run(
                [sys.executable, "-m", "apogee.bench.cpp_producer", json.dumps(producer_spec)],
                capture_output=True, text=True, timeout=warmup + seconds + 120, check=False,
            )  # fmt: skip
        producer = _last_json(sent.stdout, "producer")
        received = _last_json(consumer.communicate(timeout=180)[0], "consumer")
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    pairs = array.array("q", samples.read_bytes() if samples.exists() else b"")
    begin, end = producer["window_ns"]
    latencies = array.array(
        "I",
        sorted(
            pairs[i + 1]
            for i in range(0, len(pairs), 2)
            if begin <= pairs[i] - pairs[i + 1] * 1000 <= end
        ),
    )
    sends = array.array("I", sorted(array.array("I", (work / "send.bin").read_bytes())))
    return {
        "threads": options["threads"],
        "sent_msgs_per_s": round(int(producer["sent"]) / seconds, 1),
        "delivered_msgs_per_s": round(len(latencies) / seconds, 1),
        "e2e_p50_ms": round(percentile(latencies, 0.5), 3),
        "e2e_p99_ms": round(percentile(latencies, 0.99), 3),
        "send_p50_ms": round(percentile(sends, 0.5), 3),
        "send_p99_ms": round(percentile(sends, 0.99), 3),
        "failed": int(producer["failed"]),
        "received_total": int(received["received"]),
    }


@click.command("e2e")
@namesrv_option
@click.option("--threads", default=8, show_default=True, help="Sender threads.")
@click.option("--consumer-threads", default=4, show_default=True)
@click.option("--seconds", default=10.0, show_default=True, help="Measured sending time.")
@click.option("--warmup", default=1.0, show_default=True, help="Unmeasured seconds first.")
@click.option("--queues", default=8, show_default=True, help="Queues of the topic.")
@click.option("--body-size", default=1024, show_default=True, help="Message body bytes.")
@click.option("--topic", default="BenchE2E", show_default=True)
@flush_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def e2e_bench(
    *, namesrv: str | None, queues: int, topic: str, flush: str, as_json: bool, **options: Any
) -> None:
    """Send with C++ producer threads while a C++ PushConsumer receives; report latency."""
    work = Path(tempfile.mkdtemp(prefix="apogee-bench-e2e-"))
    started = namesrv is None
    try:
        with contextlib.ExitStack() as stack:
            if namesrv is None:
                namesrv, _ = stack.enter_context(cluster(work, flush))
            target = Target(namesrv, topic, queues)
            uvloop.run(_topic(target))
            result = _run(target, options, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result |= {"body_size": options["body_size"], "flush": flush if started else "external"}
    if as_json:
        click.echo(json.dumps(result))
        return
    print_summary("bench e2e", [
        ("sender threads", str(result["threads"])),
        ("sent", f"{result['sent_msgs_per_s']:,.0f} msgs/s"),
        ("delivered", f"{result['delivered_msgs_per_s']:,.0f} msgs/s"),
        ("send to delivery p50 / p99", f"{result['e2e_p50_ms']} / {result['e2e_p99_ms']} ms"),
        ("send alone p50 / p99", f"{result['send_p50_ms']} / {result['send_p99_ms']} ms"),
        ("failed sends", str(result["failed"])),
        ("body, flush", f"{result['body_size']} B, {result['flush']}"),
    ])  # fmt: skip
