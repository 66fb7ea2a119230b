"""A peer sending frames full of garbage cannot make a broker process flood its log."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from apogee.codes import ResponseCode
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess
from tests.integration.broker.wire import send


async def test_frames_with_a_huge_string_code_leave_a_short_log(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "store", "")
    broker.start()
    try:
        before = broker.log_path.stat().st_size
        code = b'"' + b"x" * (2 << 20) + b'"'
        header = b'{"code":' + code + b',"opaque":1}'
        frame = struct.pack(">ii", 4 + len(header), len(header)) + header
        for _ in range(40):  # 80 MiB of values to quote
            _, writer = await asyncio.open_connection("127.0.0.1", broker.port)
            writer.write(frame)
            await writer.drain()
            writer.close()
        async with RemotingClient() as client:  # the broker serves on
            answer = await send(client, broker.address, "T", b"after")
            assert answer.code == ResponseCode.SUCCESS
        grown = broker.log_path.stat().st_size - before
        assert grown < 64 * 1024, broker.log_text()[-2000:]
    finally:
        broker.stop()
