"""The admin commands end to end: a real name server, a real broker, the click commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.model.message import Message
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker, run_namesrv
from apogee.testing.namesrv import get_route
from tests.integration.admin.helpers import AdminCli, json_of

TOPIC = "AdminT"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[str, Broker]]:
    """A name server and a broker registered with it, serving TOPIC (4 queues)."""
    async with run_namesrv(tmp_path / "ns") as ns:
        ns_addr = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "store", ns_addr) as broker, RemotingClient() as client:
            # the first send creates the topic from TBW102; the broker then registers it
            await BrokerApi(client).send(
                broker.address, "broker-a", Message(TOPIC, b"seed"), queue_id=0, producer_group="pg"
            )
            for _ in range(250):
                if await get_route(client, ns_addr, TOPIC) is not None:
                    break
                await asyncio.sleep(0.02)
            yield ns_addr, broker


async def _eventually_json(admin_cli: AdminCli, *args: str) -> dict[str, Any]:
    """A --json answer with at least one message (the key index is written just after a send)."""
    for _ in range(200):
        doc = json_of(await admin_cli(*args, "--json"))
        if doc["messages"]:
            return doc
        await asyncio.sleep(0.02)
    raise AssertionError(f"{args} found nothing")


async def test_send_then_read_back_every_way(
    cluster: tuple[str, Broker], admin_cli: AdminCli
) -> None:
    ns, broker = cluster
    sent = json_of(
        await admin_cli(
            "sendMessage", "-n", ns, "-t", TOPIC, "-p", "hello admin", "-k", "K1 K2", "-c", "TagX",
            "-b", "broker-a", "-i", "2", "--json",
        )
    )  # fmt: skip
    assert (sent["brokerName"], sent["queueId"], sent["queueOffset"]) == ("broker-a", 2, 0)
    assert sent["sendStatus"] == "SEND_OK"

    consumed = json_of(
        await admin_cli(
            "consumeMessage",
            "-n",
            ns,
            "-t",
            TOPIC,
            "-b",
            "broker-a",
            "-i",
            "2",
            "-o",
            "0",
            "--json",
        )
    )
    [queue] = consumed["queues"]
    assert (queue["queueId"], queue["status"], queue["nextOffset"]) == (2, "NO_NEW_MSG", 1)
    [msg] = queue["messages"]
    assert (msg["body"], msg["tags"], msg["keys"]) == ("hello admin", "TagX", "K1 K2")
    assert (msg["msgId"], msg["offsetMsgId"]) == (sent["msgId"], sent["offsetMsgId"])

    by_id = json_of(await admin_cli("queryMsgById", "-n", ns, "-i", sent["offsetMsgId"], "--json"))
    assert (by_id["body"], by_id["queueId"], by_id["storeHost"]) == (
        "hello admin",
        2,
        broker.address,
    )
    # a producer's UNIQ_KEY works too when the topic is given
    by_uniq = json_of(
        await admin_cli("queryMsgById", "-n", ns, "-i", sent["msgId"], "-t", TOPIC, "--json")
    )
    assert by_uniq["offsetMsgId"] == sent["offsetMsgId"]

    by_key = await _eventually_json(admin_cli, "queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "K2")
    assert [m["offsetMsgId"] for m in by_key["messages"]] == [sent["offsetMsgId"]]
    table = await admin_cli("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "K2")
    assert sent["msgId"] in table.stdout
    detail = await admin_cli("queryMsgById", "-n", ns, "-i", sent["offsetMsgId"])
    assert "hello admin" in detail.stdout
    assert "TagX" in detail.stdout


async def test_consume_spans_queues_up_to_the_count(
    cluster: tuple[str, Broker], admin_cli: AdminCli
) -> None:
    ns, _ = cluster
    for i in range(5):
        sent = await admin_cli("sendMessage", "-n", ns, "-t", TOPIC, "-p", f"m{i}")
        assert sent.exit_code == 0, sent.output
        assert "SEND_OK" in sent.stdout
    everything = json_of(await admin_cli("consumeMessage", "-n", ns, "-t", TOPIC, "--json"))
    bodies = sorted(m["body"] for q in everything["queues"] for m in q["messages"])
    assert bodies == ["m0", "m1", "m2", "m3", "m4", "seed"]
    three = json_of(await admin_cli("consumeMessage", "-n", ns, "-t", TOPIC, "-c", "3", "--json"))
    assert sum(len(q["messages"]) for q in three["queues"]) == 3
    table = await admin_cli("consumeMessage", "-n", ns, "-t", TOPIC, "-b", "broker-a", "-i", "0")
    assert "seed" in table.stdout


async def test_message_commands_name_what_is_missing(
    cluster: tuple[str, Broker], admin_cli: AdminCli
) -> None:
    ns, broker = cluster
    unknown = await admin_cli("sendMessage", "-n", ns, "-t", "NoSuchTopic", "-p", "x")
    assert (unknown.exit_code, unknown.stderr) == (1, "Error: topic NoSuchTopic does not exist\n")
    no_broker = await admin_cli("sendMessage", "-n", ns, "-t", TOPIC, "-p", "x", "-b", "broker-z")
    assert no_broker.stderr == f"Error: broker broker-z has no master serving topic {TOPIC}\n"
    no_queue = await admin_cli(
        "sendMessage", "-n", ns, "-t", TOPIC, "-p", "x", "-b", "broker-a", "-i", "9"
    )
    assert no_queue.stderr == f"Error: topic {TOPIC} has no writable queue 9 of broker broker-a\n"
    consume_unknown = await admin_cli("consumeMessage", "-n", ns, "-t", "NoSuchTopic")
    assert consume_unknown.stderr == "Error: topic NoSuchTopic does not exist\n"
    offset_without_queue = await admin_cli("consumeMessage", "-n", ns, "-t", TOPIC, "-o", "3")
    assert offset_without_queue.stderr == "Error: -o offset needs -i queue id\n"
    # a well-formed id whose offset holds nothing: the broker's answer, named
    host, port = broker.address.split(":")
    nowhere = bytes(map(int, host.split("."))).hex().upper() + f"{int(port):08X}" + f"{10**12:016X}"
    missing = await admin_cli("queryMsgById", "-n", ns, "-i", nowhere)
    assert missing.exit_code == 1
    assert missing.stderr.startswith("Error: queryMsgById failed: SYSTEM_ERROR: ")
    assert missing.stderr.count("\n") == 1


async def test_route_and_topics_as_the_broker_registered_them(
    cluster: tuple[str, Broker], admin_cli: AdminCli
) -> None:
    ns, broker = cluster
    route = json_of(await admin_cli("topicRoute", "-n", ns, "-t", TOPIC, "--json"))
    assert route["brokerDatas"] == [
        {
            "brokerAddrs": {"0": broker.address},
            "brokerName": "broker-a",
            "cluster": "DefaultCluster",
        }
    ]
    [queues] = route["queueDatas"]
    assert (queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (4, 4, 6)
    topics = json_of(await admin_cli("topicList", "-n", ns, "-c", "--json"))["topics"]
    assert {"topic": TOPIC, "clusters": ["DefaultCluster"]} in topics
