"""The name server over real sockets: registration, routes, expiry, KV, bad input."""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import struct
from pathlib import Path

import orjson
import pytest

from apogee.codes import RequestCode, ResponseCode
from apogee.model.route import PERM_READ, DataVersion
from apogee.protocol import bodies
from apogee.protocol import headers as h
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import eventually
from apogee.testing.namesrv import get_route, register_broker, running_namesrv

BROKER = "127.0.0.1:10911"


async def _call(client: RemotingClient, addr: str, code: int, **ext: str) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, dict(ext)))


async def test_registered_broker_is_found_by_route_lookup(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        answer = await register_broker(client, addr, broker_addr=BROKER, topics=["T1", "T2"])
        assert answer.code == ResponseCode.SUCCESS
        route = await get_route(client, addr, "T1")
        assert route is not None
        assert route.broker_datas[0].broker_addrs == {0: BROKER}
        assert route.queue_datas[0].write_queue_nums == 4
        missing = await _call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="nope")
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        # the route body is standard JSON: map keys quoted, parseable by a strict parser
        raw = await _call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T1")
        assert orjson.loads(raw.body_bytes())["brokerDatas"][0]["brokerAddrs"] == {"0": BROKER}


async def test_compressed_registration_and_slave_learns_master(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        await register_broker(client, addr, broker_addr=BROKER, topics=["T1"], compressed=True)
        answer = await register_broker(
            client, addr, broker_addr="127.0.0.1:20911", topics=["T1"], broker_id=1
        )
        header = h.RegisterBrokerResponseHeader.from_ext(answer.ext_fields)
        assert header.master_addr == BROKER
        assert header.ha_server_addr == BROKER
        route = await get_route(client, addr, "T1")
        assert route is not None
        assert route.broker_datas[0].broker_addrs == {0: BROKER, 1: "127.0.0.1:20911"}


async def test_registration_with_bad_crc_is_refused(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        header = h.RegisterBrokerRequestHeader(
            broker_name="b",
            broker_addr=BROKER,
            cluster_name="C",
            ha_server_addr=BROKER,
            broker_id=0,
            body_crc32=12345,
        )
        body = bodies.encode_register_broker_body(bodies.RegisterBrokerBody())
        request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext(), body)
        answer = await client.invoke(addr, request)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark == "crc32 not match"
        # a header missing a required field names it
        bad = await _call(client, addr, RequestCode.REGISTER_BROKER, brokerName="b")
        assert bad.code == ResponseCode.SYSTEM_ERROR
        assert "brokerAddr" in (bad.remark or "")


async def test_silent_broker_expires_on_a_short_timeout(tmp_path: Path) -> None:
    overrides = {"broker_channel_expired_time_ms": 300, "scan_not_active_broker_interval_ms": 100}
    async with (
        running_namesrv(tmp_path, **overrides) as (_, addr),
        RemotingClient() as broker_side,
        RemotingClient() as client,
    ):
        await register_broker(broker_side, addr, broker_addr=BROKER, topics=["T1"])
        assert await get_route(client, addr, "T1") is not None
        for _ in range(50):
            await asyncio.sleep(0.1)
            if await get_route(client, addr, "T1") is None:
                break
        assert await get_route(client, addr, "T1") is None


async def test_closed_broker_connection_removes_it_at_once(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as observer:
        async with RemotingClient() as broker_side:
            await register_broker(broker_side, addr, broker_addr=BROKER, topics=["T1"])
            assert await get_route(observer, addr, "T1") is not None
        for _ in range(50):
            if await get_route(observer, addr, "T1") is None:
                break
            await asyncio.sleep(0.02)
        assert await get_route(observer, addr, "T1") is None


async def test_data_version_query_and_write_perm(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        await register_broker(
            client, addr, broker_addr=BROKER, topics=["T1"], version=DataVersion(5, 2)
        )
        header = h.QueryDataVersionRequestHeader("broker-a", BROKER, "DefaultCluster", 0)
        for version, changed in ((DataVersion(5, 2), False), (DataVersion(6, 3), True)):
            request = RemotingCommand.request(
                RequestCode.QUERY_DATA_VERSION, header.to_ext(), bodies.encode_data_version(version)
            )
            answer = await client.invoke(addr, request)
            assert h.QueryDataVersionResponseHeader.from_ext(answer.ext_fields).changed is changed
            assert bodies.decode_data_version(answer.body_bytes()) == DataVersion(5, 2)
        wiped = await _call(
            client, addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-a"
        )
        assert wiped.ext_fields["wipeTopicCount"] == "1"
        route = await get_route(client, addr, "T1")
        assert route is not None and route.queue_datas[0].perm == PERM_READ
        added = await _call(
            client, addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="broker-a"
        )
        assert added.ext_fields["addTopicCount"] == "1"


async def test_topic_lists_cluster_info_and_delete(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        await register_broker(client, addr, broker_addr=BROKER, topics=["A", "B"])
        await register_broker(
            client, addr, broker_addr="127.0.0.1:30911", topics=["C"], broker_name="x", cluster="X"
        )
        everything = await _call(client, addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert bodies.decode_topic_list(everything.body_bytes()) == ["A", "B", "C"]
        by_cluster = await _call(client, addr, RequestCode.GET_TOPICS_BY_CLUSTER, cluster="X")
        assert bodies.decode_topic_list(by_cluster.body_bytes()) == ["C"]
        info = await _call(client, addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        cluster = bodies.decode_cluster_info(info.body_bytes())
        assert cluster.cluster_addr_table == {"DefaultCluster": ["broker-a"], "X": ["x"]}
        assert cluster.broker_addr_table["x"].broker_addrs == {0: "127.0.0.1:30911"}
        deleted = await _call(client, addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="A")
        assert deleted.code == ResponseCode.SUCCESS
        assert await get_route(client, addr, "A") is None
        system = await _call(client, addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        assert set(bodies.decode_topic_list(system.body_bytes())) == {
            "DefaultCluster",
            "broker-a",
            "X",
            "x",
        }


async def test_kv_config_survives_a_restart(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        put = await _call(
            client, addr, RequestCode.PUT_KV_CONFIG, namespace="ns", key="k", value="v"
        )
        assert put.code == ResponseCode.SUCCESS
        await _call(client, addr, RequestCode.PUT_KV_CONFIG, namespace="ns", key="k2", value="v2")
        await _call(client, addr, RequestCode.DELETE_KV_CONFIG, namespace="ns", key="k2")
    async with running_namesrv(tmp_path) as (_, addr), RemotingClient() as client:
        got = await _call(client, addr, RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
        assert got.code == ResponseCode.SUCCESS and got.ext_fields["value"] == "v"
        gone = await _call(client, addr, RequestCode.GET_KV_CONFIG, namespace="ns", key="k2")
        assert gone.code == ResponseCode.QUERY_NOT_FOUND
        listed = await _call(client, addr, RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ns")
        assert bodies.decode_kv_table(listed.body_bytes()) == {"k": "v"}
        none = await _call(client, addr, RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="zz")
        assert none.code == ResponseCode.QUERY_NOT_FOUND


async def test_order_topic_conf_from_kv_when_enabled(tmp_path: Path) -> None:
    async with (
        running_namesrv(tmp_path, order_message_enable=True) as (_, addr),
        RemotingClient() as client,
    ):
        await register_broker(client, addr, broker_addr=BROKER, topics=["T1"])
        await _call(
            client,
            addr,
            RequestCode.PUT_KV_CONFIG,
            namespace="ORDER_TOPIC_CONFIG",
            key="T1",
            value="broker-a:4",
        )
        route = await get_route(client, addr, "T1")
        assert route is not None and route.order_topic_conf == "broker-a:4"
        # the broker learns the order config in its registration answer
        answer = await register_broker(client, addr, broker_addr=BROKER, topics=["T1"])
        assert bodies.decode_kv_table(answer.body_bytes()) == {"T1": "broker-a:4"}


async def test_garbage_on_one_connection_leaves_others_served(tmp_path: Path) -> None:
    async with running_namesrv(tmp_path) as (server, addr), RemotingClient() as client:
        await register_broker(client, addr, broker_addr=BROKER, topics=["T1"])
        loop = asyncio.get_running_loop()
        with socket.create_connection(("127.0.0.1", server.port)) as bad:
            bad.setblocking(False)
            # a frame whose header length exceeds its total length
            await loop.sock_sendall(bad, struct.pack(">ii", 8, 1000) + b"xxxx")
            closed = await asyncio.wait_for(loop.sock_recv(bad, 16), 5)
            assert closed == b""
        assert await get_route(client, addr, "T1") is not None


async def test_two_name_servers_are_independent(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        running_namesrv(tmp_path / "a") as (_, first),
        running_namesrv(tmp_path / "b") as (_, second),
        RemotingClient() as client,
    ):
        await register_broker(client, first, broker_addr=BROKER, topics=["OnlyFirst"])
        assert await get_route(client, first, "OnlyFirst") is not None
        assert await get_route(client, second, "OnlyFirst") is None
        # a client that lists both name servers still finds the route
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader("OnlyFirst").to_ext()
        )
        answer = await client.invoke_any([first, second], request, 3.0)
        assert answer.code in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)


@pytest.mark.parametrize("enabled", [True, False])
async def test_all_topic_list_can_be_disabled(tmp_path: Path, enabled: bool) -> None:
    async with (
        running_namesrv(tmp_path, enable_all_topic_list=enabled) as (_, addr),
        RemotingClient() as client,
    ):
        answer = await _call(client, addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert (answer.code == ResponseCode.SUCCESS) is enabled
        if not enabled:
            assert answer.remark == "disable"


async def test_connections_beyond_max_connections_are_refused_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="apogee.remoting")
    async with running_namesrv(tmp_path, max_connections=3) as (ns, addr):
        host, port = addr.rsplit(":", 1)
        held = [await asyncio.open_connection(host, int(port)) for _ in range(3)]
        await eventually(lambda: _now(len(ns.server.connections) == 3))
        reader, writer = await asyncio.open_connection(host, int(port))
        async with asyncio.timeout(5):
            assert await reader.read(1) == b""  # closed at once by the server
        writer.close()
        assert ns.server.refused_connections == 1
        assert "maxConnections is 3" in caplog.text
        for _, w in held:
            w.close()
        await eventually(lambda: _now(not ns.server.connections))
        async with RemotingClient() as client:  # places are free again: served
            answer = await _call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="x")
            assert answer.code == ResponseCode.TOPIC_NOT_EXIST


async def test_max_connections_defaults_to_a_cap_below_the_descriptor_limit(
    tmp_path: Path,
) -> None:
    async with running_namesrv(tmp_path) as (ns, _):
        cap = ns.server.config.limits.max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert cap is not None and cap < soft


async def _now(value: bool) -> bool:
    return value
