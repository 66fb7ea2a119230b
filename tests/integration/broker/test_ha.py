"""Master and slave brokers in-process, with a real name server: replication and its rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apogee.broker.broker import Broker
from apogee.client.broker_api import BrokerApi
from apogee.client.namesrv_api import NamesrvApi
from apogee.client.pull_route import PullTargets
from apogee.codes import ResponseCode
from apogee.errors import BrokerResponseError
from apogee.model.client import MessageQueue
from apogee.model.message import Message
from apogee.model.results import PullStatus, SendStatus
from apogee.remoting.client import RemotingClient
from apogee.store.config import BrokerRole, FlushDiskType
from apogee.store.file_store import FileMessageStore
from apogee.testing.cluster import eventually, run_broker, run_namesrv
from apogee.testing.ha import commit_log_bytes, ha_status, master_overrides, slave_overrides

FILE = 8 << 20  # the test brokers' commit-log file size


@dataclass
class Pair:
    namesrv: str
    master: Broker
    slave: Broker
    api: BrokerApi
    client: RemotingClient

    async def send(self, topic: str, body: bytes, queue_id: int = 0, **kw: Any) -> SendStatus:
        msg = Message(topic, body, properties={"TAGS": "t", **kw})
        result = await self.api.send(
            self.master.address, "broker-a", msg, queue_id=queue_id, producer_group="pg"
        )
        return result.status

    async def caught_up(self) -> bool:
        assert self.master.store is not None and self.slave.store is not None
        end = self.master.store.commit_log_max_offset()
        return self.slave.store.commit_log_max_offset() == end


@asynccontextmanager
async def pair(
    root: Path, master: dict[str, Any] | None = None, slave: dict[str, Any] | None = None
) -> AsyncIterator[Pair]:
    async with run_namesrv(root) as ns, RemotingClient() as client:
        addr = f"127.0.0.1:{ns.port}"
        async with (
            run_broker(root / "m", addr, **(master or master_overrides())) as m,
            run_broker(root / "s", addr, **(slave or slave_overrides())) as s,
        ):
            yield Pair(addr, m, s, BrokerApi(client), client)


def same_bytes(p: Pair) -> None:
    assert p.master.store is not None and p.slave.store is not None
    low = p.slave.store.commit_log_min_offset()
    high = p.slave.store.commit_log_max_offset()
    mine = commit_log_bytes(p.slave.config.store.store_path_root_dir, low, high, FILE)
    theirs = commit_log_bytes(p.master.config.store.store_path_root_dir, low, high, FILE)
    assert mine == theirs


async def test_a_slave_learns_its_master_and_copies_its_log(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        for i in range(50):
            assert (
                await p.send("Replicated", f"m{i}".encode(), queue_id=i % 2) is SendStatus.SEND_OK
            )
        await eventually(p.caught_up)
        same_bytes(p)
        assert p.slave.registrar.ha_server_addr == f"127.0.0.1:{p.master.replication.server.port}"  # type: ignore[union-attr]

        async def pulled() -> int:
            result = await p.api.pull(p.slave.address, "cg", "Replicated", 1, 0)
            return len(result.messages)

        # the slave builds its own consume queues (and learns the topic from its master)
        assert await eventually(pulled) == 25
        status = await ha_status(p.client, p.master.address)
        assert status.master and status.in_sync_slave_nums == 1
        (link,) = status.ha_connection_info
        assert link.slave_ack_offset == status.master_commit_log_max_offset
        assert link.diff == 0 and link.lag_ms == 0
        slave = await ha_status(p.client, p.slave.address)
        assert not slave.master and slave.ha_client_runtime_info.activated
        assert slave.ha_client_runtime_info.max_offset == status.master_commit_log_max_offset


async def test_a_slave_refuses_sends_with_service_not_available(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        msg = Message("Refused", b"x")
        try:
            await p.api.send(p.slave.address, "broker-a", msg, queue_id=0, producer_group="pg")
        except BrokerResponseError as exc:
            assert exc.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "slave" in str(exc)
        else:
            raise AssertionError("a slave took a send")
        assert "Refused" not in p.slave.topics


async def test_sync_master_answers_once_the_slave_has_the_bytes(tmp_path: Path) -> None:
    master = master_overrides(BrokerRole.SYNC_MASTER)
    async with pair(tmp_path, master=master) as p:
        await eventually(lambda: _connected(p))
        sends = [p.send("Sync", f"m{i}".encode(), queue_id=i % 4) for i in range(200)]
        statuses = await asyncio.gather(*sends)
        assert set(statuses) == {SendStatus.SEND_OK}
        assert p.slave.store is not None and p.master.store is not None
        # acknowledged means on the slave: no waiting needed here
        assert p.slave.store.commit_log_max_offset() == p.master.store.commit_log_max_offset()
        transfer = p.master.replication.transfer  # type: ignore[union-attr]
        assert transfer.waiting() == 0
        assert transfer.generations < len(statuses)  # concurrent sends answered together
        same_bytes(p)


async def _connected(p: Pair) -> bool:
    status = await ha_status(p.client, p.master.address)
    return status.in_sync_slave_nums == 1


async def test_sync_master_without_a_slave_answers_slave_not_available(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        addr = f"127.0.0.1:{ns.port}"
        master = master_overrides(BrokerRole.SYNC_MASTER)
        async with run_broker(tmp_path / "m", addr, **master) as m:
            api = BrokerApi(client)
            result = await api.send(
                m.address, "broker-a", Message("Alone", b"x"), queue_id=0, producer_group="pg"
            )
            assert result.status is SendStatus.SLAVE_NOT_AVAILABLE
            # stored on the master all the same
            found = await api.pull(m.address, "cg", "Alone", 0, 0)
            assert [msg.body for msg in found.messages] == [b"x"]
            plain = Message("Alone", b"y", properties={"WAIT": "false"})
            result = await api.send(m.address, "broker-a", plain, queue_id=0, producer_group="pg")
            assert result.status is SendStatus.SEND_OK  # WAIT=false does not wait for anyone


async def test_sync_master_times_out_when_the_slave_cannot_write(tmp_path: Path) -> None:
    master = master_overrides(BrokerRole.SYNC_MASTER, store={"sync_flush_timeout_ms": 400})
    async with pair(tmp_path, master=master) as p:
        await eventually(lambda: _connected(p))
        assert await p.send("Stuck", b"first") is SendStatus.SEND_OK
        assert p.slave.store is not None
        p.slave.store.mark_fault("commit-log fsync failed: Input/output error")
        assert await p.send("Stuck", b"second") is SendStatus.FLUSH_SLAVE_TIMEOUT


async def test_the_slave_copies_topics_groups_and_offsets(tmp_path: Path) -> None:
    async with pair(tmp_path) as p:
        assert await p.send("Meta", b"x") is SendStatus.SEND_OK
        await p.api.update_consumer_offset(p.master.address, "cg-meta", "Meta", 0, 1)

        async def copied() -> bool:
            return (
                "Meta" in p.slave.topics
                and p.slave.offsets.query("cg-meta", "Meta", 0) == 1
                and p.slave.topics.data_version == p.master.topics.data_version
            )

        await eventually(copied)
        answer = await p.api.query_consumer_offset(p.slave.address, "cg-meta", "Meta", 0)
        assert answer == 1


async def test_offsets_committed_to_the_slave_reach_the_master_when_it_returns(
    tmp_path: Path,
) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        addr = f"127.0.0.1:{ns.port}"
        api = BrokerApi(client)
        async with run_broker(tmp_path / "s", addr, **slave_overrides()) as slave:
            async with run_broker(tmp_path / "m", addr, **master_overrides()) as master:
                await api.update_consumer_offset(master.address, "cg", "T", 0, 5)
                await eventually(lambda: _offset(slave, 5))
            # the master is gone: a consumer commits to the slave
            await api.update_consumer_offset(slave.address, "cg", "T", 0, 9)
            async with run_broker(tmp_path / "m", addr, **master_overrides()) as master:

                async def handed_back() -> bool:
                    return await api.query_consumer_offset(master.address, "cg", "T", 0) == 9

                await eventually(handed_back, timeout_s=10)
                assert slave.offsets.query("cg", "T", 0) == 9


async def _offset(broker: Broker, expected: int) -> bool:
    return broker.offsets.query("cg", "T", 0) == expected


async def test_replication_survives_restarts_of_either_side(tmp_path: Path) -> None:
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        addr = f"127.0.0.1:{ns.port}"
        api = BrokerApi(client)

        async def send(m: Broker, body: bytes) -> None:
            msg = Message("Restarts", body)
            result = await api.send(m.address, "broker-a", msg, queue_id=0, producer_group="pg")
            assert result.status is SendStatus.SEND_OK

        async with run_broker(tmp_path / "s", addr, **slave_overrides()) as slave:
            async with run_broker(tmp_path / "m", addr, **master_overrides()) as master:
                for i in range(20):
                    await send(master, f"a{i}".encode())
                await eventually(lambda: _caught_up(master, slave))
            async with run_broker(tmp_path / "m", addr, **master_overrides()) as master:
                for i in range(20):
                    await send(master, f"b{i}".encode())
                await eventually(lambda: _caught_up(master, slave), timeout_s=10)
        async with (
            run_broker(tmp_path / "m", addr, **master_overrides()) as master,
            run_broker(tmp_path / "s", addr, **slave_overrides()) as slave,
        ):
            for i in range(20):
                await send(master, f"c{i}".encode())
            await eventually(lambda: _caught_up(master, slave), timeout_s=10)

            async def all_sixty() -> bool:
                got = await api.pull(slave.address, "cg", "Restarts", 0, 0, max_nums=100)
                return got.status is PullStatus.FOUND and len(got.messages) == 32

            await eventually(all_sixty)
            assert slave.store is not None
            assert slave.store.max_offset_in_queue("Restarts", 0) == 60


async def _caught_up(master: Broker, slave: Broker) -> bool:
    assert master.store is not None and slave.store is not None
    return slave.store.commit_log_max_offset() == master.store.commit_log_max_offset()


async def test_cold_reads_go_to_the_slave_and_consumers_follow_the_suggestion(
    tmp_path: Path,
) -> None:
    # accessMessageInMemoryMaxRatio 0 on the master: every read counts as cold
    master = master_overrides(
        slave_read_enable=True, store={"access_message_in_memory_max_ratio_percent": 0}
    )
    async with pair(tmp_path, master=master) as p:
        for i in range(40):
            assert await p.send("Cold", f"m{i}".encode()) is SendStatus.SEND_OK
        await eventually(p.caught_up)
        await eventually(lambda: _has_topic(p.slave, "Cold"))
        route = await NamesrvApi(p.client, [p.namesrv]).get_route("Cold")
        (broker,) = route.broker_datas
        mq = MessageQueue("Cold", "broker-a", 0)
        targets = PullTargets()
        seen: list[bytes] = []
        hops: list[tuple[int, int]] = []  # (broker id pulled from, suggested next)
        offset = 0
        while len(seen) < 40:
            target, result = await targets.pull(p.api, broker, "cg", mq, offset, max_nums=8)
            hops.append((target.broker_id, result.suggest_which_broker_id))
            seen += [m.body for m in result.messages]
            offset = result.next_begin_offset
        assert seen == [f"m{i}".encode() for i in range(40)]
        assert hops[0] == (0, 1)  # the master sends the cold reader to its slave
        assert (1, 0) in hops  # the slave serves it (and suggests the master again)

        # the master is gone: the route lists only the slave, and reading goes on there
        await p.master.stop()

        async def master_dropped() -> bool:
            r = await NamesrvApi(p.client, [p.namesrv]).get_route("Cold")
            return 0 not in r.broker_datas[0].broker_addrs

        await eventually(master_dropped)
        gone = (await NamesrvApi(p.client, [p.namesrv]).get_route("Cold")).broker_datas[0]
        target, result = await targets.pull(p.api, gone, "cg", mq, 32, max_nums=32)
        assert target.is_slave and [m.body for m in result.messages] == seen[32:]


async def _has_topic(broker: Broker, topic: str) -> bool:
    return topic in broker.topics


async def test_a_slave_without_slave_read_enable_sends_readers_to_its_master(
    tmp_path: Path,
) -> None:
    async with pair(tmp_path, slave=slave_overrides(slave_read_enable=False)) as p:
        assert await p.send("NoRead", b"x") is SendStatus.SEND_OK
        await eventually(p.caught_up)
        result = await p.api.pull(p.slave.address, "cg", "NoRead", 0, 0)
        assert result.status is PullStatus.NO_MATCHED_MSG  # PULL_RETRY_IMMEDIATELY
        assert (result.suggest_which_broker_id, result.next_begin_offset) == (0, 0)
        assert not result.messages


async def test_sync_flush_and_sync_master_answer_once_both_hold(tmp_path: Path) -> None:
    both = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}
    master = master_overrides(BrokerRole.SYNC_MASTER, store=both)
    async with pair(tmp_path, master=master, slave=slave_overrides(store=both)) as p:
        await eventually(lambda: _connected(p))
        statuses = await asyncio.gather(
            *(p.send("Both", f"m{i}".encode(), queue_id=i % 4) for i in range(100))
        )
        assert set(statuses) == {SendStatus.SEND_OK}
        assert p.master.store is not None and p.slave.store is not None
        end = p.master.store.commit_log_max_offset()
        assert p.master.store.commit_log.queue.flushed_offset == end  # on the master's disk
        assert p.slave.store.commit_log_max_offset() == end  # and on the slave
        same_bytes(p)


async def test_sync_master_acks_nothing_a_slave_ahead_of_it_holds(tmp_path: Path) -> None:
    """The master lost its tail; its slave still has it. A send is answered SEND_OK only
    when the slave has dropped those bytes and holds the master's own. While the slave
    truncates it reconnects, so a send may meanwhile find no slave (SLAVE_NOT_AVAILABLE)."""
    async with run_namesrv(tmp_path) as ns, RemotingClient() as client:
        addr = f"127.0.0.1:{ns.port}"
        api = BrokerApi(client)
        master = master_overrides(BrokerRole.SYNC_MASTER)

        async def send(m: Broker, body: bytes) -> SendStatus:
            msg = Message("Ahead", body)
            got = await api.send(m.address, "broker-a", msg, queue_id=0, producer_group="pg")
            return got.status

        async def send_ok(m: Broker, body: bytes) -> bool:
            status = await send(m, body)
            assert status in {SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE}
            return status is SendStatus.SEND_OK

        async with run_broker(tmp_path / "s", addr, **slave_overrides()) as slave:
            async with run_broker(tmp_path / "m", addr, **master) as m:
                await eventually(lambda: _slaves(client, m, 1))
                for i in range(30):
                    assert await send(m, f"a{i}".encode()) is SendStatus.SEND_OK
                assert m.store is not None
                cut = m.store.queue_unit("Ahead", 0, 25)
                assert cut is not None
            with FileMessageStore.open(m.config.store) as store:  # the master lost 5 records
                assert store.truncate_log(cut[0]) > 0
            async with run_broker(tmp_path / "m", addr, **master) as m:
                await eventually(lambda: _slaves(client, m, 1), timeout_s=10)
                for i in range(10):
                    body = f"b{i}".encode()
                    await eventually(lambda: send_ok(m, body), timeout_s=10)  # noqa: B023
                    assert m.store is not None and slave.store is not None
                    end = m.store.commit_log_max_offset()
                    assert slave.store.commit_log_max_offset() >= end
                    mine = commit_log_bytes(slave.config.store.store_path_root_dir, 0, end, FILE)
                    theirs = commit_log_bytes(m.config.store.store_path_root_dir, 0, end, FILE)
                    assert mine == theirs


async def _slaves(client: RemotingClient, m: Broker, n: int) -> bool:
    return (await ha_status(client, m.address)).in_sync_slave_nums == n
