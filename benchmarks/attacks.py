"""Hostile clients against a real ``apogee broker`` process with configured caps.

For each attack: is the broker still alive, its largest RSS during the attack
(VmRSS sampled every 50 ms, and VmHWM) against its caps, the send latency of
another, well-behaved client measured during the attack against the 100 ms
bound, and whether every message that client got acknowledged is readable
afterwards. Not a test: it prints a table, it asserts nothing.

    .venv/bin/python benchmarks/attacks.py                 # every attack
    .venv/bin/python benchmarks/attacks.py --only parked --parked-connections 50
    .venv/bin/python benchmarks/attacks.py --no-tmpfs      # without mounting tmpfs (needs root)
    .venv/bin/python benchmarks/attacks.py --only parked --probe /tmp/broker-probe.json

With ``--probe FILE`` the broker runs ``loop_probe`` (its cycle collections) and the
parked-pull attack prints each phase's collections: how many of each generation, the
longest (wall and CPU time), the number over 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import struct
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from apogee.client.broker_api import BrokerApi
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import ApogeeError
from apogee.model.message import Message, properties_to_string
from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess
from apogee.testing.reading import read_queue

MIB = 1 << 20
BOUND_MS = 100.0
SUSPEND = 0x2 | 0x4  # FLAG_SUSPEND | FLAG_SUBSCRIPTION

#: the caps the broker runs with (broker.conf keys)
CAPS = {
    "maxPendingFrameBytes": str(256 * MIB),
    "frameReadTimeoutMs": "10000",
    "maxWriteBufferBytes": str(16 * MIB),
    "maxParkedPulls": "200000",
    "maxParkedPullsPerConnection": "1000",
}
CAPS_TEXT = "frames 256M, answers 16M/conn, parked 200k"


@dataclass
class Probe:
    """A well-behaved producer: one small send every ``interval_s``, each one timed."""

    api: BrokerApi
    addr: str
    tag: str
    interval_s: float = 0.02
    latencies_ms: list[float] = field(default_factory=list)
    started: list[float] = field(default_factory=list)  # perf_counter at each send
    acked: list[bytes] = field(default_factory=list)
    refused: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        i = 0
        while not stop.is_set():
            body = f"{self.tag}-{i}".encode()
            began = time.perf_counter()
            try:
                await self.api.send(self.addr, "broker-a", Message("Probe", body), queue_id=0,
                                    producer_group="probe", timeout_s=10)  # fmt: skip
                self.acked.append(body)
            except (ApogeeError, TimeoutError):
                self.refused += 1
            self.latencies_ms.append((time.perf_counter() - began) * 1000)
            self.started.append(began)
            i += 1
            await asyncio.sleep(self.interval_s)

    def since(self, moment: float, until: float = float("inf")) -> str:
        """p50/p99/max of the sends begun in [``moment``, ``until``) (perf_counter)."""
        lat = sorted(ms for t, ms in zip(self.started, self.latencies_ms, strict=True)
                     if moment <= t < until)  # fmt: skip
        if not lat:
            return "no sends"
        p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        return f"p50 {p50:.1f} / p99 {p99:.1f} / max {lat[-1]:.1f} ms over {len(lat)} sends"


#: the probe of the attack running now, for attacks that report a phase of their own
current_probe: Probe | None = None
#: the broker's loop_probe file (``--probe``), read back after the broker stopped
probe_file: Path | None = None
#: the phases of the parked-pull attack: (name, start, end), CLOCK_MONOTONIC ns
phases: list[tuple[str, int, int]] = []


@dataclass
class Row:
    attack: str
    detail: str
    alive: bool
    rss_max_mib: float
    hwm_mib: float
    probe: Probe
    readable: int

    def cells(self) -> list[str]:
        lat = sorted(self.probe.latencies_ms) or [float("nan")]

        def pct(p: float) -> float:
            return lat[min(len(lat) - 1, int(p * len(lat)))]

        within = "yes" if lat[-1] <= BOUND_MS else "NO"
        acked = len(self.probe.acked)
        return [
            self.attack, "yes" if self.alive else "NO", f"{self.rss_max_mib:.0f}",
            f"{self.hwm_mib:.0f}", f"{pct(0.5):.1f}", f"{pct(0.99):.1f}", f"{lat[-1]:.1f}",
            within, f"{self.readable}/{acked}" + (f" ({self.probe.refused} refused)"
                                                   if self.probe.refused else ""),
            self.detail,
        ]  # fmt: skip


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


async def measure(name: str, broker: BrokerProcess, attack: Callable[[str], Awaitable[str]]) -> Row:
    """Run ``attack`` while the probe sends and RSS is sampled; then read the probe back."""
    assert broker.proc is not None
    pid = broker.proc.pid
    stop = asyncio.Event()
    rss_max = 0.0

    async def sample() -> None:
        nonlocal rss_max
        while not stop.is_set():
            with contextlib.suppress(OSError, KeyError):
                rss_max = max(rss_max, memory(pid)[0])
            await asyncio.sleep(0.05)

    async with RemotingClient() as remoting:
        api = BrokerApi(remoting)
        global current_probe  # noqa: PLW0603  # one attack at a time
        probe = current_probe = Probe(api, broker.address, name)
        tasks = [asyncio.ensure_future(probe.run(stop)), asyncio.ensure_future(sample())]
        try:
            detail = await attack(broker.address)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
        alive = broker.proc.poll() is None
        hwm = memory(pid)[1] if alive else float("nan")
        readable = 0
        if alive:
            stored = {m.body for m in await read_queue(api, broker.address, "Probe", 0)}
            readable = sum(body in stored for body in probe.acked)
    return Row(name, detail, alive, rss_max, hwm, probe, readable)


# -- raw frames ----------------------------------------------------------------------------


def pull_frame(topic: str, queue_id: int, offset: int, opaque: int, **kw: object) -> bytes:
    header = PullMessageRequestHeader(
        consumer_group="attack", topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=int(kw.get("max_msgs", 32)), sys_flag=int(kw.get("sys_flag", SUSPEND)),  # type: ignore[call-overload]
        commit_offset=0, suspend_timeout_millis=int(kw.get("suspend_ms", 60_000)),  # type: ignore[call-overload]
        sub_version=0, subscription=str(kw.get("subscription", "*")),
    )  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    cmd.opaque = opaque
    return encode_bytes(cmd)


async def answers_until(reader: asyncio.StreamReader, opaque: int) -> list[RemotingCommand]:
    """Answers read until the one with ``opaque`` (or the connection's end)."""
    decoder, got = FrameDecoder(), []
    while True:
        chunk = await reader.read(1 << 20)
        if not chunk:
            return got
        got += decoder.feed(chunk)
        if any(a.opaque == opaque for a in got):
            return got


def host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


# -- the attacks ---------------------------------------------------------------------------


async def header_ranges(addr: str) -> str:
    """Send headers with absurd queueId / sysFlag / bornTimestamp values."""
    bad = [("queueId", "2147483647"), ("queueId", "-1"), ("queueId", "99999999999999999999"),
           ("sysFlag", "2147483647"), ("sysFlag", "-2147483648"), ("sysFlag", "4294967296"),
           ("bornTimestamp", "9223372036854775807"), ("bornTimestamp", "-9223372036854775808"),
           ("bornTimestamp", "1" + "0" * 40), ("bornTimestamp", "abc")]  # fmt: skip
    codes: dict[int, int] = {}
    accepted: set[str] = set()
    reader, writer = await asyncio.open_connection(*host_port(addr))
    rounds = 2000
    for r in range(rounds):
        cmds = [
            RemotingCommand.request(
                RequestCode.SEND_MESSAGE, {**_send_ext("Hostile"), key: value}, b"x" * 100
            )
            for key, value in bad
        ]
        for i, cmd in enumerate(cmds):
            cmd.opaque = r * len(bad) + i
        writer.write(b"".join(encode_bytes(c) for c in cmds))
        await writer.drain()
        for answer in await answers_until(reader, r * len(bad) + len(bad) - 1):
            codes[answer.code] = codes.get(answer.code, 0) + 1
            if answer.code == ResponseCode.SUCCESS:
                accepted.add("=".join(bad[answer.opaque % len(bad)]))
    writer.close()
    shown = ", ".join(f"{n}x code {c}" for c, n in sorted(codes.items()))
    return f"{rounds * len(bad)} sends: {shown}; stored: {', '.join(sorted(accepted))}"


def _send_ext(topic: str) -> dict[str, str]:
    header = SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string({"WAIT": "true"}),
    )  # fmt: skip
    return dict(header.to_ext())


