"""A real ``apogee broker`` whose store lives on a small tmpfs that fills up.

On a full disk the broker must not crash (every mapped file is reserved in
full when it is made, so no write through a mapping can fault), must refuse
writes with SERVICE_NOT_AVAILABLE while reads go on, must start again on the
still-full disk (read-only), and must take writes again once space is freed,
with every acknowledged message there and findable by key.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.client.broker_api import BrokerApi
from apogee.codes import ResponseCode
from apogee.errors import ApogeeError
from apogee.model.message import Message
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess, eventually
from apogee.testing.reading import read_queue

TOPICS = ("Full0", "Full1")
FRESH = "Fresh"  # first written on the full disk: no room for its consume-queue file
BODY = 16 * 1024


@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` (needs root, as the CI machine is)."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert mounted.returncode == 0, f"cannot mount a tmpfs for the test: {mounted.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> int:
    """Write ``path`` until the file system has no byte left; the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as out:
        for chunk in (1 << 20, 4096, 1):
            block = b"\0" * chunk
            while True:
                try:
                    written += out.write(block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    return written


class Sender:
    """Keyed sends, remembering what was acknowledged and what was refused."""

    def __init__(self, api: BrokerApi, addr: str) -> None:
        self.api = api
        self.addr = addr
        self.acked: dict[str, bytes] = {}
        self.topic_of: dict[str, str] = {}
        self.refusals: list[int] = []
        self.n = 0

    async def send(self, topic: str) -> bool:
        self.n += 1
        key = f"key-{self.n}"
        body = key.encode().ljust(BODY, b"\0")
        msg = Message(topic, body, properties={"KEYS": key})
        try:
            await self.api.send(
                self.addr, "broker-a", msg, queue_id=self.n % 2, producer_group="pg"
            )
        except ApogeeError as exc:
            self.refusals.append(exc.code)
            return False
        self.acked[key] = body
        self.topic_of[key] = topic
        return True


async def stored(api: BrokerApi, addr: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for topic in (*TOPICS, FRESH):
        for queue_id in (0, 1):
            for m in await read_queue(api, addr, topic, queue_id):
                out[m.keys or ""] = m.body
    return out


@pytest.mark.slow
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(
    tmp_path: Path, flush: str
) -> None:
    with tmpfs(tmp_path / "disk", 40 << 20) as disk:
        broker = BrokerProcess(
            disk / "store", "", properties={"flushDiskType": flush}, log_dir=tmp_path
        )
        broker.start()
        try:
            async with RemotingClient() as client:
                api = BrokerApi(client, timeout_s=10)
                sender = Sender(api, broker.address)
                for i in range(40):
                    assert await sender.send(TOPICS[i % 2])
                filler = disk / "filler"
                fill(filler)

                # Write until the broker refuses: every answer is an ack or a 14.
                for i in range(2000):
                    if not await sender.send(FRESH if i == 0 else TOPICS[i % 2]):
                        break
                assert broker.proc is not None and broker.proc.poll() is None
                assert sender.refusals, "the full disk never refused a write"
                assert set(sender.refusals) == {ResponseCode.SERVICE_NOT_AVAILABLE}
                assert not await sender.send(TOPICS[0])  # still refused

                # Reads go on: what was dispatched before the disk filled is there.
                early = await stored(api, broker.address)
                assert len(early) >= 40
                assert all(sender.acked[k] == v for k, v in early.items())

            # A crash, and a start on the still-full disk: read-only, not a crash.
            broker.kill()
            broker.start()
            async with RemotingClient() as client:
                api = BrokerApi(client, timeout_s=10)
                sender2 = Sender(api, broker.address)
                sender2.n = 100_000
                assert not await sender2.send(TOPICS[0])
                assert sender2.refusals == [ResponseCode.SERVICE_NOT_AVAILABLE]
                assert len(await stored(api, broker.address)) >= len(early)

                # Space comes back: writes are taken again within a cleaning round.
                os.unlink(filler)

                async def accepted() -> bool:
                    return await sender2.send(TOPICS[1])

                await eventually(accepted, timeout_s=30, interval_s=0.5)
                everything = {**sender.acked, **sender2.acked}

                async def all_there() -> dict[str, bytes] | None:
                    found = await stored(api, broker.address)
                    return found if set(everything) <= set(found) else None

                found = await eventually(all_there, timeout_s=15, interval_s=0.5)
                assert all(found[k] == v for k, v in everything.items())
                # The index caught up too, with what was acknowledged on the full disk.
                last = max(sender.acked, key=lambda k: int(k.split("-")[1]))
                hits = await api.query_message(broker.address, sender.topic_of[last], last)
                assert [m.body for m in hits] == [sender.acked[last]]
            assert broker.proc is not None and broker.proc.poll() is None
        finally:
            broker.stop()
            log = broker.log_text()
        assert "Traceback" not in log, log[-4000:]
        assert "disk" in log.lower()
