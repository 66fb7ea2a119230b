"""Master and slave as ``apogee broker`` processes: what a slave copies besides the log,
a configured haMasterAddress, a slave SIGKILLed under a SYNC_MASTER, a slave
SIGSTOPped (connected, acknowledging nothing) under a SYNC_MASTER, and an idle pair
kept connected by heartbeats until its master is SIGSTOPped."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path

import orjson
import pytest

from apogee._util.net import free_port
from apogee.client.broker_api import BrokerApi
from apogee.client.producer import Producer
from apogee.codes import RequestCode, ResponseCode
from apogee.errors import TopicNotExistError
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.message import Message, MessageExt
from apogee.model.results import PullResult, PullStatus, SendStatus
from apogee.model.topic import TopicConfig
from apogee.protocol.bodies import decode_subscription_group_wrapper
from apogee.protocol.command import RemotingCommand
from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig
from apogee.testing.cluster import BrokerProcess, NamesrvProcess, eventually
from apogee.testing.ha import (
    PROCESS_FILE_SIZE,
    commit_log_bytes,
    ha_status,
    master_process,
    records_in,
    slave_process,
)
from apogee.testing.reading import read_queue
from tests.integration.broker.wire import send as wire_send

pytestmark = pytest.mark.slow


async def _get(client: RemotingClient, addr: str, code: int) -> bytes:
    response = await client.invoke(addr, RemotingCommand.request(code))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return response.body_bytes()


async def _in_sync(client: RemotingClient, master: BrokerProcess, n: int = 1) -> bool:
    return (await ha_status(client, master.address)).in_sync_slave_nums == n


async def _send(api: BrokerApi, master: BrokerProcess, topic: str, body: bytes) -> SendStatus:
    msg = Message(topic, body, properties={"TAGS": "t"})
    result = await api.send(master.address, "broker-a", msg, queue_id=0, producer_group="pg")
    return result.status


async def test_the_slave_copies_topics_groups_and_delay_progress_within_a_period(
    tmp_path: Path,
) -> None:
    """slaveSyncIntervalMs is 300 ms here: a new topic, a new group and the delay
    progress of a delivered delayed message are on the slave within a few periods,
    and in its own config files."""
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="ASYNC_MASTER")
        slave = slave_process(tmp_path, ns.address)
        with master, slave:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                topic = TopicConfig("HaMeta", 3, 2)
                await api.create_topic(master.address, topic)
                group = SubscriptionGroupConfig(
                    "cg-ha-meta", retry_max_times=5, consume_broadcast_enable=False
                )
                await api.update_subscription_group(master.address, group)
                delayed = Message("HaMeta", b"later", properties={"DELAY": "1"})  # 1 s
                sent = await api.send(master.address, "broker-a", delayed, queue_id=0,
                                      producer_group="pg")  # fmt: skip
                assert sent.status is SendStatus.SEND_OK

                async def delivered() -> bytes | None:  # the master moved level 1 on
                    table = await _get(client, master.address, RequestCode.GET_ALL_DELAY_OFFSET)
                    return table if orjson.loads(table)["offsetTable"].get("1") == 1 else None

                master_delays = await eventually(delivered, timeout_s=10)

                async def copied() -> bool:
                    topics = await api.get_all_topic_config(slave.address)
                    groups = decode_subscription_group_wrapper(
                        await _get(client, slave.address,
                                   RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
                    )  # fmt: skip
                    delays = await _get(client, slave.address, RequestCode.GET_ALL_DELAY_OFFSET)
                    return (
                        topics.topic_config_table.get("HaMeta") == topic
                        and groups.subscription_group_table.get("cg-ha-meta") == group
                        and orjson.loads(delays) == orjson.loads(master_delays)
                    )

                await eventually(copied, timeout_s=3, interval_s=0.05)
                # the delivered message itself reached the slave with the log
                got = await eventually(
                    lambda: read_queue(api, slave.address, "HaMeta", 0), timeout_s=5
                )
                assert [m.body for m in got] == [b"later"]
        # the slave keeps its copies in its own files (stopped cleanly above)
        config = slave.store_dir / "config"
        delays = orjson.loads((config / "delayOffset.json").read_bytes())["offsetTable"]
        assert delays["1"] == 1
        assert "cg-ha-meta" in (config / "subscriptionGroup.json").read_text()
        assert "HaMeta" in (config / "topics.json").read_text()


async def test_a_configured_ha_master_address_is_the_one_replicated_from(tmp_path: Path) -> None:
    """The slave registers with a name server that never heard of the master, so no
    address is learned: haMasterAddress alone leads it to the master."""
    with NamesrvProcess(tmp_path / "ns1") as ns1, NamesrvProcess(tmp_path / "ns2") as ns2:
        ha_port = free_port()
        master = master_process(
            tmp_path, ns1.address, role="SYNC_MASTER", properties={"haListenPort": str(ha_port)}
        )
        pinned = f"127.0.0.1:{ha_port}"
        slave = slave_process(tmp_path, ns2.address, properties={"haMasterAddress": pinned})
        with master, slave:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                statuses = {await _send(api, master, "Pinned", b"m%d" % i) for i in range(20)}
                assert statuses == {SendStatus.SEND_OK}  # SYNC_MASTER: the slave has them
                info = (await ha_status(client, slave.address)).ha_client_runtime_info
                end = (await ha_status(client, master.address)).master_commit_log_max_offset
                assert info.activated and info.master_addr == pinned
                assert info.max_offset == end
                mine = commit_log_bytes(slave.store_dir, 0, end, PROCESS_FILE_SIZE)
                assert mine == commit_log_bytes(master.store_dir, 0, end, PROCESS_FILE_SIZE)
        assert f"master HA address: {pinned}" in slave.log_text()


async def test_a_killed_slave_resumes_from_its_end_and_sync_master_answers_meanwhile(
    tmp_path: Path,
) -> None:
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(
            tmp_path, ns.address, role="SYNC_MASTER", properties={"syncFlushTimeout": "1000"}
        )
        slave = slave_process(tmp_path, ns.address)
        with master:
            slave.start()
            try:
                async with RemotingClient(ClientConfig(request_timeout_s=3.0)) as client:
                    api = BrokerApi(client)
                    await eventually(lambda: _in_sync(client, master), timeout_s=10)
                    for i in range(20):
                        assert (
                            await _send(api, master, "SlaveDies", b"a%d" % i) is SendStatus.SEND_OK
                        )
                    before = (await ha_status(client, slave.address)).ha_client_runtime_info
                    slave.kill()

                    async def no_slave() -> bool:
                        return not (await ha_status(client, master.address)).ha_connection_info

                    await eventually(no_slave, timeout_s=5)
                    for i in range(10):  # stored on the master, not on a slave
                        status = await _send(api, master, "SlaveDies", b"b%d" % i)
                        assert status is SendStatus.SLAVE_NOT_AVAILABLE

                    slave.start()
                    await eventually(lambda: _in_sync(client, master), timeout_s=10)
                    for i in range(10):
                        assert (
                            await _send(api, master, "SlaveDies", b"c%d" % i) is SendStatus.SEND_OK
                        )
                    end = (await ha_status(client, master.address)).master_commit_log_max_offset
                    info = (await ha_status(client, slave.address)).ha_client_runtime_info
                    assert info.max_offset == end
                    mine = commit_log_bytes(slave.store_dir, 0, end, PROCESS_FILE_SIZE)
                    assert mine == commit_log_bytes(master.store_dir, 0, end, PROCESS_FILE_SIZE)
                    expected = [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(10)]
                    expected += [b"c%d" % i for i in range(10)]

                    async def all_there() -> bool:
                        got = await read_queue(api, slave.address, "SlaveDies", 0)
                        return [m.body for m in got] == expected

                    await eventually(all_there, timeout_s=5)
            finally:
                assert slave.stop() == 0, slave.log_text()
    # The restarted slave asked for its own end (from the start of its last record,
    # which it checks against the master's bytes), not for the log from 0.
    asks = [int(n) for n in re.findall(r"asks for offset (\d+); streaming from", master.log_text())]
    last = records_in(master.store_dir, before.max_offset, PROCESS_FILE_SIZE)[-1]
    assert last.body == b"a19" and last.commit_log_offset + last.store_size == before.max_offset
    assert asks == [0, last.commit_log_offset], asks


async def _connections(client: RemotingClient, master: BrokerProcess) -> int:
    return len((await ha_status(client, master.address)).ha_connection_info)


async def _timed_send(
    producer: Producer, topic: str, body: bytes, **props: str
) -> tuple[SendStatus, float, int]:
    """(status, seconds taken, queue id) of one send by Apogee's producer."""
    began = time.monotonic()
    result = await producer.send(Message(topic, body, properties=props))
    return result.status, time.monotonic() - began, result.message_queue.queue_id


