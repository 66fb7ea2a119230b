"""``apogee admin`` against an aclEnable cluster: credentials from options or tools.yml,
and mqadmin's ACL commands (updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from apogee.client.broker_api import BrokerApi
from apogee.errors import NoPermissionError
from apogee.protocol.signing import SessionCredentials
from tests.integration.acl_cluster import AclCluster, acl_cluster, client
from tests.integration.admin.helpers import AdminCli

OPERATOR_KEYS = ["--access-key", "operator1", "--secret-key", "operator-secret"]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[AclCluster]:
    async with acl_cluster(tmp_path) as running:
        yield running


async def test_commands_without_an_admin_account_are_refused(
    cluster: AclCluster, admin_cli: AdminCli
) -> None:
    args = ["updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "T1"]
    result = await admin_cli(*args, env={"ROCKETMQ_HOME": None})
    assert result.exit_code == 1
    assert "NO_PERMISSION" in result.output and "[ACL]" in result.output
    producer = ["--access-key", "producer1", "--secret-key", "producer-secret"]
    result = await admin_cli(*args, *producer, env={"ROCKETMQ_HOME": None})
    assert result.exit_code == 1 and "needs an admin account" in result.output
    result = await admin_cli(*args, *OPERATOR_KEYS, env={"ROCKETMQ_HOME": None})
    assert result.exit_code == 0, result.output


async def test_keys_come_from_tools_yml_or_the_environment(
    cluster: AclCluster, admin_cli: AdminCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text("accessKey: operator1\nsecretKey: operator-secret\n")
    result = await admin_cli("clusterList", "-n", cluster.ns, env={"ROCKETMQ_HOME": str(home)})
    assert result.exit_code == 0, result.output
    assert "broker-a" in result.output
    env: dict[str, str | None] = {
        "ROCKETMQ_HOME": None,
        "APOGEE_ACCESS_KEY": "operator1",
        "APOGEE_SECRET_KEY": "operator-secret",
    }
    result = await admin_cli("topicRoute", "-n", cluster.ns, "-t", "orders", env=env)
    assert result.exit_code == 0, result.output
    result = await admin_cli("topicList", "-n", cluster.ns, "--access-key", "x1234567",
                             env={"ROCKETMQ_HOME": None})  # fmt: skip
    assert result.exit_code == 1 and "--access-key and --secret-key go together" in result.output


async def test_acl_commands_manage_accounts(cluster: AclCluster, admin_cli: AdminCli) -> None:
    addr = cluster.broker.address
    base = ["-n", cluster.ns, *OPERATOR_KEYS]
    result = await admin_cli(
        "updateAclConfig", *base, "-c", "DefaultCluster", "-a", "cliuser1", "-s", "cli-secret",
        "-i", "DENY", "-u", "SUB", "-t", "orders=PUB,audit=SUB", "-m", "false",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"create or update plain access config to {addr} success." in result.output
    text = cluster.acl_file.read_text()
    assert "cliuser1" in text and "audit=SUB" in text

    async with client(SessionCredentials("cliuser1", "cli-secret")) as remoting:
        assert await BrokerApi(remoting).get_max_offset(addr, "orders", 0) >= 0

    result = await admin_cli("clusterAclConfigVersion", *base, "-b", addr, "--json")
    assert result.exit_code == 0, result.output
    [version] = orjson.loads(result.stdout)
    assert (version["brokerName"], version["counter"]) == ("broker-a", 1)
    assert list(version["files"]) == [str(cluster.acl_file)]
    result = await admin_cli("clusterAclConfigVersion", *base, "-c", "DefaultCluster")
    assert result.exit_code == 0 and "#AclConfigVersionNum" in result.output

    result = await admin_cli("updateAclConfig", *base, "-b", addr, "-a", "cliuser1", "-t", "x=ALL")
    assert result.exit_code == 1 and "'ALL' is not a permission" in result.output

    result = await admin_cli("deleteAclConfig", *base, "-b", addr, "-a", "cliuser1")
    assert result.exit_code == 0, result.output
    async with client(SessionCredentials("cliuser1", "cli-secret")) as remoting:
        with pytest.raises(NoPermissionError):
            await BrokerApi(remoting).get_max_offset(addr, "orders", 0)

    result = await admin_cli(
        "updateGlobalWhiteAddr", *base, "-b", addr, "-g", "10.10.103.*,192.168.0.*"
    )
    assert result.exit_code == 0, result.output
    assert "10.10.103.*" in cluster.acl_file.read_text()
    result = await admin_cli(
        "updateGlobalWhiteAddr", *base, "-b", addr, "-g", "10.0.0.1", "-p", "/elsewhere.yml"
    )
    assert result.exit_code == 1 and "keeps its accounts in" in result.output
    result = await admin_cli("deleteAclConfig", *base, "-a", "cliuser1")
    assert result.exit_code == 1 and "needs -b broker address or -c cluster name" in result.output
