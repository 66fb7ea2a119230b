"""SubscriptionGroupManager and ConsumerOffsetManager: auto-creation and file round trips."""

from __future__ import annotations

import orjson
import pytest

from apogee._util.clock import FakeClock
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.offsets import ConsumerOffsetManager
from apogee.errors import ProtocolError
from apogee.model.group import SubscriptionGroupConfig


def test_unknown_groups_are_created_with_rocketmq_defaults() -> None:
    groups = SubscriptionGroupManager(FakeClock())
    version = groups.data_version

    config = groups.find_or_create("cg1")

    assert config == SubscriptionGroupConfig("cg1")
    assert config is not None
    assert (config.retry_queue_nums, config.retry_max_times) == (1, 16)
    assert config.consume_enable and config.consume_broadcast_enable
    assert config.notify_consumer_ids_changed_enable
    assert groups.data_version.counter == version.counter + 1
    assert groups.find_or_create("cg1") is config


def test_no_auto_create_means_unknown_groups_stay_unknown() -> None:
    groups = SubscriptionGroupManager(FakeClock(), auto_create=False)
    assert groups.find_or_create("cg1") is None
    assert groups.find_or_create("TOOLS_CONSUMER") is not None


def test_invalid_group_names_are_not_created() -> None:
    groups = SubscriptionGroupManager(FakeClock())
    assert groups.find_or_create("bad group!") is None
    assert "bad group!" not in groups.table


def test_subscription_group_file_round_trip() -> None:
    groups = SubscriptionGroupManager(FakeClock())
    groups.find_or_create("cg1")
    groups.update(SubscriptionGroupConfig("cg2", consume_enable=False, retry_max_times=3))
    data = groups.encode()

    again = SubscriptionGroupManager(FakeClock())
    again.load(data)

    assert again.table == groups.table
    assert again.data_version == groups.data_version
    assert orjson.loads(data)["subscriptionGroupTable"]["cg2"]["retryMaxTimes"] == 3


def test_offsets_commit_query_and_round_trip() -> None:
    offsets = ConsumerOffsetManager()
    assert offsets.query("cg", "T", 0) == -1
    offsets.commit("cg", "T", 0, 12)
    offsets.commit("cg", "T", 3, 7)
    offsets.commit("other", "T", 0, 1)
    dirty_before = offsets.dirty

    data = offsets.encode()
    assert (dirty_before, offsets.dirty) == (True, False)
    assert orjson.loads(data) == {"offsetTable": {"T@cg": {"0": 12, "3": 7}, "T@other": {"0": 1}}}

    again = ConsumerOffsetManager()
    again.load(data)
    assert again.query("cg", "T", 3) == 7
    assert again.queue_offsets("cg", "T") == {0: 12, 3: 7}
    assert sorted(again.groups_and_topics()) == [("cg", "T"), ("other", "T")]


def test_an_unchanged_commit_leaves_the_table_clean() -> None:
    offsets = ConsumerOffsetManager()
    offsets.commit("cg", "T", 0, 5)
    offsets.encode()
    offsets.commit("cg", "T", 0, 5)
    assert not offsets.dirty


def test_offsets_file_with_bare_integer_keys_as_rocketmq_writes_it() -> None:
    offsets = ConsumerOffsetManager()
    offsets.load(b'{"offsetTable":{"TopicTest@cg1":{0:12,1:7}}}')
    assert offsets.queue_offsets("cg1", "TopicTest") == {0: 12, 1: 7}


@pytest.mark.parametrize(
    "text",
    [
        b'{"offsetTable":[]}',
        b'{"offsetTable":{"nogroup":{"0":1}}}',
        b'{"offsetTable":{"T@g":{"x":1}}}',
    ],
)
def test_malformed_offset_files_are_refused_by_name(text: bytes) -> None:
    with pytest.raises(ProtocolError, match=r"consumerOffset\.json"):
        ConsumerOffsetManager().load(text)


def test_remove_group() -> None:
    offsets = ConsumerOffsetManager()
    offsets.commit("cg", "T1", 0, 1)
    offsets.commit("cg", "T2", 0, 1)
    offsets.commit("keep", "T1", 0, 1)
    assert offsets.remove_group("cg") == 2
    assert list(offsets.groups_and_topics()) == [("keep", "T1")]
