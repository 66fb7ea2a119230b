"""A pull's answer read whole by ``header_scan.pull_answer`` or decoded as a command: one result.

A broker on 127.0.0.1 holds messages with binary bodies, tags and keys. The
same pulls go out as a consumer's fetcher writes them (``request_encoded``
with PULL_ANSWER: a whole answer is read by the kernel when compiled) and as a
command (``request``: always decoded in full), and ``pull_result`` must make
the same result of both, for small answers and for ones that may take several
reads.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from apogee.client import Message, Producer
from apogee.client.broker_api import (
    PULL_CODE,
    PULL_SUBSCRIPTION,
    pull_command,
    pull_result,
)
from apogee.client.pull_header import PullPieces
from apogee.model.client import MessageQueue
from apogee.model.results import PullResult, PullStatus
from apogee.protocol import header_scan
from apogee.protocol.command import RemotingCommand
from apogee.protocol.headers import PullMessageRequestHeader
from apogee.remoting.client import RemotingClient
from apogee.remoting.connection import PULL_ANSWER, Connection
from apogee.testing.cluster import run_broker, run_namesrv

TOPIC = "PullAnswered"
BIG = "PullAnsweredBig"
BODIES = [random.Random(i).randbytes(16_384) for i in range(32)]  # not compressible


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[str]:
    async with run_namesrv(tmp_path / "ns") as ns:
        namesrv = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "store", namesrv) as running:
            name = running.config.broker_name
            async with Producer("pull_answers_pg", namesrv=namesrv) as producer:
                for i in range(5):
                    msg = Message(TOPIC, b"\x00bin\xff" + bytes([i]), tags=f"T{i % 2}",
                                  keys=[f"k{i}"])  # fmt: skip
                    await producer.send(msg, queue=MessageQueue(TOPIC, name, 0))
                for i in range(32):
                    big = Message(BIG, BODIES[i])
                    await producer.send(big, queue=MessageQueue(BIG, name, 0))
            yield running.address


def template(topic: str) -> dict[str, str]:
    return PullMessageRequestHeader(
        consumer_group="pull_answers_cg", topic=topic, queue_id=0, queue_offset=0,
        max_msg_nums=32, sys_flag=0, commit_offset=0, suspend_timeout_millis=0,
        sub_version=0, subscription="*", expression_type="TAG",
    ).to_ext()  # fmt: skip


async def both(conn: Connection, topic: str, offset: int) -> tuple[Any, Any]:
    """The answer to a fetcher's pull at ``offset``, and to the same pull as a command."""
    ext = template(topic)
    pieces = PullPieces.of(ext)
    assert pieces is not None
    head = pieces.head(offset, PULL_SUBSCRIPTION, 0)
    lean = await conn.request_encoded(PULL_CODE, head, pieces.end, b"", 5.0, PULL_ANSWER)
    ext["queueOffset"] = str(offset)
    ext["sysFlag"] = str(PULL_SUBSCRIPTION)
    full = await conn.request(pull_command(ext), 5.0)
    return lean, full


def facts(result: PullResult[Any]) -> tuple[Any, ...]:
    return (
        result.status, result.next_begin_offset, result.min_offset, result.max_offset,
        result.suggest_which_broker_id,
        [(m.queue_offset, m.body, m.tags, m.keys, m.msg_id) for m in result.messages],
    )  # fmt: skip


async def test_a_whole_answer_and_a_command_give_the_same_result(broker: str) -> None:
    async with RemotingClient() as client:
        conn = await client.connection(broker)
        lean, full = await both(conn, TOPIC, 0)
        assert isinstance(lean, tuple) == header_scan.COMPILED
        assert isinstance(full, RemotingCommand)
        found = facts(pull_result(lean))
        assert found == facts(pull_result(full))
        assert found[0] is PullStatus.FOUND and found[1] == 5
        assert [m[1] for m in found[5]] == [b"\x00bin\xff" + bytes([i]) for i in range(5)]
        assert [m[2] for m in found[5]] == ["T0", "T1", "T0", "T1", "T0"]
        # nothing past the end: an answer of a header only is decoded in full
        lean, full = await both(conn, TOPIC, 5)
        assert isinstance(lean, RemotingCommand)
        assert facts(pull_result(lean)) == facts(pull_result(full))
        assert pull_result(lean).status is PullStatus.NO_NEW_MSG


async def test_a_large_answer_gives_the_same_result_however_it_is_read(broker: str) -> None:
    async with RemotingClient() as client:
        conn = await client.connection(broker)
        lean, full = await both(conn, BIG, 0)  # whole, or in several reads: decoded in full
        got = facts(pull_result(lean))
        assert got == facts(pull_result(full))
        bodies = [m[1] for m in got[5]]
        assert len(bodies) > 8 and bodies == BODIES[: len(bodies)]  # as many as a pull takes
