"""NamesrvApi against a real name server with a broker registered as a broker would."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee._util.net import free_port
from apogee.client.namesrv_api import NamesrvApi, parse_namesrv_addrs
from apogee.errors import ClientError, RemotingConnectError, TopicNotExistError
from apogee.model.route import PERM_READ, PERM_RW
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.namesrv import register_broker, running_namesrv

BROKER_A = "127.0.0.1:10911"
BROKER_B = "127.0.0.1:10921"


async def test_routes_clusters_and_topic_lists(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        await register_broker(client, addr, broker_addr=BROKER_A, topics=["T1", "T2"])
        await register_broker(
            client, addr, broker_addr=BROKER_B, topics=["T2"], broker_name="b", cluster="C2"
        )
        api = NamesrvApi(client, [addr])
        route = await api.get_route("T2")
        assert sorted(b.broker_name for b in route.broker_datas) == ["b", "broker-a"]
        assert {q.broker_name: q.write_queue_nums for q in route.queue_datas} == {
            "b": 4,
            "broker-a": 4,
        }
        with pytest.raises(TopicNotExistError) as missing:
            await api.get_route("nope")
        assert missing.value.code == 17
        assert "nope" in str(missing.value)
        info = await api.get_cluster_info()
        assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"], "C2": ["b"]}
        assert info.broker_addr_table["b"].broker_addrs == {0: BROKER_B}
        assert sorted(await api.get_all_topics()) == ["T1", "T2"]
        assert sorted(await api.get_topics_by_cluster("DefaultCluster")) == ["T1", "T2"]
        assert await api.get_topics_by_cluster("C2") == ["T2"]


async def test_kv_config_outcomes(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        api = NamesrvApi(client, [addr])
        assert await api.get_kv("ns", "k") is None
        assert await api.get_kv_list("ns") == {}
        await api.put_kv("ns", "k", "v1")
        await api.put_kv("ns", "k2", "v2")
        assert await api.get_kv("ns", "k") == "v1"
        assert await api.get_kv_list("ns") == {"k": "v1", "k2": "v2"}
        await api.delete_kv("ns", "k")
        assert await api.get_kv("ns", "k") is None
        assert await api.get_kv_list("ns") == {"k2": "v2"}


async def test_write_perm_and_topic_deletion_on_every_name_server(tmp_path: Path) -> None:
    async with (
        running_namesrv(tmp_path / "a") as (_, ns1),
        running_namesrv(tmp_path / "b") as (_, ns2),
        RemotingClient() as client,
    ):
        for ns in (ns1, ns2):
            await register_broker(client, ns, broker_addr=BROKER_A, topics=["T1", "T2"])
        api = NamesrvApi(client, [ns1, ns2])
        assert await api.wipe_write_perm("broker-a") == {ns1: 2, ns2: 2}
        for ns in (ns1, ns2):
            route = await NamesrvApi(client, [ns]).get_route("T1")
            assert route.queue_datas[0].perm == PERM_READ
        assert await api.add_write_perm("broker-a") == {ns1: 2, ns2: 2}
        assert (await api.get_route("T1")).queue_datas[0].perm == PERM_RW
        await api.delete_topic("T1")
        for ns in (ns1, ns2):
            only = NamesrvApi(client, [ns])
            assert await only.get_all_topics() == ["T2"]
            with pytest.raises(TopicNotExistError):
                await only.get_route("T1")


async def test_reads_skip_an_unreachable_name_server(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        await register_broker(client, addr, broker_addr=BROKER_A, topics=["T1"])
        api = NamesrvApi(client, parse_namesrv_addrs(f"{dead};{addr}"))
        assert await api.get_all_topics() == ["T1"]
        # writes must reach every name server: the dead one fails the round, named
        with pytest.raises(RemotingConnectError, match=f"name server {dead}"):
            await api.put_kv("ns", "k", "v")


async def test_no_name_server_answers() -> None:
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    async with RemotingClient(ClientConfig(connect_timeout_s=1.0)) as client:
        api = NamesrvApi(client, dead)
        with pytest.raises(RemotingConnectError, match="no name server answered"):
            await api.get_cluster_info()
    with pytest.raises(ClientError):
        NamesrvApi(client, parse_namesrv_addrs(" ; "))
