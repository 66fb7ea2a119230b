"""A peer that pipelines thousands of requests shares the loop with the others.

Each test runs on asyncio and on uvloop (conftest). A connection handles the
commands of one read a turn of ``COMMANDS_PER_TURN`` at a time, reading
paused in between: shown through a ``FakeTransport`` (a stand-in for the
socket, named so, that records pause and resume) where the turns are counted
exactly, and over real sockets where the pipeline must still be handled
whole and in order. Frames waiting for their turn are kept undecoded, so a
malformed one is found at its turn: what came before it is answered, nothing
after it is handled.
"""

from __future__ import annotations

import asyncio
import gc
import struct
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


async def test_bytes_read_while_frames_wait_are_handled_after_them() -> None:
    # (A TLS transport may hand over bytes it had decrypted before the pause.)
    recorder = Recorder()
    table = HandlerTable()
    table.register(RECORD, recorder.handle)
    conn, transport = connect(table)
    first, second = frames("a", 3 * COMMANDS_PER_TURN), frames("b", 50)
    conn.data_received(first + second[:10])  # ends mid-frame
    conn.data_received(second[10:])
    for _ in range(10):
        await asyncio.sleep(0)
    expected = [("a", op) for op in range(3 * COMMANDS_PER_TURN)] + [("b", op) for op in range(50)]
    assert recorder.seen == expected
    assert transport.calls[0] == "pause" and transport.calls[-1] == "resume"


async def test_many_pipelines_share_a_bounded_number_of_commands_per_iteration() -> None:
    # Twenty pipelining peers whose reads arrive in one iteration: their turns, the
    # first ones included, are taken round-robin, at most per_iteration commands per
    # loop iteration in all, and none waits for ever.
    recorder = Recorder()
    table = HandlerTable()
    table.register(RECORD, recorder.handle)
    share = TurnShare(per_iteration=4 * COMMANDS_PER_TURN)
    peers = [connect(table, share) for _ in range(20)]
    total = 3 * COMMANDS_PER_TURN + 5
    for i, (conn, _) in enumerate(peers):
        conn.data_received(frames(f"p{i}", total))
    # first turns at once while the iteration's share lasts; the others wait, paused
    assert len(recorder.seen) == share.per_iteration
    assert {who for who, _ in recorder.seen} == {"p0", "p1", "p2", "p3"}
    assert all(transport.calls == ["pause"] for _, transport in peers)
    lone, _ = connect(table, share)
    lone.data_received(frames("lone", 1))  # one request is answered at once all the same
    assert recorder.seen[-1] == ("lone", 0)
    recorder.seen.pop()
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


#: Tracked objects a frame waiting for its turn may add (the connection's own
#: objects and the share's queue come to a handful in all).
MAX_TRACKED_PER_WAITING_FRAME = 0.01


async def test_frames_waiting_for_their_turn_add_nothing_for_the_cycle_collector() -> None:
    # Hundreds of pipelining peers keep tens of thousands of frames waiting: decoded,
    # each would be objects that every young collection walks.
    recorder = Recorder()
    table = HandlerTable()
    table.register(RECORD, recorder.handle)
    share = TurnShare()
    peers = [connect(table, share) for _ in range(8)]
    pipeline = frames("p", PIPELINED // 4)
    gc.collect()
    gc.disable()  # what the waiting frames create is counted, even what a collection would free
    try:
        before = len(gc.get_objects())
        for conn, _ in peers:
            conn.data_received(pipeline)
        # the commands handled in the first turns are gone with their answers
        waiting = len(peers) * (PIPELINED // 4) - len(recorder.seen)
        recorder.seen.clear()
        per_frame = (len(gc.get_objects()) - before) / waiting
    finally:
        gc.enable()
    assert per_frame <= MAX_TRACKED_PER_WAITING_FRAME, f"{per_frame:.2f} per waiting frame"
    while len(share):
        await asyncio.sleep(0)
    assert len(recorder.seen) == waiting  # each still handled, in its turn


#: each malformed in its own way, none of them a frame the peer could go on after
MALFORMED = {
    "header longer than the frame": struct.pack(">ii", 12, 99) + b"x" * 8,
    "unknown serialize type": struct.pack(">ii", 8, (7 << 24) | 2) + b"{}zz",
    "header not JSON": struct.pack(">ii", 6, 2) + b"{x",
    "binary header too short": struct.pack(">ii", 14, (1 << 24) | 10) + b"\x00" * 10,
    "length shorter than the type word": struct.pack(">ii", 2, 0),
    "oversized length": struct.pack(">i", 0x7FFFFFF0) + b"x" * 100,
}


@pytest.mark.parametrize("before", [5, 3 * COMMANDS_PER_TURN + 7])
@pytest.mark.parametrize("malformed", list(MALFORMED))
async def test_a_malformed_frame_behind_pipelined_ones_ends_the_connection_at_its_turn(
    served: tuple[Recorder, int], malformed: str, before: int
) -> None:
    recorder, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frames("busy", before) + MALFORMED[malformed] + frames("after", 40))
    await writer.drain()
    got: list[int] = []
    decoder = FrameDecoder()
    while data := await asyncio.wait_for(reader.read(1 << 16), 10):
        got += [cmd.opaque for cmd in decoder.feed(data)]
    # the answers due before it went out, then the connection closed
    assert got == list(range(before))
    assert [who for who, _ in recorder.seen] == ["busy"] * before
    writer.close()
    other_r, other_w = await asyncio.open_connection("127.0.0.1", port)
    other_w.write(frames("other", 1))
    assert await answers(other_r, 1) == [0]  # only that connection was closed
    other_w.close()
