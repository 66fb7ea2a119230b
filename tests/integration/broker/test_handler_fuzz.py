"""Every request handler of a broker and a name server, fed hostile headers and bodies.

For every request code the server serves, hypothesis draws requests whose
header fields come drawn from hostile values: numbers far outside
their Java type, negative ones, very long strings, NUL and other control
characters, any code point, invalid UTF-8, and required fields left out;
bodies are bytes, or JSON drawn with the field names the request bodies use.
Whatever arrives, each request gets a well-formed answer (its opaque, the
response flag, a RocketMQ response code), the server goes on serving, no
handler fault escapes as an unexpected exception (logged as "raised"), and
the broker's store verifies clean afterwards. The one exception is a header
that is not UTF-8: the frame cannot be decoded, so, as for any undecodable
frame (docs/reliability.md), the server closes that connection alone.

The requests go over a blocking socket from a worker thread while the
server runs on the test's event loop. ``APOGEE_FUZZ_EXAMPLES`` raises the
number of examples for a longer run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apogee.admin.inspect import verify_store
from apogee.codes import RequestCode, ResponseCode, SerializeType
from apogee.model.message_codec import iter_records
from apogee.protocol import headers as h
from apogee.protocol.command import FLAG_RESPONSE, RemotingCommand
from apogee.protocol.framing import FrameDecoder, encode_bytes
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker, run_namesrv
from tests.integration.broker.wire import pull, send

#: examples (requests) per request code
EXAMPLES = max(5, int(os.environ.get("APOGEE_FUZZ_EXAMPLES", "300")) // 20)
fuzz_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,  # the examples depend on the server's state: a replay would mislead
)

SEND_NAMES = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
              "producerGroup", "topic", "defaultTopic", "queueId", "sysFlag", "bornTimestamp",
              "flag", "properties", "reconsumeTimes", "batch"]  # fmt: skip
PULL_NAMES = ["consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
              "commitOffset", "suspendTimeoutMillis", "subVersion", "subscription",
              "expressionType", "maxMsgBytes"]  # fmt: skip
#: values that lead a handler past its first checks
KNOWN = ["0", "1", "T", "TBW102", "%RETRY%g", "%DLQ%g", "SCHEDULE_TOPIC_XXXX",
         "RMQ_SYS_TRANS_HALF_TOPIC", "true", "false", "*", "TagA || TagB", "SQL92", "TAG",
         "a > 1", "{}", "a=b", "UNIQ_KEY\x01k\x02TAGS\x01A\x02DELAY\x013\x02", "1.5",
         "127.0.0.1:1", "broker-a", "DefaultCluster"]  # fmt: skip
EDGES = [2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, 10**40]
BODIES = [b"", b"{}", b"[]", b"null", b'{"a":', b"\x00\xff" * 10, b'{"topicConfigTable":{}}']
NOT_UTF8 = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"abc\x80", b"\xf8\x88\x80\x80\x80"]
RESPONSE_CODES = {int(c) for c in ResponseCode}
ANSWERED: dict[int, int] = {}  # response code -> count, for a look after a run

numbers = (st.integers(-(2**70), 2**70) | st.sampled_from(EDGES)).map(str)
texts = (
    st.sampled_from(KNOWN)
    | st.text(max_size=30)  # any code point: NUL, controls, astral
    | st.integers(200, 70_000).map(lambda n: "x" * n)  # past every name and expression limit
)
values = (numbers | texts).map(str.encode)
#: names the request bodies use, so that a drawn body reaches past the first check
BODY_KEYS = ["clientID", "consumerDataSet", "producerDataSet", "groupName", "subscriptionDataSet",
             "topic", "subString", "codeSet", "tagsSet", "subVersion", "expressionType",
             "classFilterMode", "consumeType", "messageModel", "consumeFromWhere", "mqSet",
             "brokerName", "queueId", "consumerGroup", "clientId", "offsetTable",
             "topicConfigTable", "subscriptionGroupTable", "dataVersion", "retryMaxTimes",
             "accessKey", "secretKey", "topicPerms", "groupPerms", "filterServerList",
             "brokerAddrs", "cluster", "perm", "readQueueNums", "writeQueueNums"]  # fmt: skip
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | texts,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(BODY_KEYS) | st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=15,
)
bodies = (
    st.sampled_from(BODIES)
    | st.binary(max_size=64)
    | json_values.map(lambda v: json.dumps(v).encode())  # NaN and 2**70 included
)


def wire_names(code: int) -> list[str]:
    header = h.REQUEST_HEADERS.get(code)
    if header is not None:
        return [spec.wire for spec in h._spec(header)]
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                RequestCode.SEND_BATCH_MESSAGE):  # fmt: skip
        return SEND_NAMES
    if code == RequestCode.PULL_MESSAGE:
        return PULL_NAMES
    return ["topic", "consumerGroup", "group", "key", "namespace", "brokerName", "clientId"]


@dataclass
class Request:
    code: int
    ext: dict[bytes, bytes]
    body: bytes
    binary: bool  # the ROCKETMQ binary header, else JSON

    @property
    def decodable(self) -> bool:
        try:
            for key, value in self.ext.items():
                key.decode()
                value.decode()
        except UnicodeDecodeError:
            return False
        return True

    def frame(self, opaque: int) -> bytes:
        if not self.binary:
            ext = {k.decode(): v.decode() for k, v in self.ext.items()}
            cmd = RemotingCommand.request(self.code, ext, self.body)
            cmd.opaque = opaque
            return encode_bytes(cmd)
        # written here, not by the codec: the codec cannot write bytes that are not UTF-8
        fields = b"".join(
            struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
            for k, v in self.ext.items()
            if k and v  # an empty string is null in this form
        )
        header = struct.pack(">hbhii", self.code, 0, 0, opaque, 0)
        header += struct.pack(">i", 0) + struct.pack(">i", len(fields)) + fields
        kind = SerializeType.ROCKETMQ.value << 24
        return struct.pack(">ii", 4 + len(header) + len(self.body), kind | len(header)) + (
            header + self.body
        )


def assemble(  # noqa: PLR0917 - one argument per drawn part
    code: int,
    ext: dict[bytes, bytes],
    extra: dict[bytes, bytes],
    spoil: int | None,
    spoiler: bytes,
    body: bytes,
    binary: bool,
) -> Request:
    ext = {**ext, **extra}
    if ext and spoil is not None:  # a field that is not UTF-8
        ext[sorted(ext)[spoil % len(ext)]] = spoiler
    if code == RequestCode.PULL_MESSAGE:
        # never parked: its answer would wait out a hold time of any length
        flag = ext.get(b"sysFlag", b"")
        if flag.lstrip(b"-").isdigit() and -(2**31) <= int(flag) < 2**31:
            ext[b"sysFlag"] = str(int(flag) & ~0x2).encode()
    request = Request(code, ext, body, binary)
    if not request.decodable:
        request.binary = True  # the JSON form cannot carry it
    return request


def requests(code: int) -> st.SearchStrategy[Request]:
    """Requests of ``code``: each field present or missing, hostile values, odd bodies."""
    names = {name.encode(): values for name in wire_names(code)}
    return st.builds(
        assemble,
        st.just(code),
        st.fixed_dictionaries({}, optional=names),  # the rest are missing
        st.dictionaries(st.text(max_size=8).map(str.encode), values, max_size=2),
        # one request in ten or so (a middle value: hypothesis favours the ends of a range)
        st.integers(0, 9).flatmap(lambda n: st.integers(0, 99) if n == 4 else st.none()),
        st.sampled_from(NOT_UTF8),
        bodies,
        st.booleans(),
    )


class Wire:
    """One blocking connection to the server, reopened after the server closes it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.opaques = itertools.count(1)
        self.sock: socket.socket | None = None
        self.closed_by_server = 0

    def ask(self, request: Request) -> RemotingCommand | None:
        """The answer, or None when the server closed the connection instead."""
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        opaque = next(self.opaques)
        self.sock.sendall(request.frame(opaque))
        decoder = FrameDecoder()
        while True:
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.sock.close()
                self.sock = None
                self.closed_by_server += 1
                return None
            for answer in decoder.feed(chunk):
                if answer.opaque == opaque:
                    return answer

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def fuzz(port: int, codes: list[int]) -> None:
    """Run the examples, code by code (blocking: call it from a worker thread)."""
    wire = Wire(port)

    def one_code(code: int) -> None:
        @fuzz_settings
        @given(requests(code))
        def answered(request: Request) -> None:
            answer = wire.ask(request)
            if answer is None:
                assert not request.decodable, f"code {code}: closed without an answer"
                return
            assert answer.flag & FLAG_RESPONSE, answer
            assert answer.code in RESPONSE_CODES, f"code {code} answered {answer.code}"
            ANSWERED[answer.code] = ANSWERED.get(answer.code, 0) + 1

        answered()

    try:
        for code in codes:
            one_code(code)
    finally:
        wire.close()


def raised(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]


async def test_every_broker_handler_answers_hostile_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    store = tmp_path / "store"
    async with run_broker(store) as broker, RemotingClient() as client:
        await asyncio.to_thread(fuzz, broker.port, sorted(broker.table.codes))
        # still serving: a message sent now is read back
        assert (await send(client, broker.address, "After", b"after")).code == ResponseCode.SUCCESS
        answer = await pull(client, broker.address, "After", 0, 0)
        assert answer.code == ResponseCode.SUCCESS
        assert [r.body for r in iter_records(answer.body_bytes())] == [b"after"]
    assert not raised(caplog), raised(caplog)[:5]
    report = verify_store(store)
    assert report.ok, report.inconsistencies
    assert report.records >= 1


async def test_every_name_server_handler_answers_hostile_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        await asyncio.to_thread(fuzz, ns.port, sorted(ns.server.handlers.codes))
        answer = await client.invoke(
            f"127.0.0.1:{ns.port}",
            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        )
        assert answer.code == ResponseCode.SUCCESS
    assert not raised(caplog), raised(caplog)[:5]
