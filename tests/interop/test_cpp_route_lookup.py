"""The C++ client's route lookup against a fake name server; proves the C++ harness end to end.

``FakeNameServer`` is a deliberate fake at a seam the real name server will take over later: it
answers GET_ROUTEINFO_BY_TOPIC (105) and nothing else, with its own minimal frame codec so
that this test does not depend on ``apogee.protocol``. What it checks about the client
(docs/interop/cpp-client.md, "Producer: route lookup"):

* a topic with a route makes the producer connect to the broker address in the route;
* a topic without one (TOPIC_NOT_EXIST) makes it ask for TBW102 and give up without
  connecting anywhere.

Both failures end in the same exception text from librocketmq ("No route info of this
topic: ..."), because the client's sync send turns every failed attempt into that message
after its last retry; the client's own log tells the two apart, so that is what is asserted.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from apogee.testing.cpp import CppRun, run_cpp

pytestmark = pytest.mark.interop

GET_ROUTEINFO_BY_TOPIC = 105
TOPIC_NOT_EXIST = 17
REQUEST_CODE_NOT_SUPPORTED = 3


class FakeNameServer:
    """Answers route requests from a fixed table; records every topic it was asked about."""

    def __init__(self, routes: dict[str, str]) -> None:
        self.routes = routes  # topic -> "host:port" of the only (master) broker
        self.asked: list[str] = []
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def __aenter__(self) -> FakeNameServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(length)
                (header_word,) = struct.unpack(">I", frame[:4])
                header = json.loads(frame[4 : 4 + (header_word & 0xFFFFFF)])
                writer.write(self._answer(header))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            await writer.wait_closed()

    def _answer(self, request: dict[str, object]) -> bytes:
        body = b""
        if request.get("code") != GET_ROUTEINFO_BY_TOPIC:
            code = REQUEST_CODE_NOT_SUPPORTED
        else:
            ext = request.get("extFields")
            topic = str(ext.get("topic")) if isinstance(ext, dict) else ""
            self.asked.append(topic)
            broker = self.routes.get(topic)
            code = TOPIC_NOT_EXIST if broker is None else 0
            if broker is not None:
                body = json.dumps(route(broker)).encode()
        header = json.dumps(
            {
                "code": code,
                "flag": 1,
                "language": "JAVA",
                "opaque": request.get("opaque"),
                "version": 0,
            }
        ).encode()
        return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def route(broker: str) -> dict[str, object]:
    return {
        "brokerDatas": [
            {"brokerAddrs": {"0": broker}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
        ],
        "filterServerTable": {},
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "perm": 6,
                "readQueueNums": 4,
                "topicSysFlag": 0,
                "writeQueueNums": 4,
            }
        ],
    }


def unused_port() -> int:
    """A port nothing listens on: bound once by us, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def dead_broker_namesrv() -> AsyncIterator[tuple[FakeNameServer, str]]:
    broker = f"127.0.0.1:{unused_port()}"
    async with FakeNameServer({"RouteTopic": broker}) as namesrv:
        yield namesrv, broker


async def produce_once(namesrv: FakeNameServer, topic: str, home: Path) -> CppRun:
    spec = {"action": "produce", "namesrv": namesrv.address, "topic": topic, "count": 1}
    return await run_cpp(spec, home=home, timeout_s=20.0)


async def test_route_sends_the_producer_to_the_broker_it_names(
    dead_broker_namesrv: tuple[FakeNameServer, str], tmp_path: Path
) -> None:
    namesrv, broker = dead_broker_namesrv
    run = await produce_once(namesrv, "RouteTopic", tmp_path)

    assert run.returncode == 1, run.describe()
    assert len(run.failures) == 1, run.describe()
    log = run.log_text()
    assert f"can not connect to server:{broker}" in log, run.describe()
    assert "send failed of times" in log, run.describe()
    assert "tryToFindTopicPublishInfo null" not in log, run.describe()
    # the route was good, so the producer never fell back to the default topic
    assert set(namesrv.asked) == {"RouteTopic"}, namesrv.asked


async def test_unknown_topic_fails_with_no_route_and_no_connection(tmp_path: Path) -> None:
    async with FakeNameServer({}) as namesrv:
        run = await produce_once(namesrv, "NoSuchTopic", tmp_path)

    assert run.returncode == 1, run.describe()
    [failure] = run.failures
    assert "No route info of this topic: NoSuchTopic" in str(failure["error"]), run.describe()
    log = run.log_text()
    assert "tryToFindTopicPublishInfo null:NoSuchTopic" in log, run.describe()
    assert "can not connect to server" not in log, run.describe()
    # TOPIC_NOT_EXIST for the topic makes the client ask for the default topic TBW102 next
    assert namesrv.asked[:2] == ["NoSuchTopic", "TBW102"], namesrv.asked
