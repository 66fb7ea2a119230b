from __future__ import annotations

from apogee.model.route import PERM_INHERIT, PERM_READ, PERM_RW, DataVersion
from apogee.model.topic import TopicConfig
from apogee.namesrv.route_table import RegisterResult, RouteTable

T0 = 1_700_000_000_000
V1 = DataVersion(T0, 1)


def _configs(*names: str, queues: int = 4) -> dict[str, TopicConfig]:
    return {n: TopicConfig(n, queues, queues) for n in names}


def _register(
    table: RouteTable,
    *,
    name: str = "broker-a",
    addr: str = "10.0.0.1:10911",
    broker_id: int = 0,
    topics: dict[str, TopicConfig] | None = None,
    version: DataVersion = V1,
    now_ms: int = T0,
    channel: str = "chan-a",
    cluster: str = "DefaultCluster",
) -> RegisterResult:
    return table.register_broker(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace("10911", "10912"),
        now_ms=now_ms,
        data_version=version,
        topic_configs=topics if topics is not None else _configs("T1", "T2"),
        channel=channel,
    )


def test_register_then_route_lookup() -> None:
    table = RouteTable()
    _register(table)
    route = table.route_for("T1")
    assert route is not None
    assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
    assert route.queue_datas[0].write_queue_nums == 4
    assert route.queue_datas[0].perm == PERM_RW
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    assert route.broker_datas[0].cluster == "DefaultCluster"
    assert table.route_for("unknown") is None


def test_slave_registration_adds_address_but_not_queue_data() -> None:
    table = RouteTable()
    _register(table)
    result = _register(
        table,
        addr="10.0.0.2:10911",
        broker_id=1,
        topics=_configs("ONLY_ON_SLAVE"),
        channel="chan-s",
    )
    assert table.route_for("ONLY_ON_SLAVE") is None
    route = table.route_for("T1")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert result == RegisterResult("10.0.0.1:10911", "10.0.0.1:10912")


def test_queue_data_updates_only_when_data_version_changes() -> None:
    table = RouteTable()
    _register(table, topics=_configs("T1", queues=4))
    # same version: a changed queue count is ignored (the broker did not bump its version)
    _register(table, topics=_configs("T1", queues=8))
    route = table.route_for("T1")
    assert route is not None and route.queue_datas[0].write_queue_nums == 4
    _register(table, topics=_configs("T1", queues=8), version=DataVersion(T0 + 1, 2))
    route = table.route_for("T1")
    assert route is not None and route.queue_datas[0].write_queue_nums == 8


def test_a_topic_new_to_this_broker_is_added_even_at_the_same_version() -> None:
    table = RouteTable()
    _register(table, topics=_configs("T1"))
    table.delete_topic("T1")
    assert table.route_for("T1") is None
    _register(table, topics=_configs("T1"))
    assert table.route_for("T1") is not None


def test_promoted_slave_address_replaces_its_old_id() -> None:
    table = RouteTable()
    _register(table, addr="10.0.0.2:10911", broker_id=1, channel="s")
    _register(table, addr="10.0.0.2:10911", broker_id=0, channel="s")
    assert table.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.2:10911"}


def test_expiry_removes_silent_broker_and_its_topics() -> None:
    table = RouteTable()
    _register(table)
    _register(table, name="broker-b", addr="10.0.0.3:10911", channel="b", now_ms=T0 + 60_000)
    assert table.scan_not_active(T0 + 120_000) == []
    assert table.scan_not_active(T0 + 120_001) == ["10.0.0.1:10911"]
    route = table.route_for("T1")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert "broker-a" not in table.cluster_addr_table["DefaultCluster"]
    assert table.scan_not_active(T0 + 180_001) == ["10.0.0.3:10911"]
    assert table.route_for("T1") is None
    assert table.cluster_addr_table == {}


def test_query_data_version_refreshes_liveness() -> None:
    table = RouteTable()
    _register(table)
    assert table.query_data_version("10.0.0.1:10911", DataVersion(T0, 1), T0 + 100_000) is False
    assert table.query_data_version("10.0.0.1:10911", DataVersion(T0, 2), T0 + 100_000) is True
    assert table.scan_not_active(T0 + 200_000) == []


def test_closed_connection_removes_broker_at_once() -> None:
    table = RouteTable()
    _register(table, channel="c1")
    _register(table, name="broker-b", addr="10.0.0.3:10911", channel="c2")
    assert table.on_channel_closed("c1") == ["10.0.0.1:10911"]
    assert "broker-a" not in table.broker_addr_table
    route = table.route_for("T2")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-b"]
    assert table.on_channel_closed("nobody") == []


def test_unregister_master_keeps_slave_and_broker_name() -> None:
    table = RouteTable()
    _register(table)
    _register(table, addr="10.0.0.2:10911", broker_id=1, channel="s")
    table.unregister_broker(
        cluster="DefaultCluster", broker_addr="10.0.0.1:10911", broker_name="broker-a", broker_id=0
    )
    assert table.broker_addr_table["broker-a"].broker_addrs == {1: "10.0.0.2:10911"}
    assert "10.0.0.1:10911" not in table.broker_live_table
    table.unregister_broker(
        cluster="DefaultCluster", broker_addr="10.0.0.2:10911", broker_name="broker-a", broker_id=1
    )
    assert table.route_for("T1") is None
    assert table.all_topics() == []


def test_wipe_and_add_write_perm() -> None:
    table = RouteTable()
    _register(table, topics={"T1": TopicConfig("T1", 4, 4, PERM_RW | PERM_INHERIT)})
    _register(table, name="broker-b", addr="10.0.0.3:10911", channel="b")
    assert table.wipe_write_perm("broker-a") == 1
    route = table.route_for("T1")
    assert route is not None
    perms = {q.broker_name: q.perm for q in route.queue_datas}
    assert perms == {"broker-a": PERM_READ | PERM_INHERIT, "broker-b": PERM_RW}
    assert table.wipe_write_perm("nobody") == 0
    assert table.add_write_perm("broker-a") == 1
    route = table.route_for("T1")
    assert route is not None and route.queue_datas[0].perm == PERM_RW


def test_topic_lists_by_cluster_and_delete_per_cluster() -> None:
    table = RouteTable()
    _register(table, topics=_configs("T1", "SHARED"))
    _register(
        table,
        name="broker-x",
        addr="10.1.0.1:10911",
        cluster="Other",
        channel="x",
        topics=_configs("X1", "SHARED"),
    )
    assert table.all_topics() == ["SHARED", "T1", "X1"]
    assert table.topics_by_cluster("DefaultCluster") == ["SHARED", "T1"]
    assert table.topics_by_cluster("Other") == ["SHARED", "X1"]
    table.delete_topic("SHARED", cluster="Other")
    route = table.route_for("SHARED")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-a"]
    info = table.cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"], "Other": ["broker-x"]}
    topics, master = table.system_topics()
    assert set(topics) == {"DefaultCluster", "broker-a", "Other", "broker-x"}
    assert master in {"10.0.0.1:10911", "10.1.0.1:10911"}


def test_filter_servers_appear_in_route() -> None:
    table = RouteTable()
    table.register_broker(
        cluster="C",
        broker_addr="a:1",
        broker_name="b",
        broker_id=0,
        ha_server_addr="a:2",
        now_ms=T0,
        topic_configs=_configs("T"),
        filter_server_list=["f:1"],
    )
    route = table.route_for("T")
    assert route is not None and route.filter_server_table == {"a:1": ["f:1"]}