async def _caught_up_byte_for_byte(
    client: RemotingClient, master: BrokerProcess, slave: BrokerProcess
) -> None:
    end = (await ha_status(client, master.address)).master_commit_log_max_offset

    async def there() -> bool:
        info = (await ha_status(client, slave.address)).ha_client_runtime_info
        return info.max_offset == end

    await eventually(there, timeout_s=10)
    mine = commit_log_bytes(slave.store_dir, 0, end, PROCESS_FILE_SIZE)
    assert mine == commit_log_bytes(master.store_dir, 0, end, PROCESS_FILE_SIZE)


async def test_a_stopped_slave_times_sync_sends_out_and_catches_up_when_it_runs_again(
    tmp_path: Path,
) -> None:
    """The slave is SIGSTOPped: its connection stays open, it acknowledges nothing. A
    send waits syncFlushTimeout (500 ms) and is answered FLUSH_SLAVE_TIMEOUT (code 12)
    with the message kept on the master; once the slave is haMaxGapNotInSync behind,
    SLAVE_NOT_AVAILABLE comes at once. SIGCONT: the slave catches up byte for byte
    and sends are SEND_OK again."""
    gap = 64 << 10
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="SYNC_MASTER", properties={
            "syncFlushTimeout": "500", "haMaxGapNotInSync": str(gap),
            "haHousekeepingInterval": "10000",  # the link outlives the stop
        })  # fmt: skip
        slave = slave_process(tmp_path, ns.address)
        with master, slave:
            async with (
                RemotingClient(ClientConfig(request_timeout_s=3.0)) as client,
                Producer("pg-stall", namesrv=ns.address) as producer,
            ):
                api = BrokerApi(client)
                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                status, _, queue = await _timed_send(producer, "Stall", b"before")
                assert status is SendStatus.SEND_OK

                slave.pause()
                try:
                    status, took, queue = await _timed_send(producer, "Stall", b"unacked")
                    assert status is SendStatus.FLUSH_SLAVE_TIMEOUT
                    assert 0.45 <= took < 1.5, took
                    # the same on the wire: RocketMQ's code 12, after the same wait
                    began = time.monotonic()
                    answer = await wire_send(
                        client, master.address, "Stall", b"raw", queue_id=queue
                    )
                    assert answer.code == 12, answer.remark  # FLUSH_SLAVE_TIMEOUT
                    assert 0.45 <= time.monotonic() - began < 1.5
                    assert await _connections(client, master) == 1  # still connected
                    stored = [m.body for m in await read_queue(api, master.address, "Stall", queue)]
                    assert stored[-2:] == [b"unacked", b"raw"]

                    # WAIT=false sends do not wait; they put the slave past the gap
                    # (random bodies: the producer compresses others to nothing)
                    for _ in range(3):
                        bulk = os.urandom(30 << 10)
                        status, _, _ = await _timed_send(producer, "Stall", bulk, WAIT="false")
                        assert status is SendStatus.SEND_OK
                    status, took, _ = await _timed_send(producer, "Stall", b"too far behind")
                    assert status is SendStatus.SLAVE_NOT_AVAILABLE
                    assert took < 0.45, took  # at once, not after syncFlushTimeout
                    assert await _connections(client, master) == 1
                finally:
                    slave.resume()

                await _caught_up_byte_for_byte(client, master, slave)
                status, _, _ = await _timed_send(producer, "Stall", b"after")
                assert status is SendStatus.SEND_OK


