"""A peer that pipelines thousands of requests shares the loop with the others.

Each test runs on asyncio and on uvloop (conftest). A connection handles the
commands of one read a turn of ``COMMANDS_PER_TURN`` at a time, reading
paused in between: shown through a ``FakeTransport`` (a stand-in for the
socket, named so, that records pause and resume) where the turns are counted
exactly, and over real sockets where the pipeline must still be handled
whole and in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from apogee.protocol.command import RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.remoting import HandlerTable, RemotingServer, RequestContext, ServerConfig
from apogee.remoting.connection import COMMANDS_PER_TURN, Connection, TurnShare

RECORD = 1005
PIPELINED = 4000


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []  # (who, opaque) in handling order

    def handle(self, ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        self.seen.append((req.ext_fields["who"], req.opaque))
        return req.make_response()


@pytest.fixture
async def served() -> AsyncIterator[tuple[Recorder, int]]:
    recorder = Recorder()
    table = HandlerTable()
    table.register(RECORD, recorder.handle)
    server = RemotingServer(table, ServerConfig(host="127.0.0.1", port=0))
    await server.start()
    yield recorder, server.port
    await server.stop(grace_s=0.5)


def frames(who: str, count: int) -> bytes:
    out = []
    for opaque in range(count):
        cmd = RemotingCommand.request(RECORD, {"who": who})
        cmd.opaque = opaque
        out.append(encode_bytes(cmd))
    return b"".join(out)


async def answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    decoder = FrameDecoder()
    got: list[int] = []
    while len(got) < count:
        data = await asyncio.wait_for(reader.read(1 << 16), 10)
        assert data, "the server closed the connection"
        got += [cmd.opaque for cmd in decoder.feed(data)]
    return got


class FakeTransport:
    """Stands in for a socket: answers counted, pauses and resumes recorded."""

    def __init__(self) -> None:
        self.answers = 0
        self.calls: list[str] = []  # "pause" and "resume", in order

    def writelines(self, parts: list[Any]) -> None:
        self.answers += 1

    write = writelines

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None) -> None:
        pass


def connect(
    table: HandlerTable, share: TurnShare | None = None
) -> tuple[Connection, FakeTransport]:
    conn = Connection(table, server_side=True, share=share)
    transport = FakeTransport()
    conn.connection_made(cast(asyncio.Transport, transport))
    return conn, transport


async def test_a_pipeline_is_handled_a_turn_at_a_time_and_others_go_in_between() -> None:
    recorder = Recorder()
    table = HandlerTable()
    table.register(RECORD, recorder.handle)
    busy, busy_transport = connect(table)
    other, _ = connect(table)
    total = 3 * COMMANDS_PER_TURN + 5
    busy.data_received(frames("busy", total))
    assert len(recorder.seen) == COMMANDS_PER_TURN
    assert busy_transport.calls == ["pause"]
    other.data_received(frames("other", 1))  # handled at once, before the busy rest
    assert recorder.seen[-1] == ("other", 0)
    await asyncio.sleep(0)
    assert len(recorder.seen) == 2 * COMMANDS_PER_TURN + 1
    for _ in range(5):
        await asyncio.sleep(0)
    assert [op for who, op in recorder.seen if who == "busy"] == list(range(total))
    assert busy_transport.calls[-1] == "resume"


async def test_many_pipelines_share_a_bounded_number_of_commands_per_iteration() -> None:
    # Twenty pipelining peers: their later turns are taken round-robin, at most
    # per_iteration commands per loop iteration in all, and none waits for ever.
    recorder = Recorder()
    table = HandlerTable()
    table.register(RECORD, recorder.handle)
    share = TurnShare(per_iteration=4 * COMMANDS_PER_TURN)
    peers = [connect(table, share) for _ in range(20)]
    total = 3 * COMMANDS_PER_TURN + 5
    for i, (conn, _) in enumerate(peers):
        conn.data_received(frames(f"p{i}", total))  # the first turn of each at once
    assert len(recorder.seen) == 20 * COMMANDS_PER_TURN
    handled = [len(recorder.seen)]
    turns_of: dict[str, int] = {}
    while len(share):
        before = len(recorder.seen)
        await asyncio.sleep(0)  # one loop iteration
        handled.append(len(recorder.seen))
        for who, _ in recorder.seen[before:]:
            turns_of[who] = turns_of.get(who, 0) + 1
        assert len(recorder.seen) - before <= share.per_iteration
        if len(handled) == 6:  # 5 iterations x 4 turns: every peer had its second turn
            assert len(turns_of) == 20
    assert len(recorder.seen) == 20 * total
    for i, (_, transport) in enumerate(peers):
        assert [op for who, op in recorder.seen if who == f"p{i}"] == list(range(total))
        assert transport.calls[-1] == "resume"


async def test_a_pipeline_over_a_socket_is_answered_whole_and_in_order(
    served: tuple[Recorder, int],
) -> None:
    recorder, port = served
    busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port)
    other_r, other_w = await asyncio.open_connection("127.0.0.1", port)
    busy_w.write(frames("busy", PIPELINED))
    other_w.write(frames("other", 1))
    await asyncio.gather(busy_w.drain(), other_w.drain())
    assert await answers(other_r, 1) == [0]
    assert await answers(busy_r, PIPELINED) == list(range(PIPELINED))
    assert [op for who, op in recorder.seen if who == "busy"] == list(range(PIPELINED))
    busy_w.write(frames("busy", 1))  # reading resumed after the last turn
    assert await answers(busy_r, 1) == [0]
    for writer in (busy_w, other_w):
        writer.close()
