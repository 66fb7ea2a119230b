"""The bounds a server puts on its peers (apogee.remoting.limits), each cutting off only the peer.

Real sockets on 127.0.0.1; each test checks the offender is closed and a
well-behaved peer of the same server is still served.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import encode_bytes
from apogee.remoting import HandlerTable, RemotingClient, RemotingServer, RequestContext
from apogee.remoting.config import ServerConfig
from apogee.remoting.limits import ServerLimits

ECHO = 1000
BIG = 1001
BIG_BODY = b"x" * (256 * 1024)


def echo(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    return req.make_response(body=req.body_bytes())


def big(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
    return req.make_response(body=BIG_BODY)


@asynccontextmanager
async def serving(limits: ServerLimits, **config: object) -> AsyncIterator[RemotingServer]:
    table = HandlerTable()
    table.register(ECHO, echo)
    table.register(BIG, big)
    server = RemotingServer(table, ServerConfig(host="127.0.0.1", limits=limits, **config))  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace_s=0.5)


async def still_served(server: RemotingServer) -> None:
    async with RemotingClient() as client:
        answer = await client.invoke(
            f"127.0.0.1:{server.port}", RemotingCommand.request(ECHO, body=b"ok"), 5
        )
        assert answer.body == b"ok"


async def closed_by_server(reader: asyncio.StreamReader, within_s: float = 5.0) -> bool:
    """Whether the server closes (or resets) the connection within ``within_s``."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(65536):
                pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


async def test_connections_beyond_the_limit_are_closed_at_once() -> None:
    async with serving(ServerLimits(max_connections=3)) as server:
        peers = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await closed_by_server(reader)
        assert server.refused_connections == 1
        writer.close()
        for _, w in peers:
            w.close()
        await asyncio.sleep(0.05)
        await still_served(server)


async def test_partial_frames_over_the_total_budget_close_the_connection_that_went_over() -> None:
    limits = ServerLimits(max_pending_frame_bytes=1 << 20)
    async with serving(limits) as server:
        frame = encode_bytes(RemotingCommand.request(ECHO, body=b"a" * (700 * 1024)))
        first_r, first_w = await asyncio.open_connection("127.0.0.1", server.port)
        first_w.write(frame[: 600 * 1024])
        await first_w.drain()
        await asyncio.sleep(0.2)
        second_r, second_w = await asyncio.open_connection("127.0.0.1", server.port)
        second_w.write(frame[: 600 * 1024])
        await second_w.drain()
        assert await closed_by_server(second_r)  # it went over: closed
        assert server.pending_frame_bytes == 600 * 1024
        first_w.write(frame[600 * 1024 :])  # the first one completes its frame
        length = struct.unpack(">i", await asyncio.wait_for(first_r.readexactly(4), 5))[0]
        assert length > 700 * 1024
        assert server.pending_frame_bytes == 0
        first_w.close()
        second_w.close()


async def test_a_frame_trickling_in_is_cut_off_at_the_frame_timeout() -> None:
    async with serving(ServerLimits(frame_timeout_s=1.0), idle_timeout_s=60.0) as server:
        frame = encode_bytes(RemotingCommand.request(ECHO, body=b"slow"))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        began = asyncio.get_running_loop().time()
        closed = False
        for byte in frame[:-1]:  # one byte every 0.3 s: never idle, never complete
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionResetError:
                closed = True
                break
            if await closed_by_server(reader, 0.3):
                closed = True
                break
        writer.close()
        assert closed
        assert asyncio.get_running_loop().time() - began < 5
        await still_served(server)


async def test_a_peer_that_never_reads_its_answers_is_cut_off() -> None:
    limits = ServerLimits(max_write_buffer_bytes=4 << 20)
    async with serving(limits, write_high_water_bytes=256 * 1024) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        # 200 small requests in one write: each answer is 256 KiB, 50 MiB in all.
        writer.write(b"".join(encode_bytes(RemotingCommand.request(BIG)) for _ in range(200)))
        await writer.drain()
        await asyncio.sleep(0.5)  # it reads nothing meanwhile
        assert await closed_by_server(reader)
        assert not server.connections or all(
            c.peer != writer.get_extra_info("sockname") for c in server.connections
        )
        writer.close()
        await still_served(server)


async def test_a_peer_streaming_frames_whose_reads_always_end_mid_frame_is_kept() -> None:
    async with serving(ServerLimits(frame_timeout_s=1.0), idle_timeout_s=60.0) as server:
        frame = encode_bytes(RemotingCommand.request(ECHO, body=b"f" * 100))
        half = len(frame) // 2
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(frame[:half])
        sent = 0
        # for 3 s (three frame timeouts) every write completes the frame before and
        # starts the next: each frame takes 0.1 s, but one is always incomplete
        for _ in range(30):
            await asyncio.sleep(0.1)
            writer.write(frame[half:] + frame[:half])
            await writer.drain()
            sent += 1
        writer.write(frame[half:])
        sent += 1
        answers = 0
        async with asyncio.timeout(5):
            while answers < sent:
                length = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(length)
                answers += 1
        assert not await closed_by_server(reader, 0.2)
        writer.close()