TAG_PULLS = 30


def many_tag_frames() -> list[bytes]:
    """The frames of ``many_tags``, built before the probe starts.

    Building them takes ~0.14 s of CPU: in the attack, that would stall the
    probe, which shares this process's loop, and count as the broker's delay.
    """
    expression = " || ".join(f"tag{i}" for i in range(100_000))
    return [pull_frame("Probe", 0, 0, i, subscription=expression, sys_flag=0x4)
            for i in range(TAG_PULLS)]  # fmt: skip


async def many_tags(addr: str, frames: list[bytes]) -> str:
    """Pulls whose subscription expression names 100k tags (about 1.1 MB each)."""
    reader, writer = await asyncio.open_connection(*host_port(addr))
    count = len(frames)
    began = time.perf_counter()
    for frame in frames:
        writer.write(frame)
        await writer.drain()
    got = await answers_until(reader, count - 1)
    took = time.perf_counter() - began
    writer.close()
    codes = sorted({a.code for a in got})
    return f"{count} pulls of {len(frames[0]) // 1024} KiB: codes {codes}, {took:.1f}s"


async def half_frames(addr: str, connections: int = 200, hold_s: float = 8.0) -> str:
    """Connections that each send half of a 16 MiB frame and then wait."""
    half = memoryview(bytes(8 * MIB))
    # the length field counts what follows it: a frame of 16 MiB in all (the largest taken)
    head = struct.pack(">ii", 16 * MIB - 4, 200)
    peers = []
    for _ in range(connections):
        reader, writer = await asyncio.open_connection(*host_port(addr))
        writer.write(head)
        writer.write(half[: 8 * MIB - len(head)])
        peers.append((reader, writer))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
    await asyncio.sleep(hold_s)
    closed = 0
    for reader, writer in peers:
        try:
            closed += await asyncio.wait_for(reader.read(1), 0.01) == b""
        except ConnectionError:
            closed += 1
        except TimeoutError:
            pass
        writer.close()
    return (
        f"{connections} x 8 MiB of 16 MiB frames held {hold_s:.0f}s: {closed} closed by the broker"
    )


