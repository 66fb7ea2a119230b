"""Access control end to end: a name server and a broker with aclEnable, in-process.

Every attack of the unauthenticated kind (delete a topic, change broker config,
disable a group, create a huge topic, wipe write permission, delete routes and
KV entries, register a fake broker) is refused without an admin account, and
the same requests from an admin account work. Apogee's own client signs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from apogee.admin import acl_admin
from apogee.admin.admin_client import AdminClient
from apogee.client import LitePullConsumer, Message, Producer, PushConsumer, SessionCredentials
from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.codes import ResponseCode
from apogee.errors import BrokerResponseError, NoPermissionError
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.results import PullStatus, SendStatus
from apogee.model.topic import TopicConfig
from apogee.protocol.acl_headers import CreateAccessConfigRequestHeader
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.namesrv import get_route, register_broker
from tests.integration.acl_cluster import (
    ACL,
    CONSUMER,
    OPERATOR,
    PRODUCER,
    AclCluster,
    acl_cluster,
    client,
)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[AclCluster]:
    async with acl_cluster(tmp_path) as running:
        yield running


async def test_the_broker_registered_with_signed_admin_requests(cluster: AclCluster) -> None:
    async with client(CONSUMER) as remoting:
        route = await NamesrvApi(remoting, [cluster.ns]).get_route("orders")
    assert [b.broker_name for b in route.broker_datas] == ["broker-a"]


async def test_producer_with_credentials_sends_others_are_refused(cluster: AclCluster) -> None:
    async with Producer("pg", namesrv=cluster.ns, credentials=PRODUCER, retries=0) as producer:
        result = await producer.send(Message("orders", b"hello"))
        assert result.status is SendStatus.SEND_OK
        with pytest.raises(NoPermissionError, match="may not PUB topic 'payments'"):
            await producer.send(Message("payments", b"x"))
    wrong = SessionCredentials("producer1", "not-the-secret")
    for credentials in (None, wrong):
        async with Producer("pg", namesrv=cluster.ns, credentials=credentials, retries=0) as p:
            with pytest.raises(BrokerResponseError) as caught:
                await p.send(Message("orders", b"x"))
            assert caught.value.code == ResponseCode.NO_PERMISSION


async def test_consumers_with_credentials_receive(cluster: AclCluster) -> None:
    async with Producer("pg", namesrv=cluster.ns, credentials=PRODUCER, retries=0) as producer:
        await producer.send(Message("orders", b"for the readers"))
    lite = LitePullConsumer(
        "readers", namesrv=cluster.ns, credentials=CONSUMER, consume_from="first"
    )
    lite.subscribe("orders")
    async with lite:
        got = await eventually(lambda: lite.poll(timeout=0.5), timeout_s=15)
        assert b"for the readers" in [m.body for m in got]
    async with Producer("pg", namesrv=cluster.ns, credentials=PRODUCER, retries=0) as producer:
        await producer.send(Message("orders", b"for the pushers"))  # the lite one committed
    received: list[bytes] = []
    push = PushConsumer(
        "readers", namesrv=cluster.ns, credentials=CONSUMER, consume_from="first",
        listener=lambda msg: received.append(msg.body), instance_name="push",
    )  # fmt: skip
    push.subscribe("orders")
    async with push:
        await eventually(lambda: _async(b"for the pushers" in received), timeout_s=15)


async def _async(value: bool) -> bool:
    return value


async def test_pull_and_offsets_need_sub_on_topic_and_group(cluster: AclCluster) -> None:
    addr = cluster.broker.address
    async with client(CONSUMER) as remoting:
        api = BrokerApi(remoting)
        result = await api.pull(addr, "readers", "orders", 0, 0)
        assert result.status in (PullStatus.NO_NEW_MSG, PullStatus.FOUND, PullStatus.OFFSET_ILLEGAL)
        await api.update_consumer_offset(addr, "readers", "orders", 0, 0)
        with pytest.raises(NoPermissionError, match="may not SUB group 'others'"):
            await api.pull(addr, "others", "orders", 0, 0)
    async with client(PRODUCER) as remoting:
        with pytest.raises(NoPermissionError, match="may not SUB topic 'orders'"):
            await BrokerApi(remoting).pull(addr, "readers", "orders", 0, 0)


async def test_admin_requests_are_refused_without_an_admin_account(cluster: AclCluster) -> None:
    addr = cluster.broker.address
    for credentials in (None, PRODUCER, CONSUMER):
        async with client(credentials) as remoting:
            broker, namesrv = BrokerApi(remoting), NamesrvApi(remoting, [cluster.ns])
            attacks = [
                broker.delete_topic(addr, "orders"),
                broker.update_broker_config(addr, {"brokerPermission": "0"}),
                broker.update_subscription_group(
                    addr, SubscriptionGroupConfig("readers", consume_enable=False)
                ),
                broker.create_topic(addr, TopicConfig("huge", 65536, 65536)),
                namesrv.wipe_write_perm("broker-a"),
                namesrv.delete_topic("orders"),
                namesrv.put_kv("ns", "k", "v"),
                namesrv.delete_kv("ns", "k"),
            ]
            for attack in attacks:
                with pytest.raises(BrokerResponseError) as caught:
                    await attack
                assert caught.value.code == ResponseCode.NO_PERMISSION, attack
            fake = await register_broker(
                remoting, cluster.ns, broker_addr="10.6.6.6:10911", topics=["orders"]
            )
            assert fake.code == ResponseCode.NO_PERMISSION
    async with client(OPERATOR) as remoting:
        route = await get_route(remoting, cluster.ns, "orders")
        assert route is not None
        assert [b.broker_addrs for b in route.broker_datas] == [{0: addr}]
        assert route.queue_datas[0].perm == 6  # still writeable
        config = await BrokerApi(remoting).get_broker_config(addr)
        assert config["brokerPermission"] == "6"
        assert "secretKey" not in config


async def test_admin_accounts_may_administer(cluster: AclCluster) -> None:
    addr = cluster.broker.address
    async with AdminClient(cluster.ns, credentials=OPERATOR) as admin:
        await admin.broker.create_topic(addr, TopicConfig("scratch", 1, 1))
        await admin.namesrv.put_kv("ns", "k", "v")
        assert await admin.namesrv.get_kv("ns", "k") == "v"
        await admin.broker.delete_topic(addr, "scratch")


async def test_acl_admin_requests_edit_the_file_and_apply_at_once(cluster: AclCluster) -> None:
    addr = cluster.broker.address
    newcomer = SessionCredentials("newcomer1", "newcomer-secret")
    async with AdminClient(cluster.ns, credentials=OPERATOR) as admin:
        header = CreateAccessConfigRequestHeader(
            "newcomer1", "newcomer-secret", default_topic_perm="PUB", default_group_perm="SUB"
        )
        assert await acl_admin.update_account(admin, header, broker_addr=addr) == [addr]
        assert "newcomer1" in cluster.acl_file.read_text()
        async with client(newcomer) as remoting:
            await BrokerApi(remoting).send(addr, "broker-a", Message("orders", b"n"), queue_id=0,
                                           producer_group="pg")  # fmt: skip
        [version] = await acl_admin.acl_versions(admin, broker_addr=addr)
        assert (version.broker_name, version.broker_addr, version.version.counter) == (
            "broker-a",
            addr,
            1,
        )
        assert list(version.files) == [str(cluster.acl_file)]

        bad = CreateAccessConfigRequestHeader("newcomer1", topic_perms="orders=ALL")
        with pytest.raises(BrokerResponseError, match="'ALL' is not a permission") as caught:
            await acl_admin.update_account(admin, bad, broker_addr=addr)
        assert caught.value.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED

        assert await acl_admin.delete_account(admin, "newcomer1", broker_addr=addr) == [addr]
        with pytest.raises(BrokerResponseError) as caught:
            await acl_admin.delete_account(admin, "newcomer1", broker_addr=addr)
        assert caught.value.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
        async with client(newcomer) as remoting:
            with pytest.raises(NoPermissionError, match="no account"):
                await BrokerApi(remoting).get_max_offset(addr, "orders", 0)

        await acl_admin.update_global_white(admin, ["127.0.0.1"], broker_addr=addr)
        async with client(None) as remoting:  # unsigned, but from a white address now
            assert await BrokerApi(remoting).get_max_offset(addr, "orders", 0) >= 0
        with pytest.raises(BrokerResponseError) as caught:
            await acl_admin.update_global_white(admin, ["10.0.0.300"], broker_addr=addr)
        assert caught.value.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED


async def test_acl_admin_requests_need_an_admin_account(cluster: AclCluster) -> None:
    addr = cluster.broker.address
    async with AdminClient(cluster.ns, credentials=PRODUCER) as admin:
        header = CreateAccessConfigRequestHeader("producer1", "producer-secret", admin=True)
        with pytest.raises(NoPermissionError, match="needs an admin account"):
            await acl_admin.update_account(admin, header, broker_addr=addr)
    assert "admin: true" not in cluster.acl_file.read_text().split("producer1")[1][:200]


async def test_the_file_is_reloaded_when_it_changes(cluster: AclCluster) -> None:
    addr = cluster.broker.address
    later = SessionCredentials("lateuser1", "late-secret")
    cluster.acl_file.write_text(
        ACL + "  - {accessKey: lateuser1, secretKey: late-secret, defaultTopicPerm: SUB}\n"
    )

    async def accepted() -> bool:
        async with client(later) as remoting:
            try:
                await BrokerApi(remoting).get_max_offset(addr, "orders", 0)
                await NamesrvApi(remoting, [cluster.ns]).get_route("orders")
            except NoPermissionError:
                return False
            return True

    await eventually(accepted, timeout_s=10, interval_s=0.2)  # broker and name server both


async def test_a_broker_without_admin_credentials_cannot_register(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    acl: dict[str, Any] = {"acl_enable": True, "plain_acl_file": str(acl_file)}
    async with run_namesrv(tmp_path / "ns", **acl) as ns:
        namesrv = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "store", namesrv, access_key="producer1",
                              secret_key="producer-secret"):  # fmt: skip
            async with client(OPERATOR) as remoting:
                info = await NamesrvApi(remoting, [namesrv]).get_cluster_info()
            assert info.broker_addr_table == {}
