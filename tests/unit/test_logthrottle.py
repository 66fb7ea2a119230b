"""ThrottleFilter: alike records beyond the burst are left out, and counted."""

from __future__ import annotations

import logging

from apogee._util.logthrottle import ThrottleFilter
from apogee.errors import MAX_MESSAGE_LENGTH, ProtocolError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, name: str = "apogee.x") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)


def test_alike_records_beyond_the_burst_are_left_out_and_counted() -> None:
    clock = Clock()
    throttle = ThrottleFilter(burst=3, window_s=10, clock=clock)
    passed = [throttle.filter(record("refused %s", i)) for i in range(10)]
    assert passed == [True] * 3 + [False] * 7
    assert throttle.filter(record("another %s", 1))  # another kind has its own budget
    clock.now = 10.5
    late = record("refused %s", 99)
    assert throttle.filter(late)
    assert "7 more like this were left out" in late.getMessage()
    assert late.getMessage().startswith("refused 99")


def test_error_messages_quoting_a_peer_are_cut() -> None:
    error = ProtocolError("bad code: " + "x" * 10_000_000)
    assert len(str(error)) == MAX_MESSAGE_LENGTH
    assert str(error).endswith("...")


def test_a_record_is_counted_once_by_a_filter_shared_by_two_handlers() -> None:
    throttle = ThrottleFilter(burst=2, window_s=10, clock=Clock())
    verdicts = []
    for i in range(4):
        r = record("refused %s", i)
        verdicts.append((throttle.filter(r), throttle.filter(r)))  # stderr, then the file
    assert verdicts == [(True, True), (True, True), (False, False), (False, False)]
