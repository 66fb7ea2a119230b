"""``apogee broker`` as an operator runs it: serve, register, stop cleanly on SIGTERM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from apogee.codes import ResponseCode
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.namesrv import get_route
from tests.integration.broker.wire import send


async def test_broker_process_serves_registers_and_stops_cleanly(tmp_path: Path) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        broker = BrokerProcess(tmp_path / "store", ns.address)
        broker.start()
        try:
            async with RemotingClient() as client:
                answer = await send(client, broker.address, "ProcTopic", b"hi")
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                route = await eventually(lambda: get_route(client, ns.address, "ProcTopic"))
                assert route.broker_datas[0].broker_addrs[0] == broker.address
            assert (tmp_path / "store" / "abort").exists()
        finally:
            code = broker.stop()
        assert code == 0, broker.log_text()
        assert not (tmp_path / "store" / "abort").exists()
        assert "unregistered" in ns.log_text() or "broker-a" in ns.log_text()
        topics = (tmp_path / "store" / "config" / "topics.json").read_text()
        assert "ProcTopic" in topics


def test_an_unknown_broker_conf_key_is_named(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\nlistenPrt=1\n")
    result = subprocess.run(
        [sys.executable, "-m", "apogee", "broker", "-c", str(conf), "--store", str(tmp_path)],
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 2
    assert b"listenPrt" in result.stderr
