"""A newcomer's first minutes: ``make run``'s process, the README's quick start, and what
goes wrong when a port or a store is taken or the process is killed.

One ``apogee standalone`` process for the module, started as ``make run`` starts it
(``-c conf/broker.conf``, with addresses and a store of its own).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apogee._util.net import free_port
from apogee.admin.admin_client import AdminClient
from apogee.codes import ResponseCode
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import StandaloneProcess
from tests.integration.broker.wire import send

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneProcess]:
    root = tmp_path_factory.mktemp("first-contact")
    proc = StandaloneProcess(
        root / "store",
        base_conf=ROOT / "conf" / "broker.conf",
        properties={
            "brokerName": "broker-first",
            "flushDiskType": "SYNC_FLUSH",
            "metricsExporterType": "PROM",
            "metricsPromExporterHost": "127.0.0.1",
            "metricsPromExporterPort": str(METRICS_PORT),
        },
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _apogee(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "apogee", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_readme_starts_with_the_two_commands() -> None:
    block = re.search(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert [c for c in commands if c] == ["make run", "make test"]


def test_the_first_lines_name_the_store_flush_mode_and_log_file(
    standalone: StandaloneProcess,
) -> None:
    text = standalone.log_text()
    store = str(standalone.args[standalone.args.index("--store") + 1])
    first = text.splitlines()[:3]
    assert any(store in line and "SYNC_FLUSH" in line and "new store" in line for line in first)
    log_file = standalone.log_dir / "standalone.log"
    assert any(str(log_file) in line for line in first), first
    # The file gets what stderr gets, the line naming the broker too. That line is written
    # just after the port opens (what start waits for): a loaded machine may take a moment.
    deadline = time.monotonic() + 20
    while "serving at" not in log_file.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    serving = [line for line in standalone.log_text().splitlines() if "serving at" in line]
    assert serving and "broker-first" in serving[0]
    assert serving[0] in log_file.read_text()


async def test_the_broker_conf_and_addresses_apply(standalone: StandaloneProcess) -> None:
    async with AdminClient(standalone.address) as admin:
        brokers = await admin.cluster_list()
    assert [(b.broker_name, b.addr) for b in brokers] == [
        ("broker-first", standalone.broker_address)
    ]


def test_the_readme_quick_start_runs(
    standalone: StandaloneProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    source = re.search(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert source is not None and "127.0.0.1:9876" in source.group(1)
    exec(compile(source.group(1).replace("127.0.0.1:9876", standalone.address), "README", "exec"),
         {"__name__": "__main__"})  # fmt: skip
    assert "SEND_OK" in capsys.readouterr().out


def test_a_second_standalone_on_the_same_port_fails_in_one_line(
    standalone: StandaloneProcess, tmp_path: Path
) -> None:
    result = _apogee(
        "standalone", "--store", str(tmp_path / "other"),
        "--namesrv-listen", f"127.0.0.1:{standalone.port}",
        "--listen", f"127.0.0.1:{free_port()}", "--log-dir", str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: cannot listen on 127.0.0.1:{standalone.port}: Address already in use; "
        f"held by pid {standalone.proc.pid if standalone.proc else 0} "
        f"({errors[0].split('(', 1)[1]}"
    ]
    assert "apogee standalone" in errors[0]


def test_a_broker_on_a_store_in_use_fails_in_one_line(
    standalone: StandaloneProcess, tmp_path: Path
) -> None:
    store = standalone.args[standalone.args.index("--store") + 1]
    result = _apogee(
        "broker", "--store", store, "--listen", f"127.0.0.1:{free_port()}",
        "--log-dir", str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"Error: store {store} is in use by another process: held by pid "
            f"{standalone.proc.pid if standalone.proc else 0} (python"
        )
    )
    assert (tmp_path / "broker.log").read_text().count("cannot start: store") == 1


async def test_a_refused_send_is_logged_with_peer_and_reason(
    standalone: StandaloneProcess,
) -> None:
    async with RemotingClient() as client:
        answer = await send(client, standalone.broker_address, "BigBodies", b"x" * (5 << 20))
        assert answer.code == ResponseCode.MESSAGE_ILLEGAL
        assert not (answer.remark or "").startswith("MESSAGE_ILLEGAL")  # said once, by the code
    lines = [line for line in standalone.log_text().splitlines() if "refused" in line]
    assert any(
        "WARNING apogee.broker.refusals: refused SEND_MESSAGE from 127.0.0.1:" in line
        and "MESSAGE_ILLEGAL" in line
        and "4194304" in line
        for line in lines
    ), lines


def test_metrics_of_both_servers_are_scraped_from_the_live_process(
    standalone: StandaloneProcess,
) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as got:
        text = got.read().decode()
    types = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types))  # one family per name, both servers' samples in it
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    nodes = {s.labels.get("node_type") for s in samples if s.name == "rocketmq_rpc_latency_count"}
    assert nodes == {"broker", "nameserver"}
    brokers = [s for s in samples if s.name == "apogee_namesrv_brokers"]
    assert [(b.labels["cluster"], b.value) for b in brokers] == [("DefaultCluster", 1)]
    assert any(s.name == "rocketmq_messages_in_total" and s.labels["topic"] == "orders"
               for s in samples)  # the README's send  # fmt: skip


async def test_a_restart_after_kill_9_logs_its_recovery(standalone: StandaloneProcess) -> None:
    async with RemotingClient() as client:
        for i in range(20):
            answer = await send(client, standalone.broker_address, "Recovered", f"m{i}".encode())
            assert answer.code == ResponseCode.SUCCESS
    standalone.kill()
    standalone.start()
    recovery = [line for line in standalone.log_text().splitlines() if "after a crash" in line]
    assert len(recovery) == 1, standalone.log_text()[-3000:]
    found = re.search(r"(\d+) commit-log file\(s\), (\d+) checked .* (\d+) records checked, "
                      r"(\d+) recovered into consume queues", recovery[0])  # fmt: skip
    assert found is not None, recovery[0]
    files, checked, records, recovered = map(int, found.groups())
    assert files == checked == 1
    assert records >= 20 and recovered >= 20
    assert re.search(r"opened in \d+\.\d\d s", recovery[0])
