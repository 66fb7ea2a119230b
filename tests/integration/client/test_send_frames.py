"""The exact bytes the Producer writes for each kind of send, as a broker receives them.

A recording broker (a plain asyncio server on 127.0.0.1, registered with a real
name server) keeps every frame the producer sends, byte for byte, and answers
each send as a broker would. Each frame must equal the frame of the typed
``SendMessageRequestHeader`` (``to_ext_v2``, the SEND_MESSAGE_V2 one-letter
fields in their order) built from what the message should carry: the send path
may build its header any way it likes, but what leaves it may not change.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from apogee.client import Message, Producer
from apogee.codes import RequestCode, ResponseCode
from apogee.model.client import MessageQueue
from apogee.model.results import SendStatus
from apogee.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.protocol.headers import SendMessageRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.testing.namesrv import register_broker, running_namesrv

TOPIC = "Framed"
GROUP = "frames_pg"
_SENDS = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


@dataclass
class Recorder(asyncio.Protocol):
    """One broker connection: keeps the raw send frames, answers every request."""

    frames: list[bytes]
    transport: asyncio.Transport | None = None
    buf: bytearray = field(default_factory=bytearray)
    offset: int = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (length,) = struct.unpack_from(">i", self.buf)
            if len(self.buf) < 4 + length:
                return
            raw = bytes(self.buf[: 4 + length])
            del self.buf[: 4 + length]
            (cmd,) = FrameDecoder().feed(raw)
            self.answer(raw, cmd)

    def answer(self, raw: bytes, cmd: RemotingCommand) -> None:
        ext: dict[str, str] = {}
        if cmd.code in _SENDS:
            self.frames.append(raw)
            ext = {
                "msgId": f"{len(self.frames):032X}",
                "queueId": cmd.ext_fields["e"],
                "queueOffset": str(self.offset),
            }
            self.offset += 1
        if cmd.flag & FLAG_ONEWAY:
            return
        response = RemotingCommand(
            ResponseCode.SUCCESS, opaque=cmd.opaque, flag=FLAG_RESPONSE, ext_fields=ext
        )
        assert self.transport is not None
        self.transport.write(encode_bytes(response))


@contextlib.asynccontextmanager
async def recording_cluster(tmp_path: Path) -> AsyncIterator[tuple[str, list[bytes]]]:
    """(name server address, the send frames the recording broker received)."""
    frames: list[bytes] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Recorder(frames), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with running_namesrv(tmp_path) as (_, ns_addr), RemotingClient() as client:
            answer = await register_broker(
                client, ns_addr, broker_addr=f"127.0.0.1:{port}", topics=[TOPIC, "TBW102"]
            )
            assert answer.code == ResponseCode.SUCCESS
            yield ns_addr, frames
    finally:
        server.close()


def expected_frame(
    raw: bytes,
    *,
    properties: str,
    body: bytes,
    topic: str = TOPIC,
    sys_flag: int = 0,
    flag: int = 0,
    reconsume_times: int | None = None,
    max_reconsume_times: int | None = None,
    batch: bool = False,
) -> bytes:
    """The frame a send of these fields must be, with the queue, time and opaque of ``raw``."""
    (cmd,) = FrameDecoder().feed(raw)
    header = SendMessageRequestHeader(
        producer_group=GROUP,
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=int(cmd.ext_fields["e"]),
        sys_flag=sys_flag,
        born_timestamp=int(cmd.ext_fields["g"]),
        flag=flag,
        properties=properties,
        reconsume_times=reconsume_times,
        max_reconsume_times=max_reconsume_times,
        batch=batch,
    )
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    request = RemotingCommand(
        code, opaque=cmd.opaque, flag=cmd.flag, ext_fields=header.to_ext_v2(), body=body
    )
    return encode_bytes(request)


def uniq(msg: Message) -> str:
    key = msg.properties["UNIQ_KEY"]
    assert len(key) == 32
    return key


async def test_plain_and_property_sends_are_the_typed_header_byte_for_byte(tmp_path: Path) -> None:
    async with (
        recording_cluster(tmp_path) as (namesrv, frames),
        Producer(GROUP, namesrv=namesrv) as producer,
    ):
        plain = Message(TOPIC, b"\x00binary\x00")
        result = await producer.send(plain)
        rich = Message(TOPIC, b"r", tags="TagA", keys=["k1", "k2"], properties={"p": "v"}, flag=7)
        await producer.send(rich)
        delayed = Message(TOPIC, b"d", delay_level=3)
        await producer.send(delayed)
        again = Message(TOPIC, b"a", properties={"UNIQ_KEY": "0" * 32})
        await producer.send(again)
        prepared = Message(TOPIC, b"t", properties={"TRAN_MSG": "true", "PGROUP": GROUP})
        await producer.send(prepared)

    assert result.status is SendStatus.SEND_OK and result.msg_id == uniq(plain)
    assert result.message_queue.queue_id == int(FrameDecoder().feed(frames[0])[0].ext_fields["e"])
    assert frames[0] == expected_frame(
        frames[0], properties=f"UNIQ_KEY\x01{uniq(plain)}\x02", body=b"\x00binary\x00"
    )
    rich_props = f"p\x01v\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01{uniq(rich)}\x02"
    assert frames[1] == expected_frame(frames[1], properties=rich_props, body=b"r", flag=7)
    delay_props = f"DELAY\x013\x02UNIQ_KEY\x01{uniq(delayed)}\x02"
    assert frames[2] == expected_frame(frames[2], properties=delay_props, body=b"d")
    assert frames[3] == expected_frame(
        frames[3], properties=f"UNIQ_KEY\x01{'0' * 32}\x02", body=b"a"
    )
    tx_props = f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02UNIQ_KEY\x01{uniq(prepared)}\x02"
    assert frames[4] == expected_frame(frames[4], properties=tx_props, body=b"t", sys_flag=4)


async def test_a_large_body_goes_compressed_with_sys_flag_1(tmp_path: Path) -> None:
    text = b"compressible text, repeated. " * 400
    async with (
        recording_cluster(tmp_path) as (namesrv, frames),
        Producer(GROUP, namesrv=namesrv) as producer,
    ):
        msg = Message(TOPIC, text)
        await producer.send(msg)

    (cmd,) = FrameDecoder().feed(frames[0])
    packed = cmd.body_bytes()
    assert zlib.decompress(packed) == text and len(packed) < len(text)
    props = f"UNIQ_KEY\x01{uniq(msg)}\x02"
    assert frames[0] == expected_frame(frames[0], properties=props, body=packed, sys_flag=1)


async def test_a_retry_topic_send_carries_its_reconsume_counts_as_fields(tmp_path: Path) -> None:
    retry_topic = f"%RETRY%{GROUP}"
    async with (
        recording_cluster(tmp_path) as (namesrv, frames),
        Producer(GROUP, namesrv=namesrv) as producer,
    ):
        msg = Message(
            retry_topic,
            b"again",
            properties={
                "RECONSUME_TIME": "2",
                "ORIGIN_MESSAGE_ID": "X",
                "MAX_RECONSUME_TIMES": "5",
            },
        )
        await producer.send(msg, queue=MessageQueue(retry_topic, "broker-a", 0))

    props = f"ORIGIN_MESSAGE_ID\x01X\x02UNIQ_KEY\x01{uniq(msg)}\x02"
    assert frames[0] == expected_frame(
        frames[0],
        topic=retry_topic,
        properties=props,
        body=b"again",
        reconsume_times=2,
        max_reconsume_times=5,
    )


async def test_ordered_oneway_and_batch_sends_are_the_typed_header_byte_for_byte(
    tmp_path: Path,
) -> None:
    async with (
        recording_cluster(tmp_path) as (namesrv, frames),
        Producer(GROUP, namesrv=namesrv) as producer,
    ):
        ordered = Message(TOPIC, b"o")
        result = await producer.send(ordered, queue=MessageQueue(TOPIC, "broker-a", 3))
        oneway = Message(TOPIC, b"w")
        await producer.send_oneway(oneway)
        batch = [Message(TOPIC, b"b1"), Message(TOPIC, b"b2")]
        await producer.send_batch(batch)
        async with asyncio.timeout(10):  # the oneway frame may still be on its way
            while len(frames) < 3:
                await asyncio.sleep(0.01)

    assert result.message_queue == MessageQueue(TOPIC, "broker-a", 3)
    assert FrameDecoder().feed(frames[0])[0].ext_fields["e"] == "3"
    assert frames[0] == expected_frame(
        frames[0], properties=f"UNIQ_KEY\x01{uniq(ordered)}\x02", body=b"o"
    )
    sent = sorted(frames[1:], key=lambda raw: FrameDecoder().feed(raw)[0].code)
    oneway_raw, batch_raw = sent
    (oneway_cmd,) = FrameDecoder().feed(oneway_raw)
    assert oneway_cmd.flag & FLAG_ONEWAY
    assert oneway_raw == expected_frame(
        oneway_raw, properties=f"UNIQ_KEY\x01{uniq(oneway)}\x02", body=b"w"
    )
    (batch_cmd,) = FrameDecoder().feed(batch_raw)
    assert batch_raw == expected_frame(
        batch_raw, properties="", body=batch_cmd.body_bytes(), batch=True
    )
