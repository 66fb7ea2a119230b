"""maxConnections derived from the descriptor limit: a broker process started with a low
soft RLIMIT_NOFILE refuses connections below it and still has descriptors for new store files.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import Iterator
from pathlib import Path

from apogee.codes import ResponseCode
from apogee.model.message_codec import iter_records
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess
from tests.integration.broker.wire import pull, send

SOFT_LIMIT = 1024
NEW_TOPICS = 100  # each send to a new topic makes a consume-queue file (one descriptor)


@contextlib.contextmanager
def soft_fd_limit(soft: int) -> Iterator[None]:
    """This process's soft descriptor limit lowered (a child started inside inherits it)."""
    old_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (old_soft, hard))


async def test_a_broker_caps_connections_below_its_descriptor_limit_with_room_for_the_store(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "store", "")
    with soft_fd_limit(SOFT_LIMIT):
        broker.start()
    held: list[asyncio.StreamWriter] = []
    try:
        async with RemotingClient() as client:
            assert (await send(client, broker.address, "T0", b"m")).code == ResponseCode.SUCCESS
            peers = [
                await asyncio.open_connection("127.0.0.1", broker.port) for _ in range(SOFT_LIMIT)
            ]
            held = [writer for _, writer in peers]
            await asyncio.sleep(1.0)  # refused ones are closed at once; let them all be
            accepted = 0
            for reader, _ in peers:
                try:
                    closed = await asyncio.wait_for(reader.read(1), 0.001) == b""
                except TimeoutError:
                    closed = False
                accepted += not closed
            cap = accepted + 1  # and the client's own connection
            assert SOFT_LIMIT // 4 <= cap < SOFT_LIMIT  # never every descriptor; not few
            assert SOFT_LIMIT - cap >= NEW_TOPICS + 64  # the store's files, the log's, ...
            # With every connection place taken, the store still opens new files.
            for i in range(1, NEW_TOPICS + 1):
                answer = await send(client, broker.address, f"T{i}", f"m{i}".encode())
                assert answer.code == ResponseCode.SUCCESS, answer.remark
            answer = await pull(client, broker.address, f"T{NEW_TOPICS}", 0, 0)
            assert [r.body for r in iter_records(answer.body_bytes())] == [
                f"m{NEW_TOPICS}".encode()
            ]
        assert broker.proc is not None and broker.proc.poll() is None
        assert "maxConnections is" in broker.log_text()
    finally:
        for writer in held:
            writer.close()
        assert broker.stop() == 0, broker.log_text()[-3000:]
