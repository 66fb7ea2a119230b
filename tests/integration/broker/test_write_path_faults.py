"""Write-path faults at the broker: one bad send never stops or silences the others."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

import orjson
import pytest

from apogee.codes import RequestCode, ResponseCode
from apogee.remoting.client import RemotingClient
from apogee.store.config import FlushDiskType
from apogee.testing.cluster import run_broker
from tests.harness.store_faults import refuse_writes
from tests.integration.broker.wire import pull_request, send, send_request


def raw_frame(header: dict[str, object], body: bytes = b"") -> bytes:
    """A JSON-header frame written by hand, for headers our own codec will not build."""
    data = orjson.dumps(header)
    return struct.pack(">ii", 4 + len(data) + len(body), len(data)) + data + body


async def read_answer(reader: asyncio.StreamReader) -> dict[str, object]:
    length = struct.unpack(">i", await reader.readexactly(4))[0]
    header: dict[str, object] = orjson.loads((await reader.readexactly(length))[4:])
    return header


def v2_send_header(**fields: str) -> dict[str, object]:
    ext = send_request("T", code=RequestCode.SEND_MESSAGE_V2).ext_fields
    return {"code": RequestCode.SEND_MESSAGE_V2, "language": "JAVA", "version": 401,
            "opaque": 7, "flag": 0, "extFields": {**ext, **fields}}  # fmt: skip


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
@pytest.mark.parametrize(
    ("key", "value"),
    [("h", str(2**31)), ("f", str(2**31)), ("j", str(-(2**31) - 1)), ("g", str(2**63))],
    ids=["flag", "sysFlag", "reconsumeTimes", "bornTimestamp"],
)
async def test_a_send_with_a_number_too_wide_is_refused_and_later_sends_are_served(
    tmp_path: Path, flush: FlushDiskType, key: str, value: str
) -> None:
    async with (
        run_broker(tmp_path / "store", store={"flush_disk_type": flush}) as broker,
        RemotingClient() as client,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        writer.write(raw_frame(v2_send_header(**{key: value})))
        answer = await asyncio.wait_for(read_answer(reader), 10)
        writer.close()
        assert answer["code"] == ResponseCode.SYSTEM_ERROR
        remark = str(answer["remark"])
        assert repr(key) in remark and "does not fit" in remark

        await asyncio.sleep(1.2)  # past osPageCacheBusyTimeOutMills (1 s)
        for _ in range(3):
            ok = await asyncio.wait_for(send(client, broker.address, "T", b"after"), 10)
            assert ok.code == ResponseCode.SUCCESS, ok.remark


async def test_an_unanswerable_send_in_a_group_commit_leaves_the_other_answers_alone(
    tmp_path: Path,
) -> None:
    """A JSON opaque of 1.5e300 cannot be answered: its connection closes, nobody else notices."""
    store = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}
    async with run_broker(tmp_path / "store", store=store) as broker, RemotingClient() as client:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        bad = v2_send_header()
        bad["opaque"] = 1.5e300
        sends = [send(client, broker.address, "T", f"m{i}".encode()) for i in range(200)]
        writer.write(raw_frame(bad, b"bad"))
        answers = await asyncio.wait_for(asyncio.gather(*sends), 20)

        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 200
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed without an answer
        writer.close()
        again = await send(client, broker.address, "T", b"after")
        assert again.code == ResponseCode.SUCCESS


async def test_a_failed_fsync_answers_its_sends_and_refuses_writes_until_restart(
    tmp_path: Path,
) -> None:
    """After a failed fsync nothing later can be vouched for: no more acknowledgements."""
    store_config = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}
    async with (
        run_broker(tmp_path / "store", store=store_config) as broker,
        RemotingClient() as client,
    ):
        ok = await send(client, broker.address, "T", b"durable")
        assert ok.code == ResponseCode.SUCCESS
        store = broker.store
        assert store is not None and store.group_commit is not None
        sync = store.group_commit.sync
        assert sync is not None
        # The seam where a disk error shows: the sync loop's descriptor of
        # the current commit-log file becomes a pipe, whose fdatasync fails.
        seg = store.commit_log.queue.segments[-1]
        read_end, write_end = os.pipe()
        sync.add_file(seg.start, seg.size, read_end)
        os.close(read_end)
        os.close(write_end)

        started = asyncio.get_running_loop().time()
        first = await send(client, broker.address, "T", b"not durable")
        assert first.code == ResponseCode.FLUSH_DISK_TIMEOUT  # stored, not vouched for
        assert asyncio.get_running_loop().time() - started < 2  # not after syncFlushTimeout

        sync.add_file(seg.start, seg.size, seg.fd)  # a good descriptor again proves nothing
        later = await send(client, broker.address, "T", b"refused")
        assert later.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "fsync failed" in (later.remark or "")
        again = await send(client, broker.address, "T", b"refused too")
        assert again.code == ResponseCode.SERVICE_NOT_AVAILABLE
        pulled = await client.invoke(broker.address, pull_request("T", 0, 0))
        assert pulled.code == ResponseCode.SUCCESS  # reads go on


async def test_a_refused_commit_log_write_answers_its_sync_sends_at_once(tmp_path: Path) -> None:
    """SYNC_FLUSH: a send is stored in memory and written at the loop's next commit; a
    write the file system refuses answers its send then, and later sends are refused."""
    store_config = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}
    async with (
        run_broker(tmp_path / "store", store=store_config) as broker,
        RemotingClient() as client,
    ):
        assert (await send(client, broker.address, "T", b"durable")).code == ResponseCode.SUCCESS
        store = broker.store
        assert store is not None
        # The seam: the next commit-log write fails (EBADF) as a refusing file system's would.
        refuse_writes(store)

        started = asyncio.get_running_loop().time()
        first = await send(client, broker.address, "T", b"never written")
        assert first.code == ResponseCode.FLUSH_DISK_TIMEOUT  # not vouched for
        assert asyncio.get_running_loop().time() - started < 2  # not after syncFlushTimeout
        later = await send(client, broker.address, "T", b"refused")
        assert later.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "commit-log write failed" in (later.remark or "")
        pulled = await client.invoke(broker.address, pull_request("T", 0, 0))
        assert pulled.code == ResponseCode.SUCCESS  # reads go on, up to the durable one
        assert pulled.ext_fields["nextBeginOffset"] == "1"
