"""Send-to-receive latency at a fixed rate, and what delayed the slow messages.

The workload is the peer harness's e2e one, through Apogee's asyncio client: a producer
process offers 1 KiB messages at ``--rate`` msgs/s for ``--seconds`` (each send its own
task awaiting ``Producer.send``, as the harness's adapter does), a consumer process
receives them with a ``PushConsumer`` (long polling, a plain listener), and the
latency of each is its receive time minus the CLOCK_MONOTONIC stamp in its body. The
broker is ``apogee standalone`` on free ports with its store in a temporary directory.
The producer paces itself as the harness's does, which under uvloop spins a CPU (its
sub-millisecond sleeps are 0 ms timers); ``--no-spin`` sleeps at least 1 ms instead.
With ``--catchup`` a third client process reads a topic of ``--catchup-messages``
stored messages from the start, again and again with new groups, for the whole run.

Every process runs ``loop_probe`` (``--probe light``: cycle collections only;
``full``: also every loop callback and read over 0.5 ms, and loop lag), and this
script reads each process's threads from ``/proc`` at the start and end of the
measured window. The report gives p50/p99/p99.9/max, per process the collections,
slow callbacks and stalls inside the window and the CPU and wake-ups of each thread,
and for each message over 1 ms which recorded events overlapped its flight.

    .venv/bin/python benchmarks/tail_latency.py --seconds 10
    .venv/bin/python benchmarks/tail_latency.py --probe full --catchup --json

Measures, never asserts. Figures on a shared machine move from run to run; the event
counts move less.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import gc
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import loop_probe

HERE = Path(__file__).resolve().parent
TOPIC = "TailE2E"
CATCHUP_TOPIC = "TailCatchup"
QUEUES = 4
BODY = 1024
WARMUP_SEQ = (1 << 63) - 1
_STAMP = struct.Struct("<qq")  # monotonic ns, sequence


# -- roles (each its own process) -------------------------------------------------------


def _role_broker(spec: dict[str, Any]) -> None:
    loop_probe.install(spec["probe_file"], spec["probe"])
    if spec.get("switch_interval"):
        sys.setswitchinterval(spec["switch_interval"])
    from apogee.cli.main import main  # noqa: PLC0415

    sys.argv = ["apogee", "standalone", *spec["argv"]]
    if not spec.get("profile"):
        main()
        return
    import cProfile  # noqa: PLC0415

    profiler = cProfile.Profile()
    try:
        profiler.runcall(main)
    except SystemExit:
        pass
    finally:
        profiler.dump_stats(spec["profile"])


def _client_main(spec: dict[str, Any], coro: Any) -> None:
    loop_probe.install(spec["probe_file"], spec["probe"])
    from apogee.remoting.runner import run  # noqa: PLC0415

    print(json.dumps(run(coro(spec))), flush=True)


def _started(spec: dict[str, Any]) -> None:
    """A client is started: with ``--gc-freeze``, what start-up made is frozen
    (docs/python-client.md, "Latency and the cycle collector")."""
    if spec.get("gc_freeze"):
        gc.freeze()


async def _create_topics(spec: dict[str, Any]) -> dict[str, Any]:
    from apogee.client.broker_api import BrokerApi  # noqa: PLC0415
    from apogee.model.topic import TopicConfig  # noqa: PLC0415
    from apogee.remoting.client import RemotingClient  # noqa: PLC0415

    async with RemotingClient() as remoting:
        api = BrokerApi(remoting, timeout_s=10)
        for topic in (TOPIC, CATCHUP_TOPIC):
            await api.create_topic(spec["broker"], TopicConfig(topic, QUEUES, QUEUES))
    return {"ok": True}


async def _fill(spec: dict[str, Any]) -> dict[str, Any]:
    from apogee.client import Message, Producer  # noqa: PLC0415

    body = os.urandom(BODY)
    async with Producer("tail_fill", namesrv=spec["namesrv"], send_timeout=30) as producer:
        slots = asyncio.Semaphore(10)

        async def one(n: int) -> None:
            try:
                await producer.send_batch([Message(CATCHUP_TOPIC, body) for _ in range(n)])
            finally:
                slots.release()

        tasks = []
        for start in range(0, spec["n"], 100):
            await slots.acquire()
            tasks.append(asyncio.ensure_future(one(min(100, spec["n"] - start))))
        await asyncio.gather(*tasks)
    return {"filled": spec["n"]}


async def _consumer(spec: dict[str, Any]) -> dict[str, Any]:
    from apogee.client import PushConsumer, ReceivedMessage  # noqa: PLC0415

    sends = array.array("q")
    lats = array.array("q")
    stored = array.array("q")  # the broker's store time, wall-clock ms
    expected = spec["expected"]
    done = asyncio.Event()
    last = [0.0]
    now = time.monotonic_ns
    unpack = _STAMP.unpack_from

    def listener(msg: ReceivedMessage) -> None:
        t = now()
        sent, seq = unpack(msg.body)
        if seq == WARMUP_SEQ:
            return
        sends.append(sent)
        lats.append(t - sent)
        stored.append(msg.store_timestamp)
        last[0] = time.monotonic()
        if len(lats) >= expected:
            done.set()

    consumer = PushConsumer(
        f"tail_e2e_{os.getpid()}", namesrv=spec["namesrv"], listener=listener,
        consume_from="last", instance_name="tail-consumer",
    )  # fmt: skip
    consumer.subscribe(TOPIC)
    await consumer.start()
    _started(spec)
    await asyncio.sleep(1.0)  # its queues taken (rebalance) before the first send
    print("READY", flush=True)
    deadline = time.monotonic() + spec["timeout_s"]
    while not done.is_set() and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await done.wait()
        if last[0] and time.monotonic() - last[0] > 5:
            break
    await consumer.close()
    Path(spec["samples_file"]).write_bytes(sends.tobytes() + lats.tobytes() + stored.tobytes())
    # monotonic -> wall clock, to place the broker's store time between send and receive
    return {"received": len(lats), "wall_minus_mono_ns": time.time_ns() - time.monotonic_ns()}


async def _producer(spec: dict[str, Any]) -> dict[str, Any]:
    from apogee.client import Message, Producer  # noqa: PLC0415

    pool = [os.urandom(BODY) for _ in range(64)]
    rate, seconds = spec["rate"], spec["seconds"]
    total = int(rate * seconds)
    producer = Producer("tail_e2e_producer", namesrv=spec["namesrv"], send_timeout=10)
    await producer.start()
    _started(spec)
    inflight: set[asyncio.Future[Any]] = set()
    window = asyncio.Semaphore(1000)
    errors = [0]

    def stamped(body: bytes, seq: int) -> bytes:
        return _STAMP.pack(time.monotonic_ns(), seq) + body[_STAMP.size :]

    async def one(body: bytes) -> None:
        try:
            await producer.send(Message(TOPIC, body))
        except Exception:  # counted; the report says how many
            errors[0] += 1
        finally:
            window.release()

    async def send_async(body: bytes) -> None:
        await window.acquire()
        task = asyncio.ensure_future(one(body))
        inflight.add(task)
        task.add_done_callback(inflight.discard)

    # the same pacing as the harness: due messages at once, then sleep until the next
    await producer.send(Message(TOPIC, stamped(pool[0], WARMUP_SEQ)))
    print("STARTED", flush=True)
    loop_probe.mark("begin")
    period = 1e9 / rate
    t0 = time.monotonic_ns()
    i = 0
    max_lag = 0
    while i < total:
        now = time.monotonic_ns()
        due = min(total, int((now - t0) / period) + 1)
        while i < due:
            max_lag = max(max_lag, time.monotonic_ns() - int(t0 + i * period))
            await send_async(stamped(pool[i % len(pool)], i))
            i += 1
        delay = (t0 + i * period - time.monotonic_ns()) / 1e9
        if delay > 0:
            # uvloop rounds a timer to whole milliseconds: the harness's sub-millisecond
            # sleeps are 0 ms ones, and its producer spins a CPU; --no-spin sleeps 1 ms
            await asyncio.sleep(max(delay, spec["min_sleep_s"]))
    end = time.monotonic_ns()
    loop_probe.mark("end")
    if inflight:
        await asyncio.gather(*inflight)
    await producer.close()
    return {"sent": i, "errors": errors[0], "window": [t0, end], "max_lag_ms": max_lag / 1e6,
            "rate": i / ((end - t0) / 1e9)}  # fmt: skip


async def _reader(spec: dict[str, Any]) -> dict[str, Any]:
    from apogee.client import PushConsumer, ReceivedMessage  # noqa: PLC0415

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    passes = got_total = 0
    while not stop.is_set():
        got = 0
        finished = asyncio.Event()

        def listener(msg: ReceivedMessage, finished: asyncio.Event = finished) -> None:
            nonlocal got
            got += len(msg.body) > 0
            if got >= spec["n"]:
                finished.set()

        consumer = PushConsumer(
            f"tail_catchup_{os.getpid()}_{passes}", namesrv=spec["namesrv"],
            listener=listener, consume_from="first", instance_name="tail-catchup",
        )  # fmt: skip
        consumer.subscribe(CATCHUP_TOPIC)
        await consumer.start()
        _started(spec)
        waiters = [asyncio.ensure_future(e.wait()) for e in (stop, finished)]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
        await consumer.close()
        passes += 1
        got_total += got
    return {"passes": passes, "read": got_total}


ROLES = {"_consumer": _consumer, "_producer": _producer, "_reader": _reader,
         "_fill": _fill, "_topics": _create_topics}  # fmt: skip


# -- the orchestrator ---------------------------------------------------------------------


def _free_port() -> int:
    from apogee._util.net import free_port  # noqa: PLC0415

    return free_port()


def _spawn(role: str, spec: dict[str, Any], **kw: Any) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(HERE / "tail_latency.py"), role, json.dumps(spec)]
    return subprocess.Popen(cmd, text=True, **kw)


def _threads(pid: int) -> dict[str, tuple[int, int, int]]:
    """tid -> (CPU ns, time slices, voluntary switches) from /proc."""
    out: dict[str, tuple[int, int, int]] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                schedstat = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text()
                run_ns, _, slices = map(int, schedstat.split())
                status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
                vol = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
                out[tid] = (run_ns, slices, vol)
    return out


def _wait_line(proc: subprocess.Popen[str], want: str, timeout_s: float = 60) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a client exited before {want}")
        if line.strip() == want:
            return
    raise RuntimeError(f"no {want} within {timeout_s} s")


def _last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise RuntimeError(f"no result in {text!r}")


def _percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))] / 1e6


class Run:
    """One measured run: its processes, their probe files, the window's figures."""

    ROLES = ("broker", "consumer", "producer", "reader")

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(tempfile.mkdtemp(prefix="apogee-tail-"))
        self.files = {role: str(self.work / f"probe-{role}.json") for role in self.ROLES}
        self.procs: list[subprocess.Popen[str]] = []
        self.port, ns_port = _free_port(), _free_port()
        self.namesrv, self.broker = f"127.0.0.1:{ns_port}", f"127.0.0.1:{self.port}"
        self.base = {"namesrv": self.namesrv, "broker": self.broker, "probe": "light",
                     "gc_freeze": args.gc_freeze}  # fmt: skip

    def client(self, role: str, **spec: Any) -> subprocess.Popen[str]:
        full = {**self.base, "probe": self.args.probe, "probe_file": self.files[role[1:]], **spec}
        proc = _spawn(role, full, stdout=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def once(self, role: str, **spec: Any) -> None:
        """A client role run to its end before the measurement (topics, filling)."""
        full = {**self.base, "probe_file": str(self.work / f"p{role}.json"), **spec}
        cmd = [sys.executable, str(HERE / "tail_latency.py"), role, json.dumps(full)]
        subprocess.run(cmd, check=True, capture_output=True)

    def start_broker(self) -> subprocess.Popen[str]:
        conf = self.work / "broker.conf"
        conf.write_text(f"brokerIP1=127.0.0.1\nhaListenPort={_free_port()}\n"
                        f"flushDiskType={self.args.flush}\n")  # fmt: skip
        argv = ["--listen", self.broker, "--namesrv-listen", self.namesrv, "--store",
                str(self.work / "store"), "-c", str(conf), "--log-level", "WARNING"]  # fmt: skip
        spec = {"probe_file": self.files["broker"], "probe": self.args.probe, "argv": argv,
                "switch_interval": self.args.switch_interval,
                "profile": self.args.profile_broker}  # fmt: skip
        proc = _spawn("_broker", spec)
        self.procs.append(proc)
        _await_port(self.port, proc)
        time.sleep(0.5)  # registered with its name server
        return proc

    def measure(self) -> dict[str, Any]:
        args = self.args
        broker = self.start_broker()
        self.once("_topics")
        reader = None
        if args.catchup:
            self.once("_fill", n=args.catchup_messages)
            reader = self.client("_reader", n=args.catchup_messages)
        samples = self.work / "samples.bin"
        consumer = self.client("_consumer", expected=int(args.rate * args.seconds),
                               samples_file=str(samples), timeout_s=args.seconds + 60)  # fmt: skip
        _wait_line(consumer, "READY")
        producer = self.client("_producer", rate=args.rate, seconds=args.seconds,
                               min_sleep_s=0.001 if args.no_spin else 0.0)  # fmt: skip
        pids = {"broker": broker.pid, "consumer": consumer.pid, "producer": producer.pid}
        if reader is not None:
            pids["reader"] = reader.pid
        _wait_line(producer, "STARTED")
        before = {role: _threads(pid) for role, pid in pids.items()}
        perf = None
        if args.perf_sched:  # scheduler events of these processes, kernel stacks of switches
            cmd = ["perf", "sched", "record", "-g", "-o", args.perf_sched, "-p",
                   ",".join(map(str, pids.values())), "--", "sleep", str(args.seconds)]  # fmt: skip
            perf = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(args.seconds)
        after = {role: _threads(pid) for role, pid in pids.items()}
        if perf is not None:
            perf.wait(30)
        prod = _last_json(producer.communicate(timeout=120)[0])
        cons = _last_json(consumer.communicate(timeout=120)[0])
        result = _latencies(samples, prod, cons, args)
        if reader is not None:
            reader.send_signal(signal.SIGTERM)
            result["catchup"] = _last_json(reader.communicate(timeout=60)[0])
        broker.send_signal(signal.SIGTERM)
        broker.wait(60)
        result["processes"], events = _processes(self.files, prod["window"], before, after,
                                                 len(result["_pairs"]))  # fmt: skip
        result |= _blame(result.pop("_pairs"), events)
        result["pids"] = pids
        if args.perf_sched:
            names = {}
            for role in pids:
                with contextlib.suppress(OSError, ValueError):
                    rep = json.loads(Path(self.files[role]).read_text())
                    names |= {tid: f"{role} {name}" for tid, name in rep["threads"].items()}
                    names[str(rep["pid"])] = f"{role} main"
            result["sched"] = sched_summary(args.perf_sched, pids, names)
        return result

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    run = Run(args)
    try:
        return run.measure()
    finally:
        run.close()


def _await_port(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the broker exited")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError("the broker does not listen")


def _latencies(
    samples: Path, prod: dict[str, Any], cons: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    raw = array.array("q", samples.read_bytes())
    third = len(raw) // 3
    sends, lats, stored = raw[:third], raw[third : 2 * third], raw[2 * third :]
    begin, end = prod["window"]
    pairs = [(s, lat) for s, lat in zip(sends, lats, strict=True) if begin <= s <= end]
    # the slow ones: did most of their time pass before the broker stored them (ms clock)?
    offset = cons["wall_minus_mono_ns"]
    split: Counter[str] = Counter()
    for s, lat, st in zip(sends, lats, stored, strict=True):
        if begin <= s <= end and lat > 2_000_000:
            before_ms = st - (s + offset) / 1e6
            after_ms = (s + lat + offset) / 1e6 - st
            split["to broker" if before_ms > after_ms else "from broker"] += 1
    ordered = sorted(lat for _, lat in pairs)
    return {
        "expected": int(args.rate * args.seconds), "received": cons["received"],
        "in_window": len(pairs), "rate": round(prod["rate"], 1),
        "producer_max_lag_ms": round(prod["max_lag_ms"], 2), "send_errors": prod["errors"],
        "p50_ms": _percentile(ordered, 0.5), "p99_ms": _percentile(ordered, 0.99),
        "p999_ms": _percentile(ordered, 0.999), "max_ms": ordered[-1] / 1e6 if ordered else None,
        "over_1ms": sum(v > 1_000_000 for v in ordered),
        "over_2ms": sum(v > 2_000_000 for v in ordered), "over_2ms_mostly": dict(split),
        "_pairs": pairs,
    }  # fmt: skip


Event = tuple[int, int, str]  # start, end (monotonic ns), what


def _processes(
    files: dict[str, str], window: list[int], before: dict[str, Any], after: dict[str, Any],
    messages: int,
) -> tuple[dict[str, Any], list[Event]]:  # fmt: skip
    """Each process's collections, slow callbacks, stalls and threads inside the window."""
    begin, end = window
    events: list[Event] = []
    per: dict[str, Any] = {}
    for role, path in files.items():
        if not os.path.exists(path):
            continue
        rep = json.loads(Path(path).read_text())
        gcs = [g for g in rep["gc"] if begin <= g[0] <= end]
        slow = [s for s in rep["slow"] if begin <= s[0] <= end]
        lag = [x for x in rep["lag"] if begin <= x[0] <= end]
        events += [(g[0], g[0] + g[1], f"{role} gc{g[2]}") for g in gcs]
        events += [(s[0], s[0] + s[1], f"{role} {s[2]}") for s in slow]
        events += [(x[0], x[0] + x[1], f"{role} stall") for x in lag]
        gen: dict[str, list[float]] = {}
        gen_cpu: dict[str, list[float]] = {}
        for g in gcs:
            gen.setdefault(f"gen{g[2]}", []).append(g[1] / 1e6)
            gen_cpu.setdefault(f"gen{g[2]}", []).append(g[4] / 1e6)
        per[role] = {
            "gc": {k: {"n": len(v), "total_ms": round(sum(v), 2), "max_ms": round(max(v), 2),
                       "cpu_max_ms": round(max(gen_cpu[k]), 2)}
                   for k, v in sorted(gen.items())},
            "slow_callbacks": len(slow), "slow_over_1ms": sum(s[1] > 1e6 for s in slow),
            "slow_max_ms": round(max((s[1] for s in slow), default=0) / 1e6, 2),
            "stalls_over_1ms": len(lag),
            "threads": _thread_figures(rep, before.get(role, {}), after.get(role, {})),
        }  # fmt: skip
        if rep["level"] == "full":
            per[role]["slow_top"] = Counter(s[2] for s in slow).most_common(8)
            per[role]["callbacks_per_msg"] = round(rep["callbacks"] / max(1, messages), 2)
            per[role]["callback_counts"] = rep["counts"]
    events.sort()
    return per, events


def _thread_figures(rep: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> Any:
    threads = {}
    for tid, (cpu, slices, vol) in after.items():
        c0, s0, v0 = before.get(tid, (0, 0, 0))
        name = "main (loop)" if tid == str(rep["pid"]) else rep["threads"].get(tid, f"tid {tid}")
        threads[name] = {"cpu_ms": round((cpu - c0) / 1e6, 1), "slices": slices - s0,
                         "wakeups": vol - v0}  # fmt: skip
    return threads


def _blame(pairs: list[tuple[int, int]], events: list[Event]) -> dict[str, Any]:
    """Which recorded events overlapped the flight of each message over 1 ms."""
    blame: Counter[str] = Counter()
    unexplained = 0
    for s, lat in pairs:
        if lat <= 1_000_000:
            continue
        hit = {" ".join(what.split(" ")[:2]) for a, b, what in events if a < s + lat and b > s}
        if not hit:
            unexplained += 1
        blame.update(hit)
    return {"over_1ms_overlapping": dict(blame.most_common(12)), "over_1ms_no_event": unexplained}


_SWITCH = re.compile(
    r"^\s*[\d.]+\s+\[\d+\]\s+\S+?\[(\d+)(?:/\d+)?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S)\s*(.*)$"
)


_WOKEN = re.compile(r"^\s*[\d.]+\s+\[\d+\]\s+\S+?\[(\d+)(?:/\d+)?\]\s+awakened: \S+?\[(\d+)")


def sched_summary(path: str, pids: dict[str, int], names: dict[str, str]) -> dict[str, Any]:
    """Per process, its main (loop) thread's time off the CPU, by why it left.

    From ``perf sched timehist --state -w`` with kernel stacks: ``gil`` is a futex wait
    (the loop thread has no other futex to wait on while it runs: the GIL; who woke it
    is who released the GIL, named in ``gil_over_1ms_released_by``), ``epoll_delay``
    the time between the loop's poll being woken and the thread running (a busy CPU),
    ``preempted`` being taken off a CPU while running.
    """
    out = subprocess.run(
        ["perf", "sched", "timehist", "-i", path, "--state", "-w", "-p",
         ",".join(str(p) for p in pids.values())],
        capture_output=True, text=True, check=False,
    ).stdout.splitlines()  # fmt: skip
    mains = {str(pid): role for role, pid in pids.items()}
    last: dict[str, str] = {}
    waker: dict[str, str] = {}  # main tid -> the tid that woke it last
    stats: dict[str, dict[str, list[float]]] = {}
    released_by: dict[str, Counter[str]] = {}
    for line in out:
        woke = _WOKEN.match(line)
        if woke is not None:
            if woke.group(2) in mains:
                waker[woke.group(2)] = woke.group(1)
            continue
        m = _SWITCH.match(line)
        if m is None:
            continue
        tid, wait, delay, _run, state, stack = m.groups()
        role = mains.get(tid)
        if role is None:
            continue  # a thread other than a main one
        why = last.get(tid)
        if why is not None:
            per = stats.setdefault(role, {})
            off = float(wait) + float(delay)
            per.setdefault(why, []).append(off)
            if why == "epoll":
                per.setdefault("epoll_delay", []).append(float(delay))
            if why == "gil" and off > 1:
                by = waker.get(tid, "?")
                released_by.setdefault(role, Counter())[names.get(by, f"tid {by}")] += 1
        last[tid] = ("epoll" if "epoll" in stack else "gil" if "futex" in stack
                     else "preempted" if state == "R" else "other")  # fmt: skip
    summary: dict[str, Any] = {}
    for role, per in stats.items():
        summary[role] = {
            why: {"n": len(v), "total_ms": round(sum(v), 1), "over_1ms": sum(x > 1 for x in v),
                  "max_ms": round(max(v), 2)}
            for why, v in per.items() if why != "epoll"
        }  # fmt: skip
        if role in released_by:
            summary[role]["gil_over_1ms_released_by"] = dict(released_by[role])
    return summary


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1].startswith("_"):
        spec = json.loads(sys.argv[2])
        if sys.argv[1] == "_broker":
            _role_broker(spec)
        else:
            _client_main(spec, ROLES[sys.argv[1]])
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--probe", choices=["light", "full"], default="light")
    ap.add_argument("--catchup", action="store_true", help="a concurrent catch-up reader")
    ap.add_argument("--catchup-messages", type=int, default=200_000)
    ap.add_argument("--flush", choices=["ASYNC_FLUSH", "SYNC_FLUSH"], default="ASYNC_FLUSH")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() in each client process once its client started")  # fmt: skip
    ap.add_argument("--perf-sched", metavar="FILE", help="perf sched record the window into FILE")
    ap.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="sys.setswitchinterval in the broker (default: leave it)",
    )
    ap.add_argument(
        "--no-spin",
        action="store_true",
        help="the producer sleeps at least 1 ms (the harness's spins: see _producer)",
    )
    ap.add_argument("--profile-broker", metavar="FILE", help="cProfile the broker into FILE")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    for _ in range(args.reps):
        res = run_once(args)
        if args.json:
            print(json.dumps(res), flush=True)
        else:
            print(json.dumps(res, indent=1), flush=True)


if __name__ == "__main__":
    main()
