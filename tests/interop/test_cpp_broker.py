"""The official C++ client against real ``apogee namesrv`` and ``apogee broker`` processes.

Every send mode is stored and read back by the pull consumer with its tags, keys and user
properties; push consumers filter by tag expression, split queues in clustering mode and each
see everything in broadcasting mode; a restarted broker resumes a group from its committed
offsets. Messages are told apart by body text ("message-<i>"), so every check compares sets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apogee.testing.cluster import BrokerProcess, NamesrvProcess, broker_processes
from tests.harness.cpp import CppProcess, CppRun, run_cpp, start_cpp
from tests.interop.helpers import produce

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BrokerProcess]]:
    """One name server and one broker for the module; each test uses its own topics."""
    with broker_processes(tmp_path_factory.mktemp("cpp-cluster")) as found:
        yield found


async def pull_all(namesrv: str, topic: str, until: int, **spec: Any) -> CppRun:
    run = await run_cpp(
        {
            "action": "pull_consume",
            "namesrv": namesrv,
            "topic": topic,
            "group": f"puller_{topic}",
            "until": until,
            "run_s": 15,
            **spec,
        },
        timeout_s=30,
    )
    assert run.returncode == 0, run.describe()
    return run


def bodies(lines: list[dict[str, object]]) -> set[str]:
    return {str(line["body"]) for line in lines}


def expected(count: int, start: int = 0) -> set[str]:
    return {f"message-{i}" for i in range(start, start + count)}


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "orderly", "batch"])
async def test_every_send_mode_is_stored_with_tags_keys_and_properties(
    cluster: tuple[str, BrokerProcess], mode: str
) -> None:
    namesrv, _ = cluster
    topic = f"Modes_{mode}"
    spec: dict[str, Any] = {
        "mode": mode,
        "tags": "TagM",
        "keys": "key{i} shared",
        "properties": {"ua": "v{i}"},
    }
    if mode == "batch":
        spec["batch_size"] = 4
    if mode == "oneway":
        spec["linger_s"] = 0.3  # oneway writes are not waited for
    sent = await produce(namesrv, topic, 8, **spec)
    if mode not in ("oneway", "batch"):
        assert {line["status"] for line in sent.sent} == {"SEND_OK"}, sent.describe()

    run = await pull_all(namesrv, topic, 8, property_names=["ua"])

    assert bodies(run.messages) == expected(8), run.describe()
    for line in run.messages:
        index = str(line["body"]).removeprefix("message-")
        assert (line["topic"], line["tags"], line["keys"]) == (topic, "TagM", f"key{index} shared")
        props = line["properties"]
        assert isinstance(props, dict)
        assert props["ua"] == f"v{index}"
        assert props["CLUSTER"] == "DefaultCluster"
        if mode == "orderly":  # the driver's selector picks index % 4
            assert line["queue_id"] == int(index) % 4


async def test_a_compressed_batch_arrives_whole(cluster: tuple[str, BrokerProcess]) -> None:
    namesrv, _ = cluster
    await produce(namesrv, "BigBatch", 4, mode="batch", batch_size=2, body_size=3000)
    run = await pull_all(namesrv, "BigBatch", 4)
    assert sorted(line["body_len"] for line in run.messages) == [3000] * 4  # type: ignore[type-var]


async def test_a_tag_expression_selects_messages(cluster: tuple[str, BrokerProcess]) -> None:
    namesrv, _ = cluster
    for tag in ("TagA", "TagB", "TagC"):
        await produce(namesrv, "Tagged", 3, tags=tag)

    run = await run_cpp(
        {
            "action": "push_consume",
            "namesrv": namesrv,
            "topic": "Tagged",
            "group": "cg_tags",
            "expression": "TagA || TagB",
            "until": 6,
            "run_s": 20,
        },
        timeout_s=30,
    )

    assert run.returncode == 0, run.describe()
    assert sorted(str(line["tags"]) for line in run.messages) == ["TagA"] * 3 + ["TagB"] * 3


async def consumers(namesrv: str, topic: str, group: str, model: str, n: int) -> list[CppProcess]:
    spec = {
        "action": "push_consume",
        "namesrv": namesrv,
        "topic": topic,
        "group": group,
        "model": model,
        "run_s": 40,
    }
    procs = [await start_cpp(spec, timeout_s=50) for _ in range(n)]
    for proc in procs:
        assert await proc.wait_event("started", 10), (await proc.stop()).describe()
    return procs


async def wait_for_bodies(procs: list[CppProcess], want: set[str], timeout_s: float) -> None:
    async def union() -> bool:
        return want <= set().union(*(bodies(p.events("message")) for p in procs))

    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await union() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)


async def test_clustering_consumers_split_the_queues_and_lose_nothing(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    await produce(namesrv, "Shared", 8)  # the topic exists before the consumers look it up
    procs = await consumers(namesrv, "Shared", "cg_cluster", "clustering", 2)
    try:
        await asyncio.sleep(1.0)  # both join; the broker tells the first one to rebalance
        await produce(namesrv, "Shared", 32, body="message-{i}-late")
        want = expected(8) | {f"message-{i}-late" for i in range(32)}
        await wait_for_bodies(procs, want, 20)
    finally:
        runs = [await p.stop() for p in procs]
    got = [bodies(r.messages) for r in runs]
    assert want <= got[0] | got[1], runs[0].describe() + runs[1].describe()
    late = [{b for b in g if b.endswith("-late")} for g in got]
    assert late[0] and late[1], "both consumers should have had queues"
    queues = [{line["queue_id"] for line in r.messages if str(line["body"]).endswith("-late")}
              for r in runs]  # fmt: skip
    assert not queues[0] & queues[1], "a queue was consumed by both after the rebalance"


async def test_broadcasting_consumers_each_see_everything(
    cluster: tuple[str, BrokerProcess],
) -> None:
    namesrv, _ = cluster
    await produce(namesrv, "Everyone", 1, body="warm-up")
    procs = await consumers(namesrv, "Everyone", "cg_broadcast", "broadcasting", 2)
    try:
        # A new broadcasting consumer starts at the queue's end: wait until both read
        # something produced after they started, then count from there.
        for attempt in range(50):
            await produce(namesrv, "Everyone", 1, body=f"ping-{attempt}")
            await asyncio.sleep(0.2)
            if all(any(b.startswith("ping") for b in bodies(p.events("message"))) for p in procs):
                break
        await produce(namesrv, "Everyone", 12)
        await asyncio.gather(*(wait_for_bodies([p], expected(12), 20) for p in procs))
    finally:
        runs = [await p.stop() for p in procs]
    for run in runs:
        assert expected(12) <= bodies(run.messages), run.describe()


async def test_a_restarted_broker_resumes_groups_from_committed_offsets(tmp_path: Path) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        broker = BrokerProcess(tmp_path / "store", ns.address)
        broker.start()
        try:
            await produce(ns.address, "Resume", 10)
            spec = {
                "action": "push_consume",
                "namesrv": ns.address,
                "topic": "Resume",
                "group": "cg_resume",
                "until": 10,
                "run_s": 20,
            }
            first = await run_cpp(spec, timeout_s=30)  # commits its offsets at shutdown
            assert bodies(first.messages) == expected(10), first.describe()

            assert broker.stop() == 0, broker.log_text()
            broker.start()

            await produce(ns.address, "Resume", 5, body="message-{i}-after")
            second = await run_cpp({**spec, "until": 5}, timeout_s=30)
        finally:
            broker.stop()
    assert bodies(second.messages) == {f"message-{i}-after" for i in range(5)}, second.describe()