async def non_reader(addr: str, requests: int = 20_000, seconds: float = 10.0) -> str:
    """One connection asks for 2 MiB answers over and over and never reads them."""
    async with RemotingClient() as remoting:  # 32 messages of 64 KiB to pull
        api = BrokerApi(remoting)
        for _ in range(32):
            await api.send(addr, "broker-a", Message("Big", bytes(64 * 1024)), queue_id=0,
                           producer_group="pg")  # fmt: skip
    reader, writer = await asyncio.open_connection(*host_port(addr))
    frame = pull_frame("Big", 0, 0, 1, sys_flag=0x4, max_msgs=32)
    began = time.perf_counter()
    sent = 0
    closed_after = None
    with contextlib.suppress(ConnectionError):
        while sent < requests and time.perf_counter() - began < seconds:
            writer.write(frame * 100)
            sent += 100
            with contextlib.suppress(TimeoutError):  # it stopped reading us: queue on
                await asyncio.wait_for(writer.drain(), 0.5)
            if writer.transport.is_closing() or reader.at_eof():
                break
    # Did the broker close it? Reading now drains what it sent, then meets the end.
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(1 << 20):
                pass
        closed_after = time.perf_counter() - began
    except ConnectionError:  # reset: closed with answers still unread
        closed_after = time.perf_counter() - began
    except TimeoutError:
        closed_after = None
    writer.close()
    if closed_after is None:
        return f"{sent} pulls of 2 MiB answers sent; NOT closed"
    return f"{sent} pulls of 2 MiB answers sent; closed by the broker after {closed_after:.1f}s"


async def parked(addr: str, connections: int = 200, per_connection: int = 1000) -> str:
    """``connections`` x ``per_connection`` parked pulls, then every connection closed."""
    async with RemotingClient() as remoting:
        api = BrokerApi(remoting)
        await api.send(addr, "broker-a", Message("Park", b"m"), queue_id=0, producer_group="pg")
    pull = pull_frame("Park", 0, 1, 0)
    marker = per_connection  # a pull without SUSPEND: answered at once, after the others
    began = time.perf_counter()
    began_ns = time.monotonic_ns()
    peers = []
    for _ in range(connections):
        reader, writer = await asyncio.open_connection(*host_port(addr))
        writer.write(pull * per_connection + pull_frame("Park", 0, 1, marker, sys_flag=0x4))
        peers.append((reader, writer))
    busy = 0
    for reader, _ in peers:
        busy += sum(a.code == ResponseCode.SYSTEM_BUSY for a in await answers_until(reader, marker))
    took = time.perf_counter() - began
    closing = time.perf_counter()
    closing_ns = time.monotonic_ns()
    for _, writer in peers:
        writer.close()
    await asyncio.sleep(2.0)  # the broker drops them; the probe goes on meanwhile
    phases[:] = [("parking", began_ns, closing_ns), ("closing", closing_ns, time.monotonic_ns())]
    total = connections * per_connection
    probe = current_probe
    parking = probe.since(began, closing) if probe is not None else "?"
    after = probe.since(closing) if probe is not None else "?"
    return (f"{total - busy} of {total} parked in {took:.1f}s ({busy} busy), then all closed;"
            f" probe while parking: {parking}; from the closes on: {after}")  # fmt: skip


