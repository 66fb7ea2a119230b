"""A send's answer however it arrives: whole (read by ``send_answer``), split, or with others.

A plain asyncio server on 127.0.0.1 answers every send as a broker would,
writing each answer whole, in two pieces, or two answers in one write. The
client's connection reads a whole answer alone with ``header_scan.send_answer``
(when compiled) and every other arrival with its frame decoder; the send's
result must be the same.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest

from apogee.client import Message, Producer
from apogee.client.broker_api import send_result
from apogee.client.send_header import SendPieces
from apogee.codes import RequestCode, ResponseCode
from apogee.model.client import MessageQueue
from apogee.protocol import header_scan
from apogee.protocol.command import FLAG_RESPONSE, RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.protocol.headers import SendMessageRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.testing.namesrv import register_broker, running_namesrv

TOPIC = "Answered"


class Answerer(asyncio.Protocol):
    """Answers sends: ``mode`` "whole", "split" (two writes) or "pairs" (two answers a write)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.decoder = FrameDecoder()
        self.offset = 0
        self.held: bytes | None = None
        self.queue: list[bytes] = []  # split: answers not yet written whole
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for cmd in self.decoder.feed(data):
            ext: dict[str, str] = {}
            if cmd.code == RequestCode.SEND_MESSAGE_V2:
                ext = {
                    "msgId": f"{self.offset:032X}",
                    "queueId": cmd.ext_fields["e"],
                    "queueOffset": str(self.offset),
                    "MSG_REGION": "DefaultRegion",
                    "TRACE_ON": "true",
                }
                self.offset += 1
            answer = RemotingCommand(
                ResponseCode.SUCCESS, opaque=cmd.opaque, flag=FLAG_RESPONSE, ext_fields=ext
            )
            self.write(encode_bytes(answer), cmd.code == RequestCode.SEND_MESSAGE_V2)

    def write(self, frame: bytes, send: bool) -> None:
        assert self.transport is not None
        if not send or self.mode == "whole":
            self.transport.write(frame)
        elif self.mode == "split":
            self.queue.append(frame)
            if len(self.queue) == 1:
                self.split_next()
        elif self.held is None:  # pairs: the first waits for the second
            self.held = frame
            asyncio.get_running_loop().call_later(0.05, self.flush)
        else:
            self.transport.write(self.held + frame)
            self.held = None

    def split_next(self) -> None:
        """The first queued answer in two writes, the second after a pause (read apart)."""
        assert self.transport is not None
        frame = self.queue[0]
        self.transport.write(frame[:20])
        asyncio.get_running_loop().call_later(0.02, self.split_rest)

    def split_rest(self) -> None:
        assert self.transport is not None
        self.transport.write(self.queue.pop(0)[20:])
        if self.queue:
            self.split_next()

    def flush(self) -> None:
        if self.held is not None and self.transport is not None:
            self.transport.write(self.held)
            self.held = None


async def serve(mode: str) -> tuple[asyncio.Server, str]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Answerer(mode), "127.0.0.1", 0)
    return server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


def send_pieces() -> SendPieces:
    template = SendMessageRequestHeader(
        producer_group="pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=0, flag=0, properties="",
    ).to_ext_v2()  # fmt: skip
    pieces = SendPieces.of(template)
    assert pieces is not None
    return pieces


@pytest.mark.parametrize("mode", ["whole", "split"])
async def test_an_answer_whole_or_split_gives_the_same_result(mode: str) -> None:
    server, addr = await serve(mode)
    pieces = send_pieces()
    mq = MessageQueue(TOPIC, "broker-a", 2)
    try:
        async with RemotingClient() as client:
            conn = await client.connection(addr)
            head = b"%b%d%b%d%b" % (
                pieces.head, 2, pieces.mid(0), 1700000000000, pieces.rest_plain("A" * 32)
            )  # fmt: skip
            answer = await conn.request_encoded(310, head, pieces.end, b"body", 5.0)
    finally:
        server.close()
    whole = mode == "whole" and header_scan.COMPILED
    assert isinstance(answer, tuple) == whole
    assert isinstance(answer, RemotingCommand) == (not whole)
    assert not isinstance(answer, tuple) or len(answer) == 8
    result = send_result(cast(RemotingCommand | header_scan.SendAnswer, answer), mq, "M")
    assert (result.message_queue, result.queue_offset, result.offset_msg_id) == (mq, 0, "0" * 32)
    assert (result.msg_id, result.region_id, result.transaction_id) == ("M", "DefaultRegion", None)


@pytest.fixture(params=["whole", "split", "pairs"])
async def namesrv(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    server, addr = await serve(request.param)
    try:
        async with running_namesrv(tmp_path) as (_, ns_addr), RemotingClient() as client:
            answer = await register_broker(
                client, ns_addr, broker_addr=addr, topics=[TOPIC, "TBW102"]
            )
            assert answer.code == ResponseCode.SUCCESS
            yield ns_addr
    finally:
        server.close()


async def test_sends_get_their_results_however_the_answers_arrive(namesrv: str) -> None:
    async with Producer("answers_pg", namesrv=namesrv, send_timeout=5) as producer:
        sequential = [await producer.send(Message(TOPIC, b"x")) for _ in range(3)]
        together = await asyncio.gather(*(producer.send(Message(TOPIC, b"y")) for _ in range(4)))
    results = [*sequential, *together]
    assert sorted(r.queue_offset for r in results) == list(range(7))
    for r in results:
        assert r.offset_msg_id == f"{r.queue_offset:032X}"
        assert r.message_queue.topic == TOPIC and r.region_id == "DefaultRegion"


def test_the_prefix_of_an_answer_frame_is_length_and_header_length() -> None:
    # the client's whole-answer check: length word = 4 + header length, type byte 0
    frame = encode_bytes(RemotingCommand(0, opaque=1, flag=FLAG_RESPONSE, ext_fields={"a": "b"}))
    length, kind = struct.unpack_from(">ii", frame)
    assert length + 4 == len(frame) and kind == length - 4
