"""Access control and TLS on real ``apogee`` processes, configured the way an operator does it.

A name server enforcing TLS and a broker in permissive mode, both with aclEnable: the
broker registers over TLS with its signed admin account; Apogee's Producer and the admin
CLI reach them with ``tls`` and credentials; plain clients still reach the permissive
broker; what lacks TLS or credentials is refused. A missing ACL file stops a process at
start with the path named.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apogee._util.net import free_port
from apogee.client import Message, Producer
from apogee.client.broker_api import BrokerApi
from apogee.errors import NoPermissionError, RemotingError
from apogee.model.results import SendStatus
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.remoting.tls import client_ssl_context
from apogee.testing.certs import make_certificate
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, wait_registered
from tests.integration.acl_cluster import ACL, OPERATOR, PRODUCER

OPERATOR_KEYS = ["--access-key", "operator1", "--secret-key", "operator-secret"]


@dataclass
class Secured:
    namesrv: str
    broker: str
    ca: Path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    certs = make_certificate(root / "certs")
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACL)
    common = {
        "aclEnable": "true",
        "rocketmq.acl.plain.file": str(acl_file),
        "tls.server.certPath": str(certs.cert),
        "tls.server.keyPath": str(certs.key),
    }
    namesrv_props = {**common, "tls.server.mode": "enforcing"}
    broker_props = {
        **common,
        "tls.server.mode": "permissive",
        "tls.enable": "true",  # the broker's own connections to the name server
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(certs.cert),
        "accessKey": "brokerid1",
        "secretKey": "broker-secret",
    }
    with NamesrvProcess(root / "ns", properties=namesrv_props) as ns:
        broker = BrokerProcess(root / "store", ns.address, properties=broker_props)
        broker.start()
        try:
            tls = client_ssl_context(certs.cert)
            wait_registered(
                ns.address, broker.address, ClientConfig(ssl_context=tls, credentials=OPERATOR)
            )
            yield Secured(ns.address, broker.address, certs.cert)
        finally:
            assert broker.stop() == 0, broker.log_text()


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKETMQ_HOME", "APOGEE_ACCESS_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "apogee", "admin", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


async def test_producer_sends_over_tls_with_credentials(secured: Secured) -> None:
    async with Producer(
        "pg", namesrv=secured.namesrv, credentials=PRODUCER, tls=secured.ca, retries=0
    ) as producer:
        result = await producer.send(Message("orders", b"over tls"))
    assert result.status is SendStatus.SEND_OK


async def test_the_permissive_broker_serves_plain_and_tls_clients(secured: Secured) -> None:
    for tls in (None, client_ssl_context(True)):
        config = ClientConfig(credentials=OPERATOR, ssl_context=tls)
        async with RemotingClient(config) as remoting:
            assert await BrokerApi(remoting).get_max_offset(secured.broker, "orders", 0) >= 0
    async with RemotingClient(ClientConfig(ssl_context=client_ssl_context(True))) as remoting:
        with pytest.raises(NoPermissionError):  # TLS is no substitute for credentials
            await BrokerApi(remoting).get_max_offset(secured.broker, "orders", 0)


async def test_the_enforcing_name_server_refuses_plain_clients(secured: Secured) -> None:
    async with RemotingClient(ClientConfig(credentials=OPERATOR)) as remoting:
        with pytest.raises(RemotingError):
            await BrokerApi(remoting).get_max_offset(secured.namesrv, "orders", 0)


async def test_admin_cli_over_tls_with_credentials(secured: Secured) -> None:
    ns = secured.namesrv
    done = await asyncio.to_thread(
        admin, "clusterList", "-n", ns, "--tls-trust-cert", str(secured.ca), *OPERATOR_KEYS
    )
    assert done.returncode == 0, done.stderr
    assert secured.broker in done.stdout  # the broker registered over TLS, signed
    create = ["updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "TlsTopic"]
    refused = await asyncio.to_thread(admin, *create, "--tls")
    assert refused.returncode == 1 and "NO_PERMISSION" in refused.stderr, refused.stderr
    plain = await asyncio.to_thread(admin, *create, *OPERATOR_KEYS)
    assert plain.returncode == 1, plain.stdout
    created = await asyncio.to_thread(admin, *create, "--tls", *OPERATOR_KEYS)
    assert created.returncode == 0, created.stderr


@pytest.mark.parametrize("command", ["namesrv", "broker"])
def test_a_missing_acl_file_stops_the_process_at_start(tmp_path: Path, command: str) -> None:
    conf = tmp_path / f"{command}.conf"
    missing = tmp_path / "nowhere" / "plain_acl.yml"
    conf.write_text(f"aclEnable=true\nrocketmq.acl.plain.file={missing}\n")
    args = [command, "-c", str(conf), "--listen", f"127.0.0.1:{free_port()}"]
    if command == "broker":
        args += ["--store", str(tmp_path / "store"), "--namesrv", "127.0.0.1:1"]
    done = subprocess.run(
        [sys.executable, "-m", "apogee", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"the ACL file {missing} does not exist" in done.stderr
