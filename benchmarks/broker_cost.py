"""The broker's CPU per request over real sockets, read from /proc around a fixed workload.

``apogee standalone`` runs as a child process (its interpreter is ``--broker-python``,
so builds of two checkouts can be alternated from one driver). This process
is a deliberately thin client: every request frame is encoded before the
clock starts and the socket is a blocking one, so the client takes as little
of the shared cores as it can. Workloads, 1 KiB bodies, 4 queues:

* ``sync``: SEND_MESSAGE_V2, one at a time, each answer awaited (the peer
  harness's "produce 1-by-1");
* ``batched``: SEND_BATCH_MESSAGE of 100, 10 batches in flight.

The figure is the broker process's user + system CPU (``/proc/<pid>/stat``)
around the workload, divided by requests or messages. ``--py-spy FILE`` and
``--strace FILE`` attach to the broker for the timed part of the first round;
``--threads`` splits each round's CPU by thread (the main thread runs the loop).

    .venv/bin/python benchmarks/broker_cost.py --workloads sync batched --rounds 3
    .venv/bin/python benchmarks/broker_cost.py --broker-python ../old/.venv/bin/python
    .venv/bin/python benchmarks/broker_cost.py --workloads sync --py-spy /tmp/sync.txt

Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from cost_frames import BODY, send_frame, send_frames, uniq_key

from apogee._util.net import free_port
from apogee.codes import RequestCode
from apogee.model.message import Message
from apogee.model.message_codec import encode_batch
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import encode_bytes

TOPIC = "broker_cost"
QUEUES = 4
BATCH = 100
IN_FLIGHT = 10
_LEN = struct.Struct(">i")


def proc_cpu_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each of ``pid``'s threads; the main thread is "main"."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            name, _, rest = task.joinpath("stat").read_text().partition(" (")[2].rpartition(")")
            fields = rest.split()
            key = "main" if task.name == str(pid) else f"{name}/{task.name}"
            out[key] = (int(fields[11]) + int(fields[12])) / tick
    return out


def sync_frames(count: int, first_opaque: int) -> list[bytes]:
    return send_frames(TOPIC, count, first_opaque, QUEUES)


def batch_frames(count: int, first_opaque: int) -> list[bytes]:
    pool = [os.urandom(BODY) for _ in range(BATCH)]
    frames = []
    for i in range(count):
        base = (first_opaque + i) * BATCH
        msgs = [
            Message(TOPIC, pool[j], properties={"UNIQ_KEY": uniq_key(base + j)})
            for j in range(BATCH)
        ]
        frames.append(
            send_frame(TOPIC, i % QUEUES, encode_batch(msgs), batch=True, opaque=first_opaque + i)
        )
    return frames


class Reader:
    """Whole frames from a blocking socket; only the answer codes are looked at."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def frames(self) -> Iterator[bytes]:
        while True:
            while len(self.buf) >= 4:
                (length,) = _LEN.unpack_from(self.buf, 0)
                if len(self.buf) < 4 + length:
                    break
                frame = bytes(self.buf[4 : 4 + length])
                del self.buf[: 4 + length]
                yield frame
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk


def _check(frame: bytes) -> None:
    hlen = _LEN.unpack_from(frame, 0)[0] & 0xFFFFFF
    header = frame[4 : 4 + hlen]
    if b'"code":0,' not in header:
        raise RuntimeError(f"send failed: {header[:300]!r}")


def run_sync(sock: socket.socket, frames: list[bytes]) -> None:
    frames_in = Reader(sock).frames()
    for frame in frames:
        sock.sendall(frame)
        _check(next(frames_in))


def run_batched(sock: socket.socket, frames: list[bytes]) -> None:
    frames_in = Reader(sock).frames()
    sent = 0
    for frame in frames[:IN_FLIGHT]:
        sock.sendall(frame)
        sent += 1
    for _ in range(len(frames)):
        _check(next(frames_in))
        if sent < len(frames):
            sock.sendall(frames[sent])
            sent += 1


