"""SIGKILL a SYNC_FLUSH broker while the C++ client sends: every acknowledged message survives."""

from __future__ import annotations

from pathlib import Path

import pytest

from apogee.testing.cluster import BrokerProcess, NamesrvProcess
from tests.harness.cpp import run_cpp, start_cpp

pytestmark = [pytest.mark.interop, pytest.mark.slow]


async def test_acknowledged_messages_survive_a_crash_under_sync_flush(tmp_path: Path) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        broker = BrokerProcess(
            tmp_path / "store", ns.address, properties={"flushDiskType": "SYNC_FLUSH"}
        )
        broker.start()
        try:
            producer = await start_cpp(
                {
                    "action": "produce",
                    "namesrv": ns.address,
                    "topic": "Durable",
                    "count": 100_000,
                    "send_timeout_ms": 1000,
                },
                timeout_s=60,
            )
            async with producer:
                assert await producer.wait_for(lambda lines: len(lines) > 300, 30)
                broker.kill()
                assert (tmp_path / "store" / "abort").exists()  # it did not shut down cleanly
                run = await producer.stop(timeout_s=5)
            acked = {str(line["index"]) for line in run.sent if line["status"] == "SEND_OK"}
            assert len(acked) >= 300, run.describe()
            assert run.failures, "sends after the crash must fail"

            broker.start()  # recovery of the commit log and consume queues
            pulled = await run_cpp(
                {
                    "action": "pull_consume",
                    "namesrv": ns.address,
                    "topic": "Durable",
                    "group": "after_crash",
                    "run_s": 3,
                },
                timeout_s=30,
            )
        finally:
            broker.stop()
    consumed = {str(line["body"]).removeprefix("message-") for line in pulled.messages}
    missing = acked - consumed
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
