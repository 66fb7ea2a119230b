"""Queue selectors: which queue of a topic an ordered send goes to.

Owns: the QueueSelector signature and the selectors RocketMQ ships
(SelectMessageQueueByHash, SelectMessageQueueByRandom). A selector gets the
topic's writable queues (sorted by broker name, then queue id), the message
and the caller's argument, and returns one of the queues.

``select_by_hash`` hashes like Java (``String.hashCode`` for text,
``Long.hashCode`` for integers, then ``abs(hash % n)``), so a Python and a
Java producer send the same key to the same queue. Python's own ``hash()``
is salted per process and would scatter one key over queues across
restarts, which is why other key types are refused.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from apogee.model.client import MessageQueue
from apogee.model.javahash import java_string_hash
from apogee.model.message import Message

#: ``selector(queues, message, arg) -> queue``; ``queues`` is never empty.
QueueSelector: TypeAlias = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def java_hash(key: object) -> int:
    """The Java ``hashCode`` of a str (String) or an int (Long), as a signed 32-bit int.

    Raises:
        TypeError: ``key`` is neither.
    """
    if isinstance(key, str):
        return java_string_hash(key)
    if isinstance(key, int) and not isinstance(key, bool):
        if not -(2**63) <= key < 2**63:
            raise TypeError(f"ordering key {key} does not fit a Java long")
        unsigned = key & 0xFFFFFFFFFFFFFFFF
        folded = (unsigned ^ (unsigned >> 32)) & 0xFFFFFFFF
        return folded - (1 << 32) if folded & 0x80000000 else folded
    raise TypeError(
        f"an ordering key must be a str or an int, got {type(key).__name__}: "
        "other types have no hash that is the same in every process"
    )


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """The queue at ``abs(hashCode(arg) % len(queues))`` (Java remainder semantics)."""
    h = java_hash(arg)
    n = len(queues)
    remainder = abs(h) % n  # Java's % keeps the sign of the dividend; abs() of it is this
    return queues[remainder]


def select_random(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Any queue, uniformly."""
    return random.choice(queues)
