"""What a client gets back from sends and pulls, as values.

Owns: SendStatus / SendResult and PullStatus / PullResult, named after the
Java client's classes.

These are outcomes, not faults: a send that was stored but not flushed or
replicated in time is a SendResult with a non-OK status (the message *is*
stored), and a pull that finds nothing is a PullResult with NO_NEW_MSG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from apogee.model.client import MessageQueue


class SendStatus(Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    status: SendStatus
    message_queue: MessageQueue
    queue_offset: int  # of the first message for a batch
    offset_msg_id: str  # the broker's id (store host + commit-log offset); comma-joined for a batch
    msg_id: str  # the producer's UNIQ_KEY; comma-joined for a batch
    transaction_id: str | None = None
    region_id: str | None = None


class PullStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


#: The message type of a pull: MessageExt, or the lazily decoded ReceivedMessage.
M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class PullResult(Generic[M]):
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0
    messages: list[M] = field(default_factory=list)
