"""Delayed messages: where a send with a DELAY level is stored until it is due.

Owns: the rewrite RocketMQ applies on SEND (CommitLog.asyncPutMessage in
4.x): a message whose DELAY property names a level > 0 is stored in
SCHEDULE_TOPIC_XXXX, queue ``level - 1`` (the level clamped to the highest
configured one), with REAL_TOPIC and REAL_QID keeping its destination. The
store indexes such records with their delivery time as tag code.

The delivery side, which reads the queues of SCHEDULE_TOPIC_XXXX and puts
due messages back to REAL_TOPIC/REAL_QID, is ``schedule_service``; sent-back
messages take the same path (``retry``).
"""

from __future__ import annotations

from dataclasses import dataclass

from apogee.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    properties_to_string,
    property_value,
    string_to_properties,
)
from apogee.model.topic import SCHEDULE_TOPIC

DELAY_MARKER = PROPERTY_DELAY_TIME_LEVEL + "\x01"


@dataclass(frozen=True, slots=True)
class ScheduledPlacement:
    topic: str
    queue_id: int
    properties: str


class BadDelayLevelError(ValueError):
    """The DELAY property is not a whole number."""


def delay_level(properties: str) -> int:
    """The DELAY level of a property string; 0 when absent."""
    text = property_value(properties, PROPERTY_DELAY_TIME_LEVEL)
    if text is None:
        return 0
    try:
        return int(text)
    except ValueError:
        raise BadDelayLevelError(f"DELAY property {text!r} is not a number") from None


def schedule_placement(
    topic: str, queue_id: int, properties: str, max_level: int
) -> ScheduledPlacement | None:
    """Where a message with these properties is stored; None when it is not delayed."""
    level = delay_level(properties)
    if level <= 0:
        return None
    level = min(level, max_level)
    props = string_to_properties(properties)
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    return ScheduledPlacement(SCHEDULE_TOPIC, level - 1, properties_to_string(props))
