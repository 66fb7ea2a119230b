"""Every request handler of a broker and a name server, fed random headers and bodies.

Whatever arrives, each request gets an answer, the server goes on serving,
and no handler fault escapes as an unexpected exception (logged as "raised").
The inputs come from a seeded generator, so a failure repeats;
``APOGEE_FUZZ_EXAMPLES`` raises the count per code for a longer run.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pytest

from apogee.codes import RequestCode, ResponseCode
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.remoting.dispatch import HandlerTable
from apogee.testing.cluster import run_broker, run_namesrv

PER_CODE = max(10, int(os.environ.get("APOGEE_FUZZ_EXAMPLES", "300")) // 10)
SEND_NAMES = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
              "producerGroup", "topic", "defaultTopic", "queueId", "sysFlag", "bornTimestamp",
              "flag", "properties", "reconsumeTimes", "batch"]  # fmt: skip
PULL_NAMES = ["consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
              "commitOffset", "suspendTimeoutMillis", "subVersion", "subscription",
              "expressionType", "maxMsgBytes"]  # fmt: skip
VALUES = ["", "0", "1", "-1", "T", "TBW102", "%RETRY%g", "%DLQ%g", "true", "false", "*",
          "TagA || TagB", str(2**31), str(2**63), str(10**30), "x" * 300, "ünï", "\x01\x02",
          "{}", "a=b", "SQL92", "TAG", "1.5", "127.0.0.1:1"]  # fmt: skip
ANSWERED: dict[int, int] = {}  # response code -> count, for a look after a run
BODIES = [b"", b"{}", b"[]", b"null", b'{"a":', b"\x00\xff" * 10, b'{"topicConfigTable":{}}']


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


def random_request(rng: random.Random, code: int) -> RemotingCommand:
    names = wire_names(code)
    ext = {name: rng.choice(VALUES) for name in names if rng.random() < 0.8}
    body = rng.choice(BODIES) if rng.random() < 0.5 else rng.randbytes(rng.randrange(64))
    return RemotingCommand.request(code, ext, body)


async def fuzz(client: RemotingClient, addr: str, table: HandlerTable, seed: int) -> None:
    rng = random.Random(seed)
    for code in table.codes:
        for _ in range(PER_CODE):
            request = random_request(rng, code)
            if code == RequestCode.PULL_MESSAGE:
                request.ext_fields["suspendTimeoutMillis"] = "0"
                request.ext_fields["sysFlag"] = "0"
            answer = await client.invoke(addr, request, 10)
            assert answer.is_response
            ANSWERED[answer.code] = ANSWERED.get(answer.code, 0) + 1


async def test_every_broker_handler_answers_random_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    async with run_broker(tmp_path / "store") as broker, RemotingClient() as client:
        await fuzz(client, broker.address, broker.table, seed=15)
        answer = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        assert answer.code == ResponseCode.SUCCESS
    raised = [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]
    assert not raised, raised[:5]


async def test_every_name_server_handler_answers_random_requests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        addr = f"127.0.0.1:{ns.port}"
        await fuzz(client, addr, ns.server.handlers, seed=16)
        answer = await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
        assert answer.code == ResponseCode.SUCCESS
    raised = [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]
    assert not raised, raised[:5]
