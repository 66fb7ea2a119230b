"""The version and change listeners the topic and group tables share (VersionedTable)."""

from __future__ import annotations

import pytest

from apogee._util.clock import FakeClock
from apogee.broker.groups import SubscriptionGroupManager
from apogee.broker.topics import TopicConfigManager, TopicDefaults
from apogee.broker.versioned import VersionedTable
from apogee.model.group import SubscriptionGroupConfig
from apogee.model.route import DataVersion
from apogee.protocol.bodies import SubscriptionGroupWrapper, TopicConfigWrapper


def test_a_failing_listener_is_logged_and_the_next_still_hears(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = VersionedTable(FakeClock(), "test")
    heard: list[int] = []

    def broken() -> None:
        raise RuntimeError("disk gone")

    table.add_listener(broken)
    table.add_listener(lambda: heard.append(table.data_version.counter))
    table._changed()
    table._changed()
    assert heard == [1, 2]
    assert "test change listener failed" in caplog.text


def test_both_tables_load_a_saved_version_and_adopt_only_news() -> None:
    clock = FakeClock()
    groups = SubscriptionGroupManager(clock)
    topics = TopicConfigManager(TopicDefaults("c", "b"), clock)
    saved = DataVersion(timestamp=123, counter=7)
    groups._loaded(DataVersion(timestamp=0, counter=0))
    assert groups.data_version.timestamp == clock.now_ms()  # a blank version keeps its own
    groups._loaded(saved)
    assert groups.data_version == saved

    told: list[str] = []
    groups.add_listener(lambda: told.append("groups"))
    topics.add_listener(lambda: told.append("topics"))
    news = SubscriptionGroupWrapper(
        {"g": SubscriptionGroupConfig("g")}, DataVersion(timestamp=9, counter=9)
    )
    assert groups.adopt(news) and "g" in groups.table
    assert not groups.adopt(news)  # the same version again: nothing new
    wrapper = TopicConfigWrapper({}, DataVersion(timestamp=5, counter=5))
    assert topics.adopt(wrapper) and topics.table == {}
    assert not topics.adopt(wrapper)
    assert told == ["groups", "topics"]
