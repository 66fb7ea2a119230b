"""haStatus and clusterList against a master and its slave in-process."""

from __future__ import annotations

from pathlib import Path

from apogee.client.broker_api import BrokerApi
from apogee.model.message import Message
from apogee.model.results import SendStatus
from apogee.remoting.client import RemotingClient
from apogee.store.config import BrokerRole
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.ha import ha_status, master_overrides, slave_overrides
from tests.integration.admin.helpers import AdminCli, json_of


async def test_ha_status_and_roles_of_a_master_and_its_slave(
    tmp_path: Path, admin_cli: AdminCli
) -> None:
    async with run_namesrv(tmp_path) as ns_server, RemotingClient() as client:
        ns = f"127.0.0.1:{ns_server.port}"
        async with (
            run_broker(tmp_path / "m", ns, **master_overrides(BrokerRole.SYNC_MASTER)) as m,
            run_broker(tmp_path / "s", ns, **slave_overrides()) as s,
        ):

            async def in_sync() -> bool:
                return (await ha_status(client, m.address)).in_sync_slave_nums == 1

            await eventually(in_sync)
            api = BrokerApi(client)
            for i in range(10):
                msg = Message("HaTopic", f"m{i}".encode())
                sent = await api.send(m.address, "broker-a", msg, queue_id=0, producer_group="p")
                assert sent.status is SendStatus.SEND_OK
            assert m.store is not None
            end = m.store.commit_log_max_offset()

            doc = json_of(await admin_cli("haStatus", "-n", ns, "--json"))
            (group,) = doc["brokers"]
            assert group["brokerName"] == "broker-a"
            master, slave = group["nodes"]
            assert (master["brokerId"], master["addr"], master["master"]) == (0, m.address, True)
            assert master["masterCommitLogMaxOffset"] == end
            (link,) = master["haConnectionInfo"]
            assert (link["slaveAckOffset"], link["diff"], link["inSync"]) == (end, 0, True)
            assert (slave["brokerId"], slave["addr"], slave["master"]) == (1, s.address, False)
            assert slave["haClientRuntimeInfo"]["maxOffset"] == end
            assert slave["haClientRuntimeInfo"]["activated"] is True

            table = await admin_cli("haStatus", "-n", ns, "-c", "DefaultCluster")
            assert table.exit_code == 0, table.output
            assert "MASTER" in table.stdout and "SLAVE" in table.stdout
            assert "1 in sync" in table.stdout and "connected" in table.stdout
            one = json_of(await admin_cli("haStatus", "-n", ns, "-b", s.address, "--json"))
            assert [n["addr"] for g in one["brokers"] for n in g["nodes"]] == [s.address]
            unknown = await admin_cli("haStatus", "-n", ns, "-c", "Nope")
            assert unknown.exit_code == 1 and "cluster Nope does not exist" in unknown.stderr

            listed = json_of(await admin_cli("clusterList", "-n", ns, "--json"))
            roles = [(b["brokerId"], b["role"]) for b in listed["brokers"]]
            assert roles == [(0, "SYNC_MASTER"), (1, "SLAVE")]
            plain = await admin_cli("clusterList", "-n", ns)
            assert "SYNC_MASTER" in plain.stdout and "SLAVE" in plain.stdout
