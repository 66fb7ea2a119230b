"""The broker's topic table: which topics it serves, with how many queues and what permission.

Owns: TopicConfigManager — system topics created at start, auto-creation on
send (from a default topic with INHERIT) and for retry topics, the
DataVersion bumped on every change, and the JSON form of ``config/topics.json``
(RocketMQ's TopicConfigSerializeWrapper).

No I/O of its own: ``encode``/``load`` give and take bytes; the owner writes
the file. Every change calls the change listeners once (persist, register
with the name servers). Rules from RocketMQ's TopicConfigManager:

* created at start: SELF_TEST_TOPIC 1/1; TBW102 8/8 perm 7 only with
  autoCreateTopicEnable; BenchmarkTest 1024/1024; the cluster-name topic
  (INHERIT, + RW with clusterTopicEnable); the broker-name topic 1/1
  (INHERIT, + RW with brokerTopicEnable); OFFSET_MOVED_EVENT 1/1;
  SCHEDULE_TOPIC_XXXX one queue per delay level; RMQ_SYS_TRANS_HALF_TOPIC
  and RMQ_SYS_TRANS_OP_HALF_TOPIC 1/1 (as 5.x does at start; 4.x creates
  them on first use); the trace topic 1/1 with traceTopicEnable;
  ``<cluster>_REPLY_TOPIC`` 1/1. A persisted file then overrides them by name.
* a send to an unknown topic creates it from the header's default topic if
  that one has INHERIT: queues = min(header defaultTopicQueueNums, default's
  writeQueueNums), perm = default's perm without INHERIT, same filter type.
  Without autoCreateTopicEnable TBW102 counts as plain RW, so nothing is
  created.
* retry topics are created with the group's retry queue count, perm RW.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from apogee._util.clock import Clock
from apogee.broker.config import BrokerConfig
from apogee.broker.versioned import VersionedTable
from apogee.model.route import PERM_INHERIT, PERM_RW
from apogee.model.topic import (
    AUTO_CREATE_TOPIC_KEY,
    BENCHMARK_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    OFFSET_MOVED_EVENT,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TopicConfig,
)
from apogee.protocol.bodies import (
    TopicConfigWrapper,
    decode_topic_config_wrapper,
    encode_topic_config_wrapper,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """The BrokerConfig values that decide the system topics and auto-creation."""

    cluster_name: str
    broker_name: str
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    trace_topic_enable: bool = False
    trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    schedule_queue_nums: int = 18

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TopicDefaults:
        return cls(
            cluster_name=config.broker_cluster_name,
            broker_name=config.broker_name,
            auto_create_topic_enable=config.auto_create_topic_enable,
            default_topic_queue_nums=config.default_topic_queue_nums,
            cluster_topic_enable=config.cluster_topic_enable,
            broker_topic_enable=config.broker_topic_enable,
            trace_topic_enable=config.trace_topic_enable,
            trace_topic_name=config.msg_trace_topic_name,
            schedule_queue_nums=len(config.store.delay_levels_ms),
        )


def system_topics(d: TopicDefaults) -> list[TopicConfig]:
    """The topics a broker creates at start (see the module docstring)."""
    inherit_rw = PERM_INHERIT | PERM_RW
    topics = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
    if d.auto_create_topic_enable:
        n = d.default_topic_queue_nums
        topics.append(TopicConfig(AUTO_CREATE_TOPIC_KEY, n, n, inherit_rw))
    topics += [
        TopicConfig(BENCHMARK_TOPIC, 1024, 1024),
        TopicConfig(d.cluster_name, perm=inherit_rw if d.cluster_topic_enable else PERM_INHERIT),
        TopicConfig(d.broker_name, 1, 1, inherit_rw if d.broker_topic_enable else PERM_INHERIT),
        TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
        TopicConfig(SCHEDULE_TOPIC, d.schedule_queue_nums, d.schedule_queue_nums),
        TopicConfig(TRANS_HALF_TOPIC, 1, 1),
        TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
    ]
    if d.trace_topic_enable:
        topics.append(TopicConfig(d.trace_topic_name, 1, 1))
    topics.append(TopicConfig(f"{d.cluster_name}_REPLY_TOPIC", 1, 1))
    return topics


class TopicConfigManager(VersionedTable):
    """Topic name -> TopicConfig, versioned."""

    def __init__(self, defaults: TopicDefaults, clock: Clock) -> None:
        super().__init__(clock, "topic")
        self.defaults = defaults
        self.table: dict[str, TopicConfig] = {t.topic_name: t for t in system_topics(defaults)}
        self.system_topic_names = frozenset(self.table)

    def touch(self) -> None:
        """Bump the version without a table change (the broker's own permission moved)."""
        self._changed()

    # -- persistence ----------------------------------------------------------

    def load(self, data: bytes | None) -> None:
        """Apply a persisted topics.json over the system topics (None: no file yet)."""
        if not data:
            return
        wrapper = decode_topic_config_wrapper(data)
        self.table.update(wrapper.topic_config_table)
        self._loaded(wrapper.data_version)

    def encode(self) -> bytes:
        return encode_topic_config_wrapper(self.wrapper())

    def wrapper(self) -> TopicConfigWrapper:
        """A snapshot for registration and GET_ALL_TOPIC_CONFIG."""
        return TopicConfigWrapper(dict(self.table), self.data_version)

    # -- queries ----------------------------------------------------------------

    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self.table

    def __len__(self) -> int:
        return len(self.table)

    # -- changes -----------------------------------------------------------------

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create ``topic`` from ``default_topic`` for a send; None if not allowed."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        base = self.table.get(default_topic)
        if base is None:
            log.warning("send to %s: default topic %s does not exist", topic, default_topic)
            return None
        perm = base.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY and not self.defaults.auto_create_topic_enable:
            perm = PERM_RW
        queues = min(client_queue_nums, base.write_queue_nums)
        if not perm & PERM_INHERIT or queues <= 0:
            log.warning("send to %s: default topic %s cannot create it", topic, default_topic)
            return None
        created = TopicConfig(
            topic, queues, queues, perm & ~PERM_INHERIT, base.topic_filter_type, topic_sys_flag
        )
        self.table[topic] = created
        log.info("auto-created topic %s from %s: %s", topic, default_topic, created)
        self._changed()
        return created

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int = PERM_RW, topic_sys_flag: int = 0
    ) -> TopicConfig:
        """The retry (or dead-letter) topic of a group, created if missing."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self.table[topic] = created
        log.info("created topic %s: %s", topic, created)
        self._changed()
        return created

    def adopt_stored(self, stored: dict[str, list[int]]) -> list[TopicConfig]:
        """Configs for topics that have consume queues but no config; the ones made.

        A topic created just before a crash on a full disk can have its
        messages stored and its config unwritten: without a config its
        messages could not be read. It gets as many queues as it used, at
        least the default number for an ordinary topic.
        """
        made: list[TopicConfig] = []
        for topic, queue_ids in stored.items():
            if topic in self.table or not queue_ids:
                continue
            used = max(queue_ids) + 1
            internal = topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
            n = used if internal else max(used, self.defaults.default_topic_queue_nums)
            config = TopicConfig(topic, n, n)
            self.table[topic] = config
            made.append(config)
            log.warning("topic %s has stored messages but no config: made again as %s",
                        topic, config)  # fmt: skip
        if made:
            self._changed()
        return made

    def update(self, config: TopicConfig) -> None:
        """Create or replace a topic (admin requests)."""
        if self.table.get(config.topic_name) == config:
            return
        self.table[config.topic_name] = config
        self._changed()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._changed()
        return True

    def adopt(self, wrapper: TopicConfigWrapper) -> bool:
        """Take a master's topic table and its version (a slave's copy); False when
        the version is the one held already."""
        if not self._adopting(wrapper.data_version):
            return False
        self.table = dict(wrapper.topic_config_table)
        self._notify()
        return True
