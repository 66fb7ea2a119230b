"""Apogee's asyncio Producer -> the official C++ client's consumers, through real processes.

What the Python producer sends (tags, keys, user properties, UNIQ_KEY, binary and compressed
bodies, ordered sends by key hash, batches) reaches a C++ push consumer as a Java producer's
messages would: same fields, same bodies (compared by SHA-256), each key in one queue in order.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from apogee.client import Message, Producer, select_by_hash
from apogee.client.selectors import java_hash
from apogee.testing.cluster import BrokerProcess, broker_processes
from tests.harness.cpp import CppRun, run_cpp

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    with broker_processes(tmp_path_factory.mktemp("py-to-cpp")) as found:
        yield found


async def consume(namesrv: str, topic: str, until: int, **spec: object) -> CppRun:
    run = await run_cpp(
        {
            "action": "push_consume",
            "namesrv": namesrv,
            "topic": topic,
            "group": f"cpp_{topic}",
            "until": until,
            "run_s": 25,
            "property_names": ["ua", "trace"],
            **spec,
        },
        timeout_s=40,
    )
    assert run.returncode == 0, run.describe()
    return run


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_tags_keys_properties_and_bodies_reach_a_cpp_consumer(
    cluster: tuple[str, BrokerProcess], tmp_path: Path
) -> None:
    namesrv, _ = cluster
    binary = bytes(range(256)) * 3 + b"\x00tail\x00"
    large = b"a line of text that compresses well\n" * 400  # 14,400 bytes: sent compressed
    noise = os.urandom(6000)  # does not compress
    bodies = {f"msg-{i}": f"message-{i}".encode() for i in range(6)}
    bodies |= {"binary": binary, "large": large, "noise": noise}
    sent = {}
    async with Producer("py_pg", namesrv=namesrv) as producer:
        for name, body in bodies.items():
            msg = Message(
                "PyToCpp",
                body,
                tags=f"Tag-{name}",
                keys=[f"key-{name}", "shared"],
                properties={"ua": f"v-{name}", "trace": "on"},
            )
            sent[name] = await producer.send(msg)
        batch = [Message("PyToCpp", b"batch-%d" % i, tags="Tag-batch") for i in range(4)]
        [batch_result] = await producer.send_batch(batch)

    run = await consume(namesrv, "PyToCpp", len(bodies) + 4)

    got = {str(line["tags"]).removeprefix("Tag-"): line for line in run.messages}
    for name, body in bodies.items():
        line = got[name]
        assert line["topic"] == "PyToCpp"
        assert line["keys"] == f"key-{name} shared"
        assert (line["body_len"], line["body_sha256"]) == (len(body), sha(body)), name
        props = line["properties"]
        assert isinstance(props, dict)
        assert (props["ua"], props["trace"]) == (f"v-{name}", "on")
        assert props["UNIQ_KEY"] == sent[name].msg_id
        assert line["queue_id"] == sent[name].message_queue.queue_id
        assert line["queue_offset"] == sent[name].queue_offset
    batch_lines = [line for line in run.messages if line["tags"] == "Tag-batch"]
    assert sorted(str(line["body"]) for line in batch_lines) == [f"batch-{i}" for i in range(4)]
    batch_ids = {line["properties"]["UNIQ_KEY"] for line in batch_lines}  # type: ignore[index]
    assert batch_ids == set(batch_result.msg_id.split(","))


async def test_ordered_sends_reach_an_orderly_cpp_consumer_in_order(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    keys = [f"order-{i}" for i in range(4)]
    async with Producer("py_pg", namesrv=namesrv) as producer:
        await producer.send(Message("PyOrdered", b"warm-up", tags="warm"))
        await producer.instance.routes.refresh("PyOrdered")
        for step in range(5):
            for key in keys:
                msg = Message("PyOrdered", f"{key}/{step}".encode(), tags="ordered", keys=key)
                await producer.send(msg, selector=select_by_hash, arg=key)

    run = await consume(namesrv, "PyOrdered", 21, orderly=True)

    for key in keys:
        lines = [line for line in run.messages if line["keys"] == key]
        assert [line["body"] for line in lines] == [f"{key}/{s}" for s in range(5)]
        assert {line["queue_id"] for line in lines} == {abs(java_hash(key)) % 4}
