"""Remoting over real sockets on 127.0.0.1 (each test runs on asyncio and on uvloop)."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from apogee._util.net import free_port
from apogee.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from apogee.errors import (
    NoPermissionError,
    RemotingClosedError,
    RemotingConnectError,
    RemotingTimeoutError,
)
from apogee.protocol.command import FLAG_RESPONSE, RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.remoting import (
    ClientConfig,
    Connection,
    HandlerTable,
    RemotingClient,
    RemotingServer,
    RequestContext,
    ResponseBatch,
    ServerConfig,
)

ECHO = 1000
SLOW = 1001
FAIL = 1002
BLOCK = 1003
PARK = 1004
RECORD = 1005
INLINE = 1006


class Harness:
    """A server with a handful of handlers whose behaviour the tests steer."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.recorded: list[RemotingCommand] = []
        self.parked: list[RequestContext] = []
        self.connections: list[Connection] = []
        self.table = HandlerTable()
        self.table.add_group("blocking", concurrency=1, queue_capacity=1)
        self.table.register(ECHO, self.echo)
        self.table.register(SLOW, self.slow)
        self.table.register(FAIL, self.fail)
        self.table.register(BLOCK, self.block, group="blocking")
        self.table.register(PARK, self.park)
        self.table.register(RECORD, self.record)
        self.table.register(INLINE, self.inline)

    async def echo(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        self.connections.append(ctx.require_channel())
        return req.make_response(ext_fields=dict(req.ext_fields), body=req.body_bytes())

    async def slow(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        self.started.set()
        await asyncio.sleep(float(req.ext_fields.get("delay", "0.3")))
        return req.make_response(body=req.body_bytes())

    async def fail(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        if req.ext_fields.get("kind") == "perm":
            raise NoPermissionError("topic T is not writeable")
        raise ValueError("the handler broke")

    async def block(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        self.started.set()
        await self.release.wait()
        return req.make_response()

    async def park(self, ctx: RequestContext, req: RemotingCommand) -> None:
        self.parked.append(ctx)

    async def record(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        self.recorded.append(req)
        return req.make_response(remark="should never be sent for oneway")

    def inline(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(remark=f"inline from {ctx.peer}")


@pytest.fixture
async def harness() -> Harness:
    return Harness()


@pytest.fixture
async def server(harness: Harness) -> AsyncIterator[RemotingServer]:
    srv = RemotingServer(harness.table, ServerConfig(host="127.0.0.1", port=0))
    await srv.start()
    yield srv
    await srv.stop(grace_s=0.5)


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    cli = RemotingClient(ClientConfig(request_timeout_s=5.0))
    yield cli
    await cli.close()


def addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


async def raw_exchange(
    server: RemotingServer, payload: bytes, *, read_timeout_s: float = 3.0
) -> bytes:
    """Send raw bytes and read until the server closes (or the timeout)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), read_timeout_s)
    finally:
        writer.close()
        await writer.wait_closed()


# -- request / response ------------------------------------------------------------


async def test_request_response(server: RemotingServer, client: RemotingClient) -> None:
    req = RemotingCommand.request(ECHO, {"k": "v", "ü": "ñ"}, b"payload")
    resp = await client.invoke(addr(server), req)
    assert resp.code == ResponseCode.SUCCESS and resp.is_response
    assert resp.opaque == req.opaque
    assert resp.ext_fields == {"k": "v", "ü": "ñ"} and resp.body == b"payload"


async def test_inline_sync_handler(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr(server), RemotingCommand.request(INLINE))
    assert resp.code == ResponseCode.SUCCESS and resp.remark is not None
    assert resp.remark.startswith("inline from 127.0.0.1:")


async def test_requests_arriving_together_are_answered_together(server: RemotingServer) -> None:
    # Ten inline requests in one write are answered through one batched write:
    # each answer with its own opaque, in order, none lost.
    frames = [RemotingCommand.request(INLINE) for _ in range(10)]
    for opaque, frame in enumerate(frames):
        frame.opaque = 100 + opaque
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"".join(encode_bytes(f) for f in frames))
        await writer.drain()
        decoder = FrameDecoder()
        answers: list[RemotingCommand] = []
        while len(answers) < 10:
            answers += decoder.feed(await asyncio.wait_for(reader.read(65536), 3))
    finally:
        writer.close()
        await writer.wait_closed()
    assert [a.opaque for a in answers] == list(range(100, 110))
    assert all(a.is_response and a.code == ResponseCode.SUCCESS for a in answers)
    assert decoder.buffered == 0


async def test_many_concurrent_requests_answered_out_of_order(
    server: RemotingServer, client: RemotingClient
) -> None:
    n = 40
    finished: list[int] = []

    async def one(i: int) -> None:
        # Later requests sleep less, so answers come back in reverse order.
        delay = f"{(n - i) * 0.005:.3f}"
        resp = await client.invoke(
            addr(server), RemotingCommand.request(SLOW, {"delay": delay}, str(i).encode())
        )
        assert resp.body == str(i).encode()
        finished.append(i)

    await asyncio.gather(*(one(i) for i in range(n)))
    assert sorted(finished) == list(range(n))
    assert finished != sorted(finished)  # not answered in send order
    assert len(client._pool) == 1  # all on one connection


async def test_binary_request_gets_binary_answer_and_cpp_gets_json(
    server: RemotingServer, client: RemotingClient
) -> None:
    binary = RemotingCommand.request(ECHO, {"a": "1"}, serialize_type=SerializeType.ROCKETMQ)
    resp = await client.invoke(addr(server), binary)
    assert resp.serialize_type == SerializeType.ROCKETMQ and resp.ext_fields == {"a": "1"}
    cpp = RemotingCommand.request(ECHO, {"a": "1"}, serialize_type=SerializeType.ROCKETMQ)
    cpp.language = LanguageCode.CPP
    resp = await client.invoke(addr(server), cpp)
    assert resp.serialize_type == SerializeType.JSON


async def test_response_body_as_buffer_list(harness: Harness, client: RemotingClient) -> None:
    backing = bytearray(range(256)) * 4096  # 1 MiB

    async def scatter(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        view = memoryview(backing)
        return req.make_response(body=[view[: 1 << 19], view[1 << 19 :]])

    harness.table.register(2000, scatter)
    async with RemotingServer(harness.table, ServerConfig(host="127.0.0.1")) as srv:
        resp = await client.invoke(addr(srv), RemotingCommand.request(2000))
    assert resp.body == bytes(backing)


# -- oneway, timeout, failures ---------------------------------------------------------


async def test_oneway_is_processed_but_never_answered(
    server: RemotingServer, harness: Harness
) -> None:
    oneway = RemotingCommand.oneway(RECORD, {"n": "1"})
    oneway.opaque = 7
    normal = RemotingCommand.request(INLINE)
    normal.opaque = 8
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(encode_bytes(oneway) + encode_bytes(normal))
        decoder = FrameDecoder()
        got: list[RemotingCommand] = []
        while not got:
            got = decoder.feed(await asyncio.wait_for(reader.read(65536), 3))
        assert [c.opaque for c in got] == [8]  # only the normal request was answered
        await asyncio.sleep(0.05)
        assert decoder.feed(b"") == [] and decoder.buffered == 0
    finally:
        writer.close()
        await writer.wait_closed()
    assert [r.ext_fields for r in harness.recorded] == [{"n": "1"}]


async def test_invoke_oneway_through_client(
    server: RemotingServer, client: RemotingClient, harness: Harness
) -> None:
    await client.invoke_oneway(addr(server), RemotingCommand.oneway(RECORD, {"x": "y"}))
    # a normal request behind it proves the oneway was read first
    await client.invoke(addr(server), RemotingCommand.request(INLINE))
    assert [r.ext_fields for r in harness.recorded] == [{"x": "y"}]
    assert harness.recorded[0].is_oneway


async def test_timeout_then_late_answer_dropped(
    server: RemotingServer, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="apogee.remoting.connection")
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(
            addr(server), RemotingCommand.request(SLOW, {"delay": "0.3"}), timeout_s=0.05
        )
    await asyncio.sleep(0.4)
    assert any("dropping response" in r.getMessage() for r in caplog.records)
    resp = await client.invoke(addr(server), RemotingCommand.request(ECHO, body=b"still ok"))
    assert resp.body == b"still ok"


async def test_unknown_code(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr(server), RemotingCommand.request(4242))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4242 not supported"


async def test_busy_when_group_and_queue_are_full(
    server: RemotingServer, client: RemotingClient, harness: Harness
) -> None:
    first = asyncio.ensure_future(client.invoke(addr(server), RemotingCommand.request(BLOCK)))
    await harness.started.wait()
    second = asyncio.ensure_future(client.invoke(addr(server), RemotingCommand.request(BLOCK)))
    await asyncio.sleep(0.05)  # let it reach the waiting line
    third = await client.invoke(addr(server), RemotingCommand.request(BLOCK))
    assert third.code == ResponseCode.SYSTEM_BUSY
    assert third.remark is not None and third.remark.startswith("[OVERLOAD]")
    harness.release.set()
    assert (await first).code == ResponseCode.SUCCESS
    assert (await second).code == ResponseCode.SUCCESS


async def test_handler_exceptions(server: RemotingServer, client: RemotingClient) -> None:
    resp = await client.invoke(addr(server), RemotingCommand.request(FAIL))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "the handler broke"
    resp = await client.invoke(addr(server), RemotingCommand.request(FAIL, {"kind": "perm"}))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "topic T is not writeable"


async def test_unencodable_response_becomes_system_error(
    harness: Harness, client: RemotingClient
) -> None:
    def broken(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(body="not a buffer")  # type: ignore[arg-type]

    async def broken_async(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return broken(ctx, req)

    harness.table.register(2002, broken)
    harness.table.register(2003, broken_async)
    async with RemotingServer(harness.table, ServerConfig(host="127.0.0.1")) as srv:
        for code in (2002, 2003, 2003):
            resp = await client.invoke(addr(srv), RemotingCommand.request(code))
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert resp.remark is not None and resp.remark.startswith("bad response")
        ok = await client.invoke(addr(srv), RemotingCommand.request(ECHO, body=b"fine"))
        assert ok.body == b"fine"


async def test_parked_request_answered_later(
    server: RemotingServer, client: RemotingClient, harness: Harness
) -> None:
    pending = asyncio.ensure_future(client.invoke(addr(server), RemotingCommand.request(PARK)))
    while not harness.parked:
        await asyncio.sleep(0.01)
    assert not pending.done()
    ctx = harness.parked[0]
    assert ctx.respond(RemotingCommand(ResponseCode.PULL_NOT_FOUND, remark="later"))
    resp = await pending
    assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.remark == "later"


async def test_a_response_batch_sends_each_connections_answers_when_it_closes(
    server: RemotingServer, harness: Harness
) -> None:
    # Two connections, three parked requests on each; every answer is
    # written inside one batch: nothing reaches either peer before the batch
    # closes, then each gets its three answers, opaques intact.
    peers = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
    try:
        for n, (_, writer) in enumerate(peers):
            frames = [RemotingCommand.request(PARK) for _ in range(3)]
            for i, frame in enumerate(frames):
                frame.opaque = 10 * n + i
            writer.write(b"".join(encode_bytes(f) for f in frames))
            await writer.drain()
        while len(harness.parked) < 6:
            await asyncio.sleep(0.01)
        with ResponseBatch() as batch:
            for ctx in harness.parked:
                assert batch.respond(ctx, RemotingCommand(ResponseCode.SUCCESS, remark="held"))
            for reader, _ in peers:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(reader.read(1), 0.05)
        for n, (reader, _) in enumerate(peers):
            decoder = FrameDecoder()
            answers: list[RemotingCommand] = []
            while len(answers) < 3:
                answers += decoder.feed(await asyncio.wait_for(reader.read(65536), 3))
            assert sorted(a.opaque for a in answers) == [10 * n, 10 * n + 1, 10 * n + 2]
            assert all(a.is_response and a.remark == "held" for a in answers)
    finally:
        for _, writer in peers:
            writer.close()
            await writer.wait_closed()


async def test_an_answer_that_cannot_be_encoded_leaves_the_rest_of_its_batch_alone(
    server: RemotingServer, harness: Harness, client: RemotingClient
) -> None:
    # Three parked requests on one connection; the middle one's answer cannot be
    # encoded (its opaque is made too wide for the frame, a seam the decoder now
    # guards). The other two still get their answers, and the middle one an error.
    pending = [
        asyncio.ensure_future(client.invoke(addr(server), RemotingCommand.request(PARK)))
        for _ in range(3)
    ]
    while len(harness.parked) < 3:
        await asyncio.sleep(0.01)
    first, middle, last = harness.parked
    real_opaque = middle.request.opaque
    middle.request.opaque = 2**70
    answer = RemotingCommand(ResponseCode.SUCCESS, remark="held")
    with ResponseBatch() as batch:
        assert batch.respond(first, RemotingCommand(ResponseCode.SUCCESS, remark="held"))
        assert not batch.respond(middle, answer)
        middle.request.opaque = real_opaque
        assert batch.respond(last, RemotingCommand(ResponseCode.SUCCESS, remark="held"))
    done, waiting = await asyncio.wait(pending, timeout=3)
    answers = [p.result() for p in pending if p in done]
    assert [a.remark for a in answers] == ["held", "held"]
    assert len(waiting) == 1  # the middle one: its own opaque never came back
    for p in waiting:
        p.cancel()


# -- bad peers, idle, close --------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">ii", 12, 99) + b"x" * 8,  # header longer than the frame
        struct.pack(">ii", 8, (7 << 24) | 2) + b"{}zz",  # unknown serialize type
        struct.pack(">i", 0x7FFFFFF0),  # oversized length
        b"GET / HTTP/1.1\r\n\r\n",  # not remoting at all
    ],
)
async def test_garbage_closes_only_that_connection(
    server: RemotingServer,
    client: RemotingClient,
    garbage: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apogee.remoting.connection")
    before = await client.invoke(addr(server), RemotingCommand.request(ECHO, body=b"1"))
    assert await raw_exchange(server, garbage) == b""  # closed by the server, nothing sent
    after = await client.invoke(addr(server), RemotingCommand.request(ECHO, body=b"2"))
    assert (before.body, after.body) == (b"1", b"2")
    closing = [r.getMessage() for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closing) == 1 and "127.0.0.1:" in closing[0]


async def test_idle_connection_closed_and_listener_fires(harness: Harness) -> None:
    closed: list[Connection] = []
    cfg = ServerConfig(host="127.0.0.1", idle_timeout_s=0.2)
    async with RemotingServer(harness.table, cfg) as srv:
        srv.add_close_listener(closed.append)
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await raw_exchange(srv, b"", read_timeout_s=5) == b""
        assert loop.time() - start >= 0.2
        assert len(closed) == 1 and not srv.connections


async def test_server_close_listener_fires_when_client_leaves(
    server: RemotingServer, harness: Harness
) -> None:
    fired = asyncio.Event()
    peers: list[str] = []

    def listener(conn: Connection) -> None:
        peers.append(conn.peer)
        fired.set()

    server.add_close_listener(listener)
    cli = RemotingClient()
    await cli.invoke(addr(server), RemotingCommand.request(ECHO))
    local = harness.connections[0].peer
    await cli.close()
    await asyncio.wait_for(fired.wait(), 3)
    assert peers == [local]


async def test_graceful_stop_answers_in_flight_request(
    harness: Harness, client: RemotingClient
) -> None:
    srv = RemotingServer(harness.table, ServerConfig(host="127.0.0.1"))
    await srv.start()
    slow = asyncio.ensure_future(
        client.invoke(addr(srv), RemotingCommand.request(SLOW, {"delay": "0.3"}, b"done"))
    )
    await harness.started.wait()
    await srv.stop(grace_s=5)
    resp = await slow
    assert resp.code == ResponseCode.SUCCESS and resp.body == b"done"
    with pytest.raises(RemotingConnectError):
        await client.invoke(addr(srv), RemotingCommand.request(ECHO))


async def test_pending_requests_fail_when_connection_closes(
    harness: Harness, client: RemotingClient
) -> None:
    srv = RemotingServer(harness.table, ServerConfig(host="127.0.0.1"))
    await srv.start()
    client_closed: list[Connection] = []
    client.add_close_listener(client_closed.append)
    parked = asyncio.ensure_future(client.invoke(addr(srv), RemotingCommand.request(PARK)))
    while not harness.parked:
        await asyncio.sleep(0.01)
    await srv.stop(grace_s=0.1)
    with pytest.raises(RemotingClosedError):
        await parked
    assert len(client_closed) == 1


async def test_server_stops_reading_from_a_peer_that_does_not_read(harness: Harness) -> None:
    big = bytes(8 * 1024 * 1024)  # more than the kernel buffers hold
    handled: list[int] = []

    def bulk(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        handled.append(req.opaque)
        return req.make_response(body=big)

    harness.table.register(2001, bulk)
    cfg = ServerConfig(host="127.0.0.1", write_high_water_bytes=64 * 1024)
    async with RemotingServer(harness.table, cfg) as srv:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", srv.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            for opaque in (1, 2, 3):
                req = RemotingCommand.request(2001)
                req.opaque = opaque
                writer.write(encode_bytes(req))
                await writer.drain()
                await asyncio.sleep(0.15)
            assert handled == [1]  # the answer to 1 is stuck, so 2 and 3 wait unread
            decoder = FrameDecoder(max_frame_bytes=32 * 1024 * 1024)
            got: list[RemotingCommand] = []
            while len(got) < 3:
                got.extend(decoder.feed(await asyncio.wait_for(reader.read(1 << 20), 5)))
            assert [c.opaque for c in got] == [1, 2, 3] and handled == [1, 2, 3]
            assert all(c.body == big for c in got)
        finally:
            writer.close()
            await writer.wait_closed()


async def test_timeout_fires_while_waiting_for_a_peer_that_does_not_read() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def never_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # keep it open, never read

    sink = await asyncio.start_server(never_read, "127.0.0.1", 0)
    port = sink.sockets[0].getsockname()[1]
    cfg = ClientConfig(write_high_water_bytes=64 * 1024)
    try:
        async with RemotingClient(cfg) as cli:
            big = RemotingCommand.request(ECHO, body=bytes(16 * 1024 * 1024 - 1024))
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(RemotingTimeoutError):
                await cli.invoke(f"127.0.0.1:{port}", big, timeout_s=0.3)
            assert loop.time() - start < 3
            conn = await cli.connection(f"127.0.0.1:{port}")
            assert conn._write_paused  # the wait really was on a full buffer
    finally:
        for writer in accepted:
            writer.close()
        sink.close()
        await sink.wait_closed()


# -- server -> client ------------------------------------------------------------------


async def test_server_sends_requests_to_client_handlers(
    server: RemotingServer, harness: Harness
) -> None:
    notified: list[RemotingCommand] = []
    client_table = HandlerTable()

    async def on_check(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        notified.append(req)
        return req.make_response(ext_fields={"state": "COMMIT"})

    client_table.register(
        [RequestCode.CHECK_TRANSACTION_STATE, RequestCode.NOTIFY_CONSUMER_IDS_CHANGED], on_check
    )
    async with RemotingClient(handlers=client_table) as cli:
        await cli.invoke(addr(server), RemotingCommand.request(ECHO))
        broker_side = harness.connections[0]
        resp = await broker_side.invoke(
            RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "m1"}), 3.0
        )
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields == {"state": "COMMIT"}
        await broker_side.invoke_oneway(
            RemotingCommand.oneway(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"})
        )
        while len(notified) < 2:
            await asyncio.sleep(0.01)
    assert notified[1].ext_fields == {"consumerGroup": "g"} and notified[1].is_oneway


async def test_client_without_handlers_answers_not_supported(
    server: RemotingServer, client: RemotingClient, harness: Harness
) -> None:
    await client.invoke(addr(server), RemotingCommand.request(ECHO))
    resp = await harness.connections[0].invoke(
        RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 3.0
    )
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


# -- client pool ----------------------------------------------------------------------


async def test_connect_refused(client: RemotingClient) -> None:
    with pytest.raises(RemotingConnectError):
        await client.invoke(f"127.0.0.1:{free_port()}", RemotingCommand.request(ECHO))


async def test_invoke_any_skips_dead_name_server(
    server: RemotingServer, client: RemotingClient
) -> None:
    addrs = [f"127.0.0.1:{free_port()}", addr(server)]
    resp = await client.invoke_any(addrs, RemotingCommand.request(ECHO, body=b"ns"))
    assert resp.body == b"ns"
    assert client._namesrv_index == 1  # remembered for the next call


async def test_pool_reconnects_after_close_and_shares_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    a, b = await asyncio.gather(client.connection(addr(server)), client.connection(addr(server)))
    assert a is b
    a.close()
    await a.wait_closed()
    c = await client.connection(addr(server))
    assert c is not a and not c.closed
    resp = await client.invoke(addr(server), RemotingCommand.request(ECHO, body=b"again"))
    assert resp.body == b"again"


def test_response_flag_constant() -> None:
    assert FLAG_RESPONSE == 1
