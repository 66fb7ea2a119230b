"""The official C++ client's session credentials against aclEnable brokers and name servers.

The C++ client signs with its own field set (AccessKey, OnsChannel and the header's
declared fields); the broker verifies what arrives. Right secret: sends and push
consumption work. Wrong secret or none: refused -- by the name server when it checks too
(no route), by the broker when only the broker checks (NO_PERMISSION on the send, nothing
delivered to a consumer).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apogee.protocol.signing import SessionCredentials
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, wait_registered
from tests.harness.cpp import CppRun, run_cpp

pytestmark = pytest.mark.interop

ACL = """
accounts:
  - accessKey: brokerid1
    secretKey: broker-secret
    admin: true
  - accessKey: cppuser1
    secretKey: cpp-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [ "AclOrders=PUB|SUB", "AclDenied=SUB" ]
"""

RIGHT = {"access_key": "cppuser1", "secret_key": "cpp-secret", "ons_channel": "ALIYUN"}
WRONG = {"access_key": "cppuser1", "secret_key": "not-the-secret", "ons_channel": "ALIYUN"}
NONE: dict[str, str] = {}


def acl_cluster(root: Path, *, namesrv_acl: bool) -> Iterator[str]:
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACL)
    acl = {"aclEnable": "true", "rocketmq.acl.plain.file": str(acl_file)}
    with NamesrvProcess(root / "ns", properties=acl if namesrv_acl else None) as ns:
        broker_props = {**acl, "accessKey": "brokerid1", "secretKey": "broker-secret"}
        broker = BrokerProcess(root / "store", ns.address, properties=broker_props)
        broker.start()
        try:
            signed = ClientConfig(credentials=SessionCredentials("cppuser1", "cpp-secret"))
            wait_registered(ns.address, broker.address, signed)
            yield ns.address
        finally:
            assert broker.stop() == 0, broker.log_text()


@pytest.fixture(scope="module")
def full_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Name server and broker both check."""
    yield from acl_cluster(tmp_path_factory.mktemp("cpp-acl-full"), namesrv_acl=True)


@pytest.fixture(scope="module")
def broker_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Only the broker checks: refusals come from the broker itself."""
    yield from acl_cluster(tmp_path_factory.mktemp("cpp-acl-broker"), namesrv_acl=False)


async def produce(namesrv: str, topic: str, count: int, credentials: dict[str, str]) -> CppRun:
    spec: dict[str, Any] = {"action": "produce", "namesrv": namesrv, "topic": topic}
    spec |= {"count": count, "send_timeout_ms": 3000, **credentials}
    return await run_cpp(spec, timeout_s=40)


async def consume(namesrv: str, group: str, until: int, credentials: dict[str, str]) -> CppRun:
    spec: dict[str, Any] = {"action": "push_consume", "namesrv": namesrv, "topic": "AclOrders"}
    spec |= {"group": group, "until": until, "run_s": 8 if until > 1000 else 20, **credentials}
    return await run_cpp(spec, timeout_s=40)


async def test_right_secret_sends_and_consumes(full_acl: str) -> None:
    sent = await produce(full_acl, "AclOrders", 4, RIGHT)
    assert sent.returncode == 0, sent.describe()
    assert {line["status"] for line in sent.sent} == {"SEND_OK"}

    run = await consume(full_acl, "cg_acl_right", 4, RIGHT)
    assert run.returncode == 0, run.describe()
    assert {str(m["body"]) for m in run.messages} >= {f"message-{i}" for i in range(4)}


@pytest.mark.parametrize("credentials", [WRONG, NONE], ids=["wrong-secret", "no-credentials"])
async def test_name_server_refuses_wrong_or_missing_credentials(
    full_acl: str, credentials: dict[str, str]
) -> None:
    run = await produce(full_acl, "AclOrders", 1, credentials)
    assert run.returncode == 1 and not run.sent, run.describe()
    assert "No route info" in str(run.failures[0]["error"]), run.describe()


@pytest.mark.parametrize("credentials", [WRONG, NONE], ids=["wrong-secret", "no-credentials"])
async def test_broker_refuses_sends_with_wrong_or_missing_credentials(
    broker_acl: str, credentials: dict[str, str]
) -> None:
    run = await produce(broker_acl, "AclOrders", 1, credentials)
    assert run.returncode == 1 and not run.sent, run.describe()
    # the client gives up with "No route info" after its retries; its log has each answer
    reason = "check signature failed" if credentials else "is not signed"
    assert "remark:[ACL] " in run.log_text() and reason in run.log_text(), run.describe()
    assert "error code:16" in run.log_text(), run.describe()


async def test_broker_refuses_a_topic_the_account_may_not_publish(broker_acl: str) -> None:
    run = await produce(broker_acl, "AclDenied", 1, RIGHT)
    assert run.returncode == 1 and not run.sent, run.describe()
    assert "may not PUB topic 'AclDenied'" in run.log_text(), run.describe()


async def test_consumers_without_the_right_secret_get_nothing(broker_acl: str) -> None:
    sent = await produce(broker_acl, "AclOrders", 3, RIGHT)
    assert sent.returncode == 0, sent.describe()
    for name, credentials in (("wrong", WRONG), ("none", NONE)):
        run = await consume(broker_acl, f"cg_acl_{name}", 10_000, credentials)
        assert run.messages == [], run.describe()
    run = await consume(broker_acl, "cg_acl_ok", 3, RIGHT)
    assert len(run.messages) >= 3, run.describe()
