"""The name-server side of the admin commands, and their errors, against a real name server."""

from __future__ import annotations

from pathlib import Path

from apogee._util.net import free_port
from apogee.remoting.client import RemotingClient
from apogee.testing.namesrv import get_route, register_broker, running_namesrv
from tests.integration.admin.helpers import AdminCli, json_of

BROKER_A = f"127.0.0.1:{free_port()}"  # nothing listens: not even a local broker on 10911


async def _two_clusters(client: RemotingClient, ns: str, broker_b: str) -> None:
    await register_broker(client, ns, broker_addr=BROKER_A, topics=["T1", "T2", "%RETRY%G"])
    await register_broker(
        client, ns, broker_addr=broker_b, topics=["T2"], broker_name="broker-b", cluster="C2"
    )


async def test_topic_list_and_clusters(tmp_path: Path, admin_cli: AdminCli) -> None:
    async with running_namesrv(tmp_path) as (_, ns), RemotingClient() as client:
        await _two_clusters(client, ns, "127.0.0.1:10921")
        plain = await admin_cli("topicList", "-n", ns)
        assert plain.exit_code == 0, plain.output
        assert [w for w in plain.stdout.split() if w.startswith(("T", "%"))] == [
            "%RETRY%G",
            "T1",
            "T2",
        ]
        assert json_of(await admin_cli("topicList", "-n", ns, "--json")) == {
            "topics": ["%RETRY%G", "T1", "T2"]
        }
        # -c: clusters per topic, retry topics left out; -n from NAMESRV_ADDR
        doc = json_of(await admin_cli("topicList", "-c", "--json", env={"NAMESRV_ADDR": ns}))
        assert doc == {
            "topics": [
                {"topic": "T1", "clusters": ["DefaultCluster"]},
                {"topic": "T2", "clusters": ["C2", "DefaultCluster"]},
            ]
        }
        table = await admin_cli("topicList", "-n", ns, "-c")
        assert "C2,DefaultCluster" in table.stdout


async def test_topic_route(tmp_path: Path, admin_cli: AdminCli) -> None:
    async with running_namesrv(tmp_path) as (_, ns), RemotingClient() as client:
        await _two_clusters(client, ns, "127.0.0.1:10921")
        doc = json_of(await admin_cli("topicRoute", "-n", ns, "-t", "T2", "--json"))
        route = await get_route(client, ns, "T2")
        assert route is not None
        assert {b["brokerName"]: b["brokerAddrs"] for b in doc["brokerDatas"]} == {
            b.broker_name: {"0": b.broker_addrs[0]} for b in route.broker_datas
        }
        assert sorted(q["brokerName"] for q in doc["queueDatas"]) == ["broker-a", "broker-b"]
        table = await admin_cli("topicRoute", "-n", ns, "-t", "T2")
        assert table.exit_code == 0
        for text in ("broker-a", "broker-b", BROKER_A, "RW- (6)", "C2"):
            assert text in table.stdout
        missing = await admin_cli("topicRoute", "-n", ns, "-t", "nope")
        assert missing.exit_code == 1
        assert missing.stderr == "Error: topic nope does not exist\n"


async def test_cluster_list_shows_brokers_whose_runtime_is_unreadable(
    tmp_path: Path, admin_cli: AdminCli
) -> None:
    silent = f"127.0.0.1:{free_port()}"
    async with running_namesrv(tmp_path) as (_, ns), RemotingClient() as client:
        await _two_clusters(client, ns, silent)
        await register_broker(
            client,
            ns,
            broker_addr=silent.replace("127.0.0.1", "127.0.0.2"),
            topics=["T2"],
            broker_name="broker-b",
            cluster="C2",
            broker_id=1,
        )
        doc = json_of(await admin_cli("clusterList", "-n", ns, "--json"))
        brokers = doc["brokers"]
        assert isinstance(brokers, list)
        assert [(b["cluster"], b["brokerName"], b["brokerId"], b["addr"]) for b in brokers] == [
            ("C2", "broker-b", 0, silent),
            ("C2", "broker-b", 1, silent.replace("127.0.0.1", "127.0.0.2")),
            ("DefaultCluster", "broker-a", 0, BROKER_A),
        ]
        assert all("cannot connect" in b["error"] for b in brokers)
        table = await admin_cli("clusterList", "-n", ns)
        assert table.exit_code == 0
        assert "DefaultCluster" in table.stdout
        assert silent in table.stdout


