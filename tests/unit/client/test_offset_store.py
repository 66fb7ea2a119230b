"""Offset tables: RocketMQ's update and read rules, the broker-side persist plan, offsets.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apogee.client.offset_store import (
    LocalOffsetStore,
    OffsetTable,
    ReadOffsetType,
    RemoteOffsets,
    default_offset_dir,
)
from apogee.errors import ClientError, RemotingTimeoutError
from apogee.model.client import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)
OTHER = MessageQueue("U", "broker-b", 3)


def test_increase_only_never_moves_back_and_a_plain_update_does() -> None:
    table = OffsetTable()
    table.update(MQ0, 10, increase_only=True)  # absent: set whatever the flag
    table.update(MQ0, 7, increase_only=True)
    assert table.get(MQ0) == 10
    table.update(MQ0, 12, increase_only=True)
    assert table.get(MQ0) == 12
    table.update(MQ0, 3)  # a seek
    assert table.get(MQ0) == 3
    table.update(OTHER, 1)
    assert table.snapshot("T") == {MQ0: 3}
    assert table.snapshot() == {MQ0: 3, OTHER: 1}
    table.remove(MQ0)
    assert MQ0 not in table
    assert len(table) == 1


class FakeBrokerFetch:
    """The fetch seam: answers QUERY_CONSUMER_OFFSET from a dict, counting the calls."""

    def __init__(self, offsets: dict[MessageQueue, int], *, fail: bool = False) -> None:
        self.offsets = offsets
        self.fail = fail
        self.calls = 0

    async def fetch(self, mq: MessageQueue) -> int | None:
        self.calls += 1
        if self.fail:
            raise RemotingTimeoutError("broker did not answer")
        return self.offsets.get(mq)


async def test_remote_reads_memory_first_then_the_broker() -> None:
    broker = FakeBrokerFetch({MQ0: 40})
    offsets = RemoteOffsets()
    assert await offsets.read(MQ0, ReadOffsetType.READ_FROM_MEMORY, broker.fetch) is None
    assert broker.calls == 0
    assert await offsets.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE, broker.fetch) == 40
    assert offsets.get(MQ0) == 40  # remembered
    offsets.update(MQ0, 45, increase_only=True)
    assert await offsets.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE, broker.fetch) == 45
    assert broker.calls == 1
    assert await offsets.read(MQ0, ReadOffsetType.READ_FROM_STORE, broker.fetch) == 40
    assert offsets.get(MQ0) == 40  # the store's answer replaces memory
    assert await offsets.read(MQ1, ReadOffsetType.READ_FROM_STORE, broker.fetch) is None
    assert MQ1 not in offsets


async def test_a_broker_failure_reaches_the_caller_and_changes_nothing() -> None:
    offsets = RemoteOffsets()
    with pytest.raises(RemotingTimeoutError):
        await offsets.read(
            MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE, FakeBrokerFetch({}, fail=True).fetch
        )
    assert MQ0 not in offsets


def test_persisting_sends_the_assigned_queues_and_forgets_the_rest() -> None:
    offsets = RemoteOffsets()
    offsets.update(MQ0, 5)
    offsets.update(MQ1, 6)
    offsets.update(OTHER, 7)
    assert offsets.to_persist({MQ0, OTHER}) == {MQ0: 5, OTHER: 7}
    assert MQ1 not in offsets
    assert offsets.to_persist([]) == {}
    assert len(offsets) == 0


def test_the_local_file_sits_where_rocketmq_puts_it(tmp_path: Path) -> None:
    store = LocalOffsetStore("10.0.0.1@4242", "bc-group", base_dir=tmp_path)
    assert store.path == tmp_path / "10.0.0.1@4242" / "bc-group" / "offsets.json"
    default = LocalOffsetStore("c", "g")
    assert default.path == default_offset_dir() / "c" / "g" / "offsets.json"
    assert default_offset_dir() == Path.home() / ".rocketmq_offsets"


def test_local_persist_load_and_read(tmp_path: Path) -> None:
    store = LocalOffsetStore("cid", "g", base_dir=tmp_path)
    store.load()  # no file yet: an empty table
    assert len(store) == 0
    store.update(MQ0, 11)
    store.update(MQ1, 12)
    store.persist_all({MQ0})
    body = json.loads(store.path.read_bytes())  # standard JSON
    assert body == {"offsetTable": {'{"brokerName":"broker-a","queueId":0,"topic":"T"}': 11}}
    store.persist(MQ1)  # merged into what the file has
    store.update(MQ0, 20)
    assert store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 20
    assert store.read(MQ0, ReadOffsetType.READ_FROM_STORE) == 11  # and remembered
    assert store.get(MQ0) == 11

    again = LocalOffsetStore("cid", "g", base_dir=tmp_path)
    assert again.read(MQ1, ReadOffsetType.READ_FROM_MEMORY) is None
    again.load()
    assert again.snapshot() == {MQ0: 11, MQ1: 12}
    assert again.read(OTHER, ReadOffsetType.MEMORY_FIRST_THEN_STORE) is None


def test_a_file_written_by_the_java_client_is_read(tmp_path: Path) -> None:
    store = LocalOffsetStore("cid", "g", base_dir=tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text(  # fastjson, pretty: queue objects as bare keys
        '{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":0,\n'
        '\t\t\t"topic":"T"\n\t\t}:12,{\n\t\t\t"brokerName":"broker-b",\n\t\t\t"queueId":3,\n'
        '\t\t\t"topic":"U"\n\t\t}:7\n\t}\n}'
    )
    store.load()
    assert store.snapshot() == {MQ0: 12, OTHER: 7}


def test_a_torn_file_falls_back_to_its_backup_and_nothing_else_is_lost(tmp_path: Path) -> None:
    store = LocalOffsetStore("cid", "g", base_dir=tmp_path)
    store.update(MQ0, 1)
    store.persist_all([MQ0])
    store.update(MQ0, 2)
    store.persist_all([MQ0])  # the first content is now the backup
    store.path.write_bytes(store.path.read_bytes()[:10])
    reread = LocalOffsetStore("cid", "g", base_dir=tmp_path)
    reread.load()
    assert reread.get(MQ0) == 1

    store.path.with_name("offsets.json.bak").write_bytes(b"{broken")
    with pytest.raises(ClientError, match=r"offsets\.json: not an offset table"):
        LocalOffsetStore("cid", "g", base_dir=tmp_path).load()
    assert store.read(MQ1, ReadOffsetType.READ_FROM_STORE) is None
    with pytest.raises(ClientError):
        store.persist_all([MQ0])  # refuses to overwrite what it cannot read
