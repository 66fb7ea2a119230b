"""Topic and group names, system topics and per-topic configuration.

Owns: TopicConfig, the name rules (RocketMQ TopicValidator) and the names of
system, retry and dead-letter topics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apogee.model.route import PERM_RW

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")

AUTO_CREATE_TOPIC_KEY = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        TRACE_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

#: Producers get NO_PERMISSION when they send to these.
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"


def validate_topic(name: str) -> str | None:
    """Return why ``name`` is not a legal topic, or None when it is."""
    if not name or not name.strip():
        return "the topic name is blank"
    if len(name) > TOPIC_MAX_LENGTH:
        return f"the topic name is longer than {TOPIC_MAX_LENGTH} characters"
    if not _NAME_RE.match(name):
        return f"the topic name {name!r} has characters outside [%|a-zA-Z0-9_-]"
    return None


def validate_group(name: str) -> str | None:
    """Return why ``name`` is not a legal consumer/producer group, or None."""
    if not name or not name.strip():
        return "the group name is blank"
    if len(name) > GROUP_MAX_LENGTH:
        return f"the group name is longer than {GROUP_MAX_LENGTH} characters"
    if not _NAME_RE.match(name):
        return f"the group name {name!r} has characters outside [%|a-zA-Z0-9_-]"
    return None


def is_system_topic(name: str) -> bool:
    return name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Per-topic settings a broker keeps (defaults are RocketMQ's class defaults)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_RW
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
