"""Ordered-send selectors: Java's hashCode, so Python and Java producers agree on the queue."""

from __future__ import annotations

import pytest

from apogee.client.selectors import java_hash, select_by_hash, select_random
from apogee.model.client import MessageQueue
from apogee.model.message import Message

QUEUES = [MessageQueue("T", "broker-a", i) for i in range(4)]
MSG = Message("T", b"x")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("hello", 99162322),  # "hello".hashCode()
        ("abc", 96354),
        ("polygenelubricants", -(2**31)),  # the string whose hashCode is Integer.MIN_VALUE
        ("", 0),
        (5, 5),  # Long.hashCode(5L)
        (-5, 4),  # (int)(-5L ^ (-5L >>> 32))
        (-1, 0),
        (2**32, 1),
    ],
)
def test_java_hash_codes(key: str | int, expected: int) -> None:
    assert java_hash(key) == expected


@pytest.mark.parametrize("bad", [1.5, b"bytes", None, True, 2**63])
def test_keys_without_a_stable_hash_are_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="ordering key"):
        java_hash(bad)


def test_select_by_hash_takes_the_java_remainder() -> None:
    assert select_by_hash(QUEUES, MSG, "hello") == QUEUES[2]  # 99162322 % 4
    assert select_by_hash(QUEUES[:3], MSG, "hello") == QUEUES[1]  # 99162322 % 3
    assert select_by_hash(QUEUES[:3], MSG, "polygenelubricants") == QUEUES[2]  # |MIN % 3|
    assert select_by_hash(QUEUES, MSG, -7) == QUEUES[2]  # Long.hashCode(-7) = 6


def test_one_key_always_gets_one_queue_and_keys_spread() -> None:
    picks = {select_by_hash(QUEUES, MSG, f"order-{i}") for i in range(40)}
    assert picks == set(QUEUES)
    assert {select_by_hash(QUEUES, MSG, "order-7") for _ in range(10)} == {
        select_by_hash(QUEUES, MSG, "order-7")
    }


def test_select_random_stays_in_the_list() -> None:
    assert {select_random(QUEUES, MSG, None) for _ in range(200)} == set(QUEUES)
