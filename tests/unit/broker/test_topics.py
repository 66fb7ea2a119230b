"""TopicConfigManager: system topics, auto-creation, versions, the topics.json round trip."""

from __future__ import annotations

import orjson

from apogee._util.clock import FakeClock
from apogee.broker.topics import TopicConfigManager, TopicDefaults
from apogee.model.route import PERM_INHERIT, PERM_READ, PERM_RW
from apogee.model.topic import MULTI_TAG, TopicConfig


def manager(**overrides: object) -> TopicConfigManager:
    defaults = TopicDefaults("DefaultCluster", "broker-a", **overrides)  # type: ignore[arg-type]
    return TopicConfigManager(defaults, FakeClock())


def test_system_topics_follow_rocketmq() -> None:
    topics = manager().table

    assert topics["TBW102"] == TopicConfig("TBW102", 8, 8, PERM_INHERIT | PERM_RW)
    assert topics["SELF_TEST_TOPIC"] == TopicConfig("SELF_TEST_TOPIC", 1, 1)
    assert topics["BenchmarkTest"].write_queue_nums == 1024
    assert topics["DefaultCluster"].perm == PERM_INHERIT | PERM_RW
    assert topics["broker-a"] == TopicConfig("broker-a", 1, 1, PERM_INHERIT | PERM_RW)
    assert topics["OFFSET_MOVED_EVENT"] == TopicConfig("OFFSET_MOVED_EVENT", 1, 1)
    assert topics["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18
    assert topics["DefaultCluster_REPLY_TOPIC"] == TopicConfig("DefaultCluster_REPLY_TOPIC", 1, 1)
    assert topics["RMQ_SYS_TRANS_HALF_TOPIC"] == TopicConfig("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1)
    assert topics["RMQ_SYS_TRANS_OP_HALF_TOPIC"] == TopicConfig("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 1)
    assert "RMQ_SYS_TRACE_TOPIC" not in topics


def test_without_auto_create_there_is_no_tbw102_and_no_creation() -> None:
    m = manager(auto_create_topic_enable=False, cluster_topic_enable=False)

    assert "TBW102" not in m
    assert m.table["DefaultCluster"].perm == PERM_INHERIT
    assert m.create_in_send("T1", "TBW102", 4) is None
    assert "T1" not in m


def test_tbw102_loaded_from_file_cannot_create_when_auto_create_is_off() -> None:
    # an old topics.json still holds TBW102 with INHERIT; the switch wins
    m = manager(auto_create_topic_enable=False)
    m.update(TopicConfig("TBW102", 8, 8, PERM_INHERIT | PERM_RW))

    assert m.create_in_send("T1", "TBW102", 4) is None


def test_send_creates_from_the_default_topic() -> None:
    m = manager()
    changes: list[int] = []
    m.add_listener(lambda: changes.append(m.data_version.counter))
    before = m.data_version

    created = m.create_in_send("T1", "TBW102", 4)

    assert created == TopicConfig("T1", 4, 4, PERM_RW)
    assert m.select("T1") == created
    assert m.data_version.counter == before.counter + 1
    assert changes == [m.data_version.counter]
    # a second send finds it and changes nothing
    assert m.create_in_send("T1", "TBW102", 4) == created
    assert len(changes) == 1


def test_queue_count_is_capped_by_the_default_topics_write_queues() -> None:
    m = manager()
    assert m.create_in_send("Wide", "TBW102", 64) == TopicConfig("Wide", 8, 8, PERM_RW)


def test_a_default_topic_without_inherit_creates_nothing() -> None:
    m = manager()
    m.update(TopicConfig("Plain", 8, 8, PERM_RW))
    assert m.create_in_send("T2", "Plain", 4) is None
    assert m.create_in_send("T3", "NoSuchDefault", 4) is None


def test_created_topics_keep_the_default_filter_type_and_drop_write_bits_it_lacks() -> None:
    m = manager()
    m.update(TopicConfig("ReadOnlyBase", 2, 2, PERM_INHERIT | PERM_READ, MULTI_TAG))

    created = m.create_in_send("T4", "ReadOnlyBase", 4)

    assert created == TopicConfig("T4", 2, 2, PERM_READ, MULTI_TAG)


def test_retry_topics_get_the_groups_queue_count_and_rw() -> None:
    m = manager()
    created = m.create_in_send_back("%RETRY%cg", 1)
    assert created == TopicConfig("%RETRY%cg", 1, 1, PERM_RW)


def test_topics_json_round_trip() -> None:
    m = manager()
    m.create_in_send("T1", "TBW102", 4)
    m.update(TopicConfig("T2", 3, 2, PERM_READ, MULTI_TAG, order=True))
    data = m.encode()

    again = manager()
    again.load(data)

    assert again.table == m.table
    assert again.data_version == m.data_version
    # standard JSON with RocketMQ's field names
    obj = orjson.loads(data)
    assert obj["topicConfigTable"]["T1"]["writeQueueNums"] == 4
    assert obj["dataVersion"]["counter"] == m.data_version.counter


def test_load_reads_fastjson_output_and_overrides_system_topics() -> None:
    text = (
        '{"dataVersion":{"counter":7,"timestamp":1700000000123},'
        '"topicConfigTable":{"TBW102":{"order":false,"perm":7,"readQueueNums":16,'
        '"topicFilterType":"SINGLE_TAG","topicName":"TBW102","topicSysFlag":0,'
        '"writeQueueNums":16}}}'
    )
    m = manager()
    m.load(text.encode())

    assert m.table["TBW102"].write_queue_nums == 16
    assert m.data_version.counter == 7
    assert "SELF_TEST_TOPIC" in m


def test_delete() -> None:
    m = manager()
    m.create_in_send("T1", "TBW102", 4)
    version = m.data_version
    assert m.delete("T1")
    assert not m.delete("T1")
    assert m.data_version.counter == version.counter + 1
