"""The C++ client's route lookup against our real name server.

A test registers a broker for a topic with REGISTER_BROKER (as a broker does); the C++
producer must then get past route lookup, so its send fails on connecting to the broker
address in the route, not for want of a route (docs/interop/cpp-client.md, "Producer: route
lookup"). For a topic nobody registered, the client asks for TBW102 and gives up without
connecting anywhere.

Both failures end in the same exception text from librocketmq ("No route info of this
topic: ..."), because the client's sync send turns every failed attempt into that message
after its last retry; the client's own log tells the two apart, so that is what is asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee._util.net import free_port
from apogee.remoting.client import RemotingClient
from apogee.testing.namesrv import register_broker, running_namesrv
from tests.harness.cpp import CppRun, run_cpp

pytestmark = pytest.mark.interop


async def produce_once(namesrv: str, topic: str, home: Path) -> CppRun:
    spec = {"action": "produce", "namesrv": namesrv, "topic": topic, "count": 1}
    return await run_cpp(spec, home=home, timeout_s=20.0)


async def test_route_sends_the_producer_to_the_broker_it_names(tmp_path: Path) -> None:
    broker = f"127.0.0.1:{free_port()}"
    (tmp_path / "ns").mkdir()
    async with running_namesrv(tmp_path / "ns") as (_, namesrv), RemotingClient() as client:
        answer = await register_broker(client, namesrv, broker_addr=broker, topics=["RouteTopic"])
        assert answer.code == 0
        run = await produce_once(namesrv, "RouteTopic", tmp_path)

    assert run.returncode == 1, run.describe()
    assert len(run.failures) == 1, run.describe()
    log = run.log_text()
    assert f"can not connect to server:{broker}" in log, run.describe()
    assert "send failed of times" in log, run.describe()
    assert "tryToFindTopicPublishInfo null" not in log, run.describe()


async def test_unknown_topic_fails_with_no_route_and_no_connection(tmp_path: Path) -> None:
    (tmp_path / "ns").mkdir()
    async with running_namesrv(tmp_path / "ns") as (_, namesrv):
        run = await produce_once(namesrv, "NoSuchTopic", tmp_path)

    assert run.returncode == 1, run.describe()
    [failure] = run.failures
    assert "No route info of this topic: NoSuchTopic" in str(failure["error"]), run.describe()
    log = run.log_text()
    assert "tryToFindTopicPublishInfo null:NoSuchTopic" in log, run.describe()
    assert "can not connect to server" not in log, run.describe()
