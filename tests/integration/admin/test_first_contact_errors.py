"""What a newcomer typed first, and what the admin commands answer now.

Each test is one complaint of a first try: an id from sendMessage that queryMsgById
could not read, a missing or wrong ``-n``, a code said twice, a bad topic name called
missing, clusterList's raw disk ratio and its JSON that dropped columns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apogee.model.msgid import OffsetMsgId, UniqKey, classify_msg_id
from apogee.testing.cluster import run_broker
from apogee.testing.namesrv import running_namesrv
from tests.integration.admin.helpers import AdminCli, json_of


@dataclass
class Cluster:
    namesrv: str
    broker: str


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with (
        running_namesrv(tmp_path) as (_, ns),
        run_broker(tmp_path / "store", ns) as broker,
    ):
        yield Cluster(ns, broker.address)


async def test_query_msg_by_id_reads_both_ids_send_message_printed(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    ns = cluster.namesrv
    await admin_cli("updateTopic", "-n", ns, "-b", cluster.broker, "-t", "Ids")
    sent = json_of(await admin_cli("sendMessage", "-n", ns, "-t", "Ids", "-p", "find me", "--json"))
    assert isinstance(classify_msg_id(sent["msgId"]), UniqKey)
    assert isinstance(classify_msg_id(sent["offsetMsgId"]), OffsetMsgId)
    for msg_id in (sent["msgId"], sent["offsetMsgId"]):  # no -t needed for either
        found = json_of(await admin_cli("queryMsgById", "-n", ns, "-i", msg_id, "--json"))
        assert (found["body"], found["msgId"]) == ("find me", sent["msgId"])
    with_topic = json_of(
        await admin_cli("queryMsgById", "-n", ns, "-i", sent["msgId"], "-t", "Ids", "--json")
    )
    assert with_topic["offsetMsgId"] == sent["offsetMsgId"]
    unknown = sent["msgId"][:-4] + ("0000" if not sent["msgId"].endswith("0000") else "0001")
    missing = await admin_cli("queryMsgById", "-n", ns, "-i", unknown)
    assert missing.exit_code == 1
    assert missing.stderr.startswith(f"Error: {unknown} is a producer's unique key (made at ")
    assert "no topic holds it" in missing.stderr


async def test_a_missing_or_wrong_name_server_is_explained(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    missing = await admin_cli("topicList", env={"NAMESRV_ADDR": None})
    assert missing.exit_code == 1
    assert missing.stderr == (
        "Error: no name server given: pass -n HOST:PORT (e.g. -n 127.0.0.1:9876) "
        "or set NAMESRV_ADDR\n"
    )
    from_env = await admin_cli("topicList", "--json", env={"NAMESRV_ADDR": cluster.namesrv})
    assert "TBW102" in json_of(from_env)["topics"]
    a_broker = await admin_cli("clusterList", "-n", cluster.broker)
    assert a_broker.exit_code == 1
    assert a_broker.stderr.startswith(
        f"Error: {cluster.broker} is not a name server: it does not serve name-server requests"
    )
    assert "206" not in a_broker.stderr


async def test_a_refusal_names_its_code_once(cluster: Cluster, admin_cli: AdminCli) -> None:
    ns = cluster.namesrv
    await admin_cli("updateTopic", "-n", ns, "-b", cluster.broker, "-t", "Big")
    big = await admin_cli("sendMessage", "-n", ns, "-t", "Big", "-p", "x" * (5 << 20))
    assert big.exit_code == 1
    assert big.stderr.startswith("Error: sendMessage failed: MESSAGE_ILLEGAL: ")
    assert big.stderr.count("MESSAGE_ILLEGAL") == 1
    assert big.stderr.count("\n") == 1


async def test_an_illegal_topic_name_is_called_illegal(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    bad = await admin_cli("sendMessage", "-n", cluster.namesrv, "-t", "bad topic!", "-p", "x")
    assert bad.exit_code == 1
    assert "does not exist" not in bad.stderr
    assert "characters outside" in bad.stderr


async def test_cluster_list_shows_space_as_a_share_and_json_keeps_every_column(
    cluster: Cluster, admin_cli: AdminCli
) -> None:
    table = await admin_cli("clusterList", "-n", cluster.namesrv)
    assert table.exit_code == 0
    row = next(line for line in table.stdout.splitlines() if cluster.broker in line)
    assert row.split()[-1].endswith("%") and "." in row.split()[-1]
    doc = json_of(await admin_cli("clusterList", "-n", cluster.namesrv, "--json"))
    (broker,) = doc["brokers"]
    assert {"version", "inTps", "outTps", "pageCacheLockTimeMills", "commitLogDiskRatio"} <= set(
        broker
    )
    assert 0 <= broker["commitLogDiskRatio"] <= 1
    assert isinstance(broker["inTps"], float)