@contextlib.contextmanager
def standalone(
    python: str, root: Path, start_timeout_s: float = 30
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port, ns_port = free_port(), free_port()
    argv = [python, "-m", "apogee", "standalone", "--listen", f"127.0.0.1:{port}",
            "--namesrv-listen", f"127.0.0.1:{ns_port}", "--store", str(root / "store"),
            "--log-dir", str(root / "logs"), "--log-level", "WARNING"]  # fmt: skip
    log = (root / "out.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((root / "out.log").read_text())
            time.sleep(0.1)
        yield proc, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def create_topic(port: int) -> None:
    ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
           "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": "0", "order": "false"}  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    cmd.opaque = 1
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(encode_bytes(cmd))
        _check(next(Reader(sock).frames()))


@contextlib.contextmanager
def attached(kind: str | None, out: str | None, pid: int) -> Iterator[None]:
    if kind is None or out is None:
        yield
        return
    if kind == "py_spy":
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        argv = [spy, "record", "--nonblocking", "--rate", "1000", "--format", "raw",
                "--pid", str(pid), "-o", out]  # fmt: skip
    elif kind == "perf":
        argv = ["perf", "record", "-F", "2000", "-g", "-p", str(pid), "-o", out]
    else:
        argv = ["strace", "-c", "-f", "-p", str(pid), "-o", out]
    tool = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)  # attached before the clock starts
    try:
        yield
    finally:
        tool.send_signal(signal.SIGINT)
        tool.wait(60)


def measure(pid: int, port: int, workload: str, args: argparse.Namespace, opaque: int) -> int:
    """Run ``workload``'s rounds on one connection, print each; the next free opaque."""
    tool = next((t for t in ("py_spy", "strace", "perf") if getattr(args, t)), None)
    out = getattr(args, tool) if tool else None
    n, per = (args.sync, 1) if workload == "sync" else (args.batches, BATCH)
    make, drive = (sync_frames, run_sync) if workload == "sync" else (batch_frames, run_batched)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        warm = make(min(n, 500), opaque)
        opaque += len(warm)
        drive(sock, warm)
        figures = []
        for r in range(args.rounds):
            frames = make(n, opaque)
            opaque += n
            with attached(tool if r == 0 else None, out, pid):
                threads0 = thread_cpu_s(pid)
                cpu0, t0 = proc_cpu_s(pid), time.perf_counter()
                drive(sock, frames)
                cpu1, t1 = proc_cpu_s(pid), time.perf_counter()
                threads1 = thread_cpu_s(pid)
            user = (cpu1[0] - cpu0[0]) / (n * per) * 1e6
            system = (cpu1[1] - cpu0[1]) / (n * per) * 1e6
            figures.append(user + system)
            print(f"{workload:8s} round {r}: {user + system:6.2f} µs broker CPU per "
                  f"{'request' if per == 1 else 'message'} (user {user:.2f}, system "
                  f"{system:.2f}), {n * per / (t1 - t0):9,.0f} msgs/s", flush=True)  # fmt: skip
            if args.threads:
                scale = 1e6 / (n * per)
                spent = {k: (v - threads0.get(k, 0.0)) * scale for k, v in threads1.items()}
                ranked = sorted(spent.items(), key=lambda kv: -kv[1])
                print("    by thread: " + ", ".join(f"{k} {v:.2f}" for k, v in ranked if v))
    print(f"{workload:8s} median {statistics.median(figures):6.2f} (range {min(figures):.2f}"
          f"-{max(figures):.2f})  load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    return opaque


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker-python", default=sys.executable)
    parser.add_argument("--workloads", nargs="+", default=["sync", "batched"])
    parser.add_argument("--sync", type=int, default=20_000, help="one-at-a-time sends per round")
    parser.add_argument("--batches", type=int, default=3_000, help="batches of 100 per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--start-timeout", type=float, default=30,
        help="seconds the broker may take to listen (more under valgrind)",
    )  # fmt: skip
    parser.add_argument("--py-spy", help="record the first round's broker into this file")
    parser.add_argument("--strace", help="strace -c the first round's broker into this file")
    parser.add_argument("--perf", help="perf record -g the first round's broker into this file")
    parser.add_argument("--threads", action="store_true", help="split the CPU by thread")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="broker_cost") as tmp,
        standalone(args.broker_python, Path(tmp), args.start_timeout) as (proc, port),
    ):
        create_topic(port)
        opaque = 10
        for workload in args.workloads:
            opaque = measure(proc.pid, port, workload, args, opaque)


if __name__ == "__main__":
    main()
