"""mqadmin commands that change or inspect brokers, end to end against a real cluster.

The commands run in-process through click (``admin_cli``), in a worker thread with their
own event loop, while the servers serve on the test's loop; every check reads ``--json``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.errors import NoPermissionError
from apogee.model.client import ConsumerData, HeartbeatData
from apogee.model.message import Message
from apogee.model.route import PERM_READ, PERM_RW, PERM_WRITE
from apogee.model.subscription import SubscriptionData
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import run_broker
from apogee.testing.namesrv import get_route, running_namesrv
from tests.integration.admin.helpers import AdminCli, json_of


@dataclass
class Cluster:
    namesrv: str
    broker: Broker
    client: RemotingClient
    api: BrokerApi

    async def send(self, topic: str, queue_id: int, count: int) -> None:
        for i in range(count):
            msg = Message(topic, b"m%d" % i)
            await self.api.send(
                self.broker.address, "broker-a", msg, queue_id=queue_id, producer_group="pg"
            )
        self.broker.dispatch.drain()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with (
        running_namesrv(tmp_path) as (_, ns),
        run_broker(tmp_path / "store", ns) as broker,
        RemotingClient() as client,
    ):
        yield Cluster(ns, broker, client, BrokerApi(client, timeout_s=5))


async def test_update_topic_status_and_delete(cluster: Cluster, admin_cli: AdminCli) -> None:
    ns = cluster.namesrv
    created = json_of(
        await admin_cli(
            "updateTopic",
            "-n",
            ns,
            "-c",
            "DefaultCluster",
            "-t",
            "Orders",
            "-r",
            "3",
            "-w",
            "3",
            "--json",
        )
    )
    assert created["brokers"] == [cluster.broker.address]
    assert created["topicConfig"]["writeQueueNums"] == 3

    await cluster.send("Orders", 2, 5)
    status = json_of(await admin_cli("topicStatus", "-n", ns, "-t", "Orders", "--json"))
    queues = {q["queueId"]: q for q in status["queues"]}
    assert sorted(queues) == [0, 1, 2]
    assert (queues[2]["minOffset"], queues[2]["maxOffset"]) == (0, 5)
    assert queues[2]["lastUpdateTimestamp"] > 0
    assert queues[0]["maxOffset"] == 0
    table = await admin_cli("topicStatus", "-n", ns, "-t", "Orders")
    assert table.exit_code == 0 and "broker-a" in table.stdout

    deleted = json_of(
        await admin_cli("deleteTopic", "-n", ns, "-t", "Orders", "-c", "DefaultCluster", "--json")
    )
    assert deleted["brokers"] == [cluster.broker.address]
    assert "Orders" not in cluster.broker.topics
    assert await get_route(cluster.client, ns, "Orders") is None
    gone = await admin_cli("topicStatus", "-n", ns, "-t", "Orders")
    assert gone.exit_code == 1
    assert gone.stderr == "Error: topic Orders does not exist\n"


async def test_update_topic_refusals_come_back_as_one_line(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    addr = cluster.broker.address
    refused = await admin_cli("updateTopic", "-n", cluster.namesrv, "-b", addr, "-t", "TBW102")
    assert refused.exit_code == 1
    assert refused.stderr == (
        "Error: updateTopic failed: SYSTEM_ERROR: "
        "The topic[TBW102] is conflict with system topic.\n"
    )


async def test_cluster_list_and_broker_status(cluster: Cluster, admin_cli: AdminCli) -> None:
    ns, addr = cluster.namesrv, cluster.broker.address
    await cluster.send("T1", 0, 2)
    doc = json_of(await admin_cli("clusterList", "-n", ns, "--json"))
    (row,) = doc["brokers"]
    assert (row["cluster"], row["brokerName"], row["brokerId"], row["addr"]) == (
        "DefaultCluster", "broker-a", 0, addr,
    )  # fmt: skip
    assert row["version"] == "V4_9_4"
    assert float(row["inTps"]) >= 0 and float(row["outTps"]) >= 0
    assert "error" not in row

    status = json_of(await admin_cli("brokerStatus", "-n", ns, "-b", addr, "--json"))
    assert status["msgPutTotalTodayNow"] == "2"
    assert status["brokerVersionDesc"] == "V4_9_4"
    keys = ["putTps", "getTransferedTps", "commitLogMaxOffset", "dispatchBehindBytes"]
    keys += ["bootTimestamp", "runtime", "earliestMessageTimeStamp", "commitLogDiskRatio"]
    assert set(keys) <= set(status)
    by_cluster = json_of(
        await admin_cli("brokerStatus", "-n", ns, "-c", "DefaultCluster", "--json")
    )
    assert list(by_cluster) == [addr]
    table = await admin_cli("brokerStatus", "-n", ns, "-b", addr)
    assert table.exit_code == 0 and "msgPutTotalTodayNow" in table.stdout


async def test_update_sub_group_then_consumer_progress(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    ns, addr = cluster.namesrv, cluster.broker.address
    doc = json_of(
        await admin_cli(
            "updateSubGroup",
            "-n",
            ns,
            "-c",
            "DefaultCluster",
            "-g",
            "cg",
            "-r",
            "3",
            "-q",
            "2",
            "--json",
        )
    )
    assert doc["brokers"] == [addr]
    group = cluster.broker.groups.get("cg")
    assert group is not None
    assert (group.retry_max_times, group.retry_queue_nums) == (3, 2)
    assert not group.consume_broadcast_enable  # mqadmin's quirk: off unless -d true

    # a consumer joins (its retry topic gets 2 queues and a route), reads and commits
    subs = (SubscriptionData.build("T1", "*"), SubscriptionData.build("%RETRY%cg", "*"))
    beat = HeartbeatData("c1", consumers=(ConsumerData("cg", subscriptions=subs),))
    await cluster.api.heartbeat(addr, beat)
    await cluster.send("T1", 1, 4)
    await cluster.api.pull(addr, "cg", "T1", 1, 0)
    await cluster.api.update_consumer_offset(addr, "cg", "T1", 1, 3)
    await cluster.api.update_consumer_offset(addr, "cg", "%RETRY%cg", 0, 0)
    retry = cluster.broker.topics.select("%RETRY%cg")
    assert retry is not None and retry.write_queue_nums == 2

    progress = json_of(await admin_cli("consumerProgress", "-n", ns, "-g", "cg", "--json"))
    rows = {(q["topic"], q["queueId"]): q for q in progress["queues"]}
    assert (rows["T1", 1]["brokerOffset"], rows["T1", 1]["consumerOffset"]) == (4, 3)
    assert rows["T1", 1]["diff"] == 1 and rows["T1", 1]["lastTimestamp"] > 0
    assert {key for key in rows if key[0] == "%RETRY%cg"} == {("%RETRY%cg", 0), ("%RETRY%cg", 1)}
    assert progress["diffTotal"] == 1
    assert progress["consumeTps"] >= 0
    one = json_of(await admin_cli("consumerProgress", "-n", ns, "-g", "cg", "-t", "T1", "--json"))
    assert {q["topic"] for q in one["queues"]} == {"T1"}
    unknown = await admin_cli("consumerProgress", "-n", ns, "-g", "nobody")
    assert unknown.exit_code == 1
    assert "consumer group nobody is unknown to the name servers" in unknown.stderr


async def test_drain_a_broker_by_permission(cluster: Cluster, admin_cli: AdminCli) -> None:
    """updateBrokerConfig brokerPermission=4 refuses sends and reaches the routes; 6 restores."""
    ns, addr = cluster.namesrv, cluster.broker.address
    await cluster.send("Drain", 0, 1)

    updated = json_of(
        await admin_cli(
            "updateBrokerConfig",
            "-n",
            ns,
            "-b",
            addr,
            "-k",
            "brokerPermission",
            "-v",
            "4",
            "--json",
        )
    )
    assert updated["updated"] == [addr]
    with pytest.raises(NoPermissionError):
        await cluster.send("Drain", 0, 1)
    route = await get_route(cluster.client, ns, "Drain")
    assert route is not None and route.queue_datas[0].perm == PERM_READ
    config = await cluster.api.get_broker_config(addr)
    assert config["brokerPermission"] == "4"

    await admin_cli("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerPermission", "-v", "6")
    await cluster.send("Drain", 0, 1)
    route = await get_route(cluster.client, ns, "Drain")
    assert route is not None and route.queue_datas[0].perm == PERM_RW


async def test_update_broker_config_refuses_other_keys(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    ns, addr = cluster.namesrv, cluster.broker.address
    result = await admin_cli(
        "updateBrokerConfig", "-n", ns, "-b", addr, "-k", "listenPort", "-v", "1"
    )
    assert result.exit_code == 1
    assert "listenPort" in result.output
    bad = await admin_cli(
        "updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerPermission", "-v", "9"
    )
    assert bad.exit_code == 1
    assert "brokerPermission" in bad.output
    await cluster.send("StillWriteable", 0, 1)


async def test_wipe_and_add_write_perm_on_the_name_server(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    ns = cluster.namesrv
    await cluster.send("Wiped", 0, 1)
    wiped = json_of(await admin_cli("wipeWritePerm", "-n", ns, "-b", "broker-a", "--json"))
    assert wiped["topicCounts"][ns] >= 1
    route = await get_route(cluster.client, ns, "Wiped")
    assert route is not None and not route.queue_datas[0].perm & PERM_WRITE
    added = await admin_cli("addWritePerm", "-n", ns, "-b", "broker-a")
    assert added.exit_code == 0, added.output
    route = await get_route(cluster.client, ns, "Wiped")
    assert route is not None and route.queue_datas[0].perm == PERM_RW