async def fill_disk(addr: str, seconds_after: float = 2.0) -> str:
    """Send 256 KiB messages until the disk is full, then keep the probe going."""
    acked = refused = 0
    body = bytes(256 * 1024)
    async with RemotingClient() as remoting:
        api = BrokerApi(remoting)
        full_at = None
        while full_at is None or time.perf_counter() - full_at < seconds_after:
            try:
                await api.send(addr, "broker-a", Message("Fill", body), queue_id=0,
                               producer_group="pg", timeout_s=10)  # fmt: skip
                acked += 1
            except (ApogeeError, TimeoutError):
                refused += 1
                full_at = full_at or time.perf_counter()
                await asyncio.sleep(0.05)
        stored = len(await read_queue(api, addr, "Fill", 0))
    return f"filler: {acked} acked, {stored} of them readable, {refused} refused (disk full)"


# -- running -------------------------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def broker_process(store: Path, **extra: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(store, "", properties={**CAPS, **extra})
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


async def prepare(addr: str) -> None:
    async with RemotingClient() as remoting:
        api = BrokerApi(remoting)
        await api.send(addr, "broker-a", Message("Probe", b"first"), queue_id=0,
                       producer_group="probe")  # fmt: skip


def use_probe(path: Path) -> None:
    """Make the brokers started from now on run ``loop_probe`` into ``path``."""
    global probe_file  # noqa: PLW0603  # set once, from the command line
    probe_file = path
    here = Path(__file__).resolve().parent
    os.environ["APOGEE_LOOP_PROBE"] = str(path)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(here / "probe_site"), str(here), *filter(None, [os.environ.get("PYTHONPATH")])]
    )


def collections_text() -> str:
    """The broker's cycle collections in each phase of the parked-pull attack."""
    if probe_file is None or not phases or not probe_file.exists():
        return ""
    collections = json.loads(probe_file.read_text())["gc"]
    lines = ["broker cycle collections (generation: count, longest wall / CPU ms, over 10 ms):"]
    for name, start, end in phases:
        cells = []
        for gen in (0, 1, 2):
            mine = [(wall, cpu) for t, wall, g, _, cpu in collections
                    if g == gen and start <= t < end]  # fmt: skip
            if mine:
                wall = max(w for w, _ in mine) / 1e6
                cpu = max(c for _, c in mine) / 1e6
                over = sum(w > 10e6 for w, _ in mine)
                cells.append(f"gen{gen}: {len(mine)}, {wall:.1f} / {cpu:.1f}, {over}")
            else:
                cells.append(f"gen{gen}: 0")
        lines.append(f"  {name}: " + "; ".join(cells))
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    if args.probe:
        use_probe(Path(args.probe).resolve())
    wanted = not args.only or args.only in "100k tags"
    tag_frames = many_tag_frames() if wanted else []
    attacks: dict[str, Callable[[str], Awaitable[str]]] = {
        "header ranges": header_ranges,
        "100k tags": lambda a: many_tags(a, tag_frames),
        "half frames": lambda a: half_frames(a, args.half_connections),
        "non-reader": non_reader,
        "parked pulls": lambda a: parked(a, args.parked_connections),
    }
    rows: list[Row] = []
    root = Path(tempfile.mkdtemp(prefix="apogee-attacks-"))
    with broker_process(root / "store") as broker:
        await prepare(broker.address)
        for name, attack in attacks.items():
            if args.only and args.only not in name:
                continue
            print(f"running: {name}", flush=True)
            rows.append(await measure(name, broker, attack))
    collected = collections_text()  # the broker wrote its probe as it stopped
    if not args.no_tmpfs and (not args.only or "tmpfs" in args.only):
        for mode in ("SYNC_FLUSH", "ASYNC_FLUSH"):
            print(f"running: full tmpfs {mode}", flush=True)
            with (
                tmpfs(root / f"tmpfs-{mode}", "64m") as mnt,
                broker_process(mnt / "store", flushDiskType=mode) as broker,
            ):
                await prepare(broker.address)
                rows.append(await measure(f"full tmpfs {mode}", broker, fill_disk))
    print_table(rows)
    if collected:
        print(f"\n{collected}")


def print_table(rows: list[Row]) -> None:
    head = ["attack", "alive", "RSS max MiB", "HWM MiB", "p50 ms", "p99 ms", "max ms",
            f"<= {BOUND_MS:.0f} ms", "probe readable/acked", "what happened"]  # fmt: skip
    table = [head] + [row.cells() for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    print(f"\ncaps: {CAPS_TEXT}")
    for i, r in enumerate(table):
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        if i == 0:
            print("-+-".join("-" * w for w in widths))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--only", help="run the attacks whose name contains this text")
    p.add_argument("--half-connections", type=int, default=200)
    p.add_argument("--parked-connections", type=int, default=200,
                   help="connections of 1000 parked pulls each (200: 200k)")  # fmt: skip
    p.add_argument("--no-tmpfs", action="store_true", help="skip the full-disk runs")
    p.add_argument("--probe", metavar="FILE",
                   help="run loop_probe in the broker, its report in FILE (see above)")  # fmt: skip
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
