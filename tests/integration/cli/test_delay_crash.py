"""Delayed delivery across a SIGKILL of a real ``apogee broker`` process: at least once, none lost.

Progress is saved every 10 s, so after a crash the messages delivered since the last save
come again (at-least-once); every other message is delivered exactly once after restart.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from apogee.client.broker_api import BrokerApi
from apogee.model.message import Message
from apogee.remoting.client import RemotingClient
from apogee.testing.cluster import BrokerProcess, eventually
from apogee.testing.reading import read_queue

LEVELS = "1s 6s " + " ".join(["1s"] * 16)


async def delivered(api: BrokerApi, addr: str) -> list[str]:
    return [m.body.decode() for m in await read_queue(api, addr, "T1", 0)]


async def test_a_crash_redelivers_at_most_what_was_unsaved_and_loses_nothing(
    tmp_path: Path,
) -> None:
    broker = BrokerProcess(tmp_path / "store", "", properties={"messageDelayLevel": LEVELS})
    broker.start()
    try:
        async with RemotingClient() as client:
            api = BrokerApi(client, timeout_s=5)
            for i in range(5):
                for level, name in ((1, "soon"), (2, "late")):
                    msg = Message("T1", f"{name}-{i}".encode(), properties={"DELAY": str(level)})
                    await api.send(broker.address, "broker-a", msg, queue_id=0, producer_group="p")

            async def soon_done() -> bool:
                return len(await delivered(api, broker.address)) >= 5

            await eventually(soon_done, timeout_s=10)
            before = Counter(await delivered(api, broker.address))
        broker.kill()  # within 10 s of start: no delay progress was saved
        broker.start()
        async with RemotingClient() as client:
            api = BrokerApi(client, timeout_s=5)

            async def all_done() -> list[str] | None:
                got = await delivered(api, broker.address)
                return got if {f"late-{i}" for i in range(5)} <= set(got) else None

            after = Counter(await eventually(all_done, timeout_s=15))
    finally:
        broker.stop()
    assert set(before) == {f"soon-{i}" for i in range(5)}
    assert set(after) == {f"{n}-{i}" for n in ("soon", "late") for i in range(5)}
    assert all(after[f"late-{i}"] == 1 for i in range(5))  # never delivered before the crash
    assert all(1 <= after[f"soon-{i}"] <= 2 for i in range(5))  # at least once