async def test_a_slave_stopped_past_the_housekeeping_interval_is_dropped_by_its_master(
    tmp_path: Path,
) -> None:
    """Nothing read from the slave for haHousekeepingInterval (1.5 s here): the master
    closes its connection, and sends are answered SLAVE_NOT_AVAILABLE at once instead
    of FLUSH_SLAVE_TIMEOUT. SIGCONT: the slave connects again and catches up."""
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="SYNC_MASTER", properties={
            "syncFlushTimeout": "500", "haHousekeepingInterval": "1500",
        })  # fmt: skip
        slave = slave_process(tmp_path, ns.address)
        with master, slave:
            async with (
                RemotingClient(ClientConfig(request_timeout_s=3.0)) as client,
                Producer("pg-stall", namesrv=ns.address) as producer,
            ):
                api = BrokerApi(client)
                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                status, _, queue = await _timed_send(producer, "Gone", b"before")
                assert status is SendStatus.SEND_OK

                slave.pause()
                stopped = time.monotonic()
                try:
                    status, _, _ = await _timed_send(producer, "Gone", b"timed out")
                    assert status is SendStatus.FLUSH_SLAVE_TIMEOUT
                    await eventually(
                        lambda: _no_connection(client, master), timeout_s=5, interval_s=0.05
                    )
                    # dropped for its silence, not earlier: its last report (one every
                    # 200 ms) came at most 200 ms before the stop
                    assert time.monotonic() - stopped >= 1.3
                    status, took, queue = await _timed_send(producer, "Gone", b"no slave")
                    assert status is SendStatus.SLAVE_NOT_AVAILABLE
                    assert took < 0.45, took  # at once
                    stored = [m.body for m in await read_queue(api, master.address, "Gone", queue)]
                    assert stored[-1] == b"no slave"
                finally:
                    slave.resume()

                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                await _caught_up_byte_for_byte(client, master, slave)
                status, _, _ = await _timed_send(producer, "Gone", b"after")
                assert status is SendStatus.SEND_OK
    assert re.search(r"slave \S+ silent for \d+\.\ds; closing", master.log_text())


