"""An in-process name server and broker with aclEnable, and the accounts their file holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.model.topic import TopicConfig
from apogee.namesrv.server import NameServer
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.namesrv import get_route

ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
  - accessKey: brokerid1
    secretKey: broker-secret
    admin: true
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [ "orders=PUB", "TBW102=PUB" ]
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [ "readers=SUB" ]
"""

OPERATOR = SessionCredentials("operator1", "operator-secret")
PRODUCER = SessionCredentials("producer1", "producer-secret")
CONSUMER = SessionCredentials("consumer1", "consumer-secret")


@dataclass
class AclCluster:
    namesrv: NameServer
    broker: Broker
    acl_file: Path

    @property
    def ns(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"


@asynccontextmanager
async def acl_cluster(tmp_path: Path) -> AsyncIterator[AclCluster]:
    """Both check ``plain_acl.yml`` (ACL above); the broker signs as brokerid1; topic "orders"."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    acl: dict[str, Any] = {"acl_enable": True, "plain_acl_file": str(acl_file)}
    async with (
        run_namesrv(tmp_path / "ns", **acl) as ns,
        run_broker(
            tmp_path / "store",
            f"127.0.0.1:{ns.port}",
            access_key="brokerid1",
            secret_key="broker-secret",
            **acl,
        ) as broker,
    ):
        cluster = AclCluster(ns, broker, acl_file)
        async with client(OPERATOR) as remoting:
            await BrokerApi(remoting).create_topic(broker.address, TopicConfig("orders", 2, 2))
            await eventually(lambda: get_route(remoting, cluster.ns, "orders"))
        yield cluster


def client(credentials: SessionCredentials | None) -> RemotingClient:
    return RemotingClient(ClientConfig(credentials=credentials))