async def test_delete_topic_stops_before_the_name_servers_when_a_broker_fails(
    tmp_path: Path, admin_cli: AdminCli
) -> None:
    silent = f"127.0.0.1:{free_port()}"
    async with running_namesrv(tmp_path) as (_, ns), RemotingClient() as client:
        await register_broker(client, ns, broker_addr=silent, topics=["T1"])
        failed = await admin_cli("deleteTopic", "-n", ns, "-t", "T1", "-c", "DefaultCluster")
        assert failed.exit_code == 1
        assert failed.stderr.startswith(f"Error: deleteTopic failed: cannot connect to {silent}")
        assert failed.stderr.count("\n") == 1
        assert await get_route(client, ns, "T1") is not None  # the name servers kept the route
        unknown = await admin_cli("deleteTopic", "-n", ns, "-t", "T1", "-c", "Nope")
        assert unknown.exit_code == 1
        assert "cluster Nope does not exist (known clusters: DefaultCluster)" in unknown.stderr


async def test_bad_input_is_one_line_and_non_zero(tmp_path: Path, admin_cli: AdminCli) -> None:
    dead = f"127.0.0.1:{free_port()}"
    unreachable = await admin_cli("topicList", "-n", dead)
    assert unreachable.exit_code == 1
    assert unreachable.stderr.startswith(
        f"Error: topicList failed: no name server answered ({dead})"
    )
    assert unreachable.stderr.count("\n") == 1
    missing_flag = await admin_cli("topicRoute", "-n", dead)
    assert missing_flag.exit_code == 1
    assert missing_flag.stderr == "Error: Missing option '-t' / '--topic'.\n"
    no_namesrv = await admin_cli("topicList", env={"NAMESRV_ADDR": None})
    assert no_namesrv.exit_code == 1
    assert "pass -n HOST:PORT (e.g. -n 127.0.0.1:9876) or set NAMESRV_ADDR" in no_namesrv.stderr
    bad_id = await admin_cli("queryMsgById", "-n", dead, "-i", "not-an-id")
    assert bad_id.exit_code == 1
    assert bad_id.stderr.startswith(
        "Error: message id 'not-an-id' is neither an offset message id nor a unique key"
    )
    bad_perm = await admin_cli("updateTopic", "-n", dead, "-c", "C", "-t", "T", "-p", "9")
    assert bad_perm.exit_code == 1
    assert "-p perm must be 0..7" in bad_perm.stderr
    no_target = await admin_cli("updateTopic", "-n", dead, "-t", "T")
    assert no_target.stderr == "Error: updateTopic needs -b broker address or -c cluster name\n"
    bad_topic = await admin_cli("updateTopic", "-n", dead, "-c", "C", "-t", "a b")
    assert bad_topic.exit_code == 1
    assert "characters outside" in bad_topic.stderr
    queue_without_broker = await admin_cli(
        "sendMessage", "-n", dead, "-t", "T", "-p", "x", "-i", "1"
    )
    assert queue_without_broker.stderr == "Error: -i queue id needs -b broker name\n"
    bad_bool = await admin_cli("updateSubGroup", "-n", dead, "-c", "C", "-g", "G", "-s", "maybe")
    assert bad_bool.stderr == "Error: -s must be true or false, not 'maybe'\n"
    bad_count = await admin_cli("consumeMessage", "-n", dead, "-t", "T", "-c", "0")
    assert bad_count.exit_code == 1
    assert "-c" in bad_count.stderr
    assert bad_count.stderr.count("\n") == 1
    helped = await admin_cli("topicRoute", "-h")
    assert helped.exit_code == 0
    assert "-t, --topic" in helped.stdout