async def _no_connection(client: RemotingClient, master: BrokerProcess) -> bool:
    return await _connections(client, master) == 0


async def test_an_idle_pair_lives_on_heartbeats_and_a_slave_drops_a_silent_master(
    tmp_path: Path,
) -> None:
    """haSendHeartbeatInterval 250 ms and haHousekeepingInterval 1 s on both sides: a
    pair with nothing to replicate stays connected through several housekeeping
    intervals, on the slave's reports and the master's heartbeats alone. A master
    SIGSTOPped past the interval is dropped by its slave, which connects again once
    the master runs."""
    timers = {"haSendHeartbeatInterval": "250", "haHousekeepingInterval": "1000"}
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="ASYNC_MASTER", properties=timers)
        slave = slave_process(tmp_path, ns.address, properties=timers)
        with master, slave:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                assert await _send(api, master, "Idle", b"one") is SendStatus.SEND_OK
                await _caught_up_byte_for_byte(client, master, slave)

                def connections() -> int:
                    return master.log_text().count("asks for offset")

                before = (await ha_status(client, slave.address)).ha_client_runtime_info
                links = connections()
                await asyncio.sleep(2.5)  # 2.5 housekeeping intervals without a message
                after = (await ha_status(client, slave.address)).ha_client_runtime_info
                assert after.last_write_timestamp > before.last_write_timestamp  # reports
                assert after.last_read_timestamp > before.last_read_timestamp  # heartbeats
                assert after.activated and connections() == links == 1
                assert "silent for" not in master.log_text() + slave.log_text()

                master.pause()
                try:
                    silent = re.compile(r"master \S+ silent for \d+\.\ds; closing")
                    await eventually(lambda: _found(silent, slave), timeout_s=5, interval_s=0.1)
                finally:
                    master.resume()

                async def connected_again() -> bool:
                    return connections() == 2 and await _in_sync(client, master)

                await eventually(connected_again, timeout_s=10, interval_s=0.1)
                assert await _send(api, master, "Idle", b"two") is SendStatus.SEND_OK
                await _caught_up_byte_for_byte(client, master, slave)


async def _found(pattern: re.Pattern[str], process: BrokerProcess) -> bool:
    return pattern.search(process.log_text()) is not None


async def test_a_slave_without_slave_read_enable_sends_readers_to_its_master(
    tmp_path: Path,
) -> None:
    """slaveReadEnable=false on the slave: it has the message (its SYNC_MASTER answered
    SEND_OK), but a pull there is answered PULL_RETRY_IMMEDIATELY (NO_MATCHED_MSG to the
    client) naming the master, from the same offset."""
    with NamesrvProcess(tmp_path / "ns") as ns:
        master = master_process(tmp_path, ns.address, role="SYNC_MASTER")
        slave = slave_process(tmp_path, ns.address, properties={"slaveReadEnable": "false"})
        with master, slave:
            async with RemotingClient(ClientConfig(request_timeout_s=2.0)) as client:
                api = BrokerApi(client)
                await eventually(lambda: _in_sync(client, master), timeout_s=10)
                assert await _send(api, master, "NoRead", b"x") is SendStatus.SEND_OK

                async def answered() -> PullResult[MessageExt] | None:
                    try:  # the topic reaches the slave with its next metadata copy
                        return await api.pull(slave.address, "cg", "NoRead", 0, 0)
                    except TopicNotExistError:
                        return None

                result = await eventually(answered, timeout_s=5)
                assert result.status is PullStatus.NO_MATCHED_MSG and not result.messages
                assert (result.suggest_which_broker_id, result.next_begin_offset) == (0, 0)
                got = await read_queue(api, master.address, "NoRead", 0)
                assert [m.body for m in got] == [b"x"]
